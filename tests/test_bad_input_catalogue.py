"""The bad-input catalogue renders whatever shape a test recorded (``make docs`` failed on a mapping)."""

from __future__ import annotations

import json

import bad_input_catalogue


def test_every_recorded_shape_renders_one_row_each(monkeypatch):
    monkeypatch.setattr(bad_input_catalogue, "RECORDED", [])
    bad_input_catalogue.record("lake_maintenance_group", {"lease": {"ttl": 60}}, ValueError("lease: unknown key 'ttl'"))
    bad_input_catalogue.record("lake_maintenance_group", {"lease": {"ttl": 60}}, "the same input again")
    bad_input_catalogue.record("table name", 42, TypeError("a table name is text"), table_checked=True)
    bad_input_catalogue.record("connection", "host='a|b'", "refused")

    # One row per distinct input (the last message wins). What the session saves is JSON, and what make docs renders is what it reads back.
    recorded = json.loads(json.dumps(bad_input_catalogue.RECORDED))
    page = bad_input_catalogue.catalogue(recorded)

    rows = [line for line in page.splitlines() if line.startswith("| ") and not line.startswith("| where")]
    assert len(rows) == 3, page
    assert "| lake_maintenance_group | `lease={'ttl': 60}` | the same input again |" in rows
    assert any(row.startswith("| table name | `42` | TypeError") for row in rows)
    assert any("host='a\\|b'" in row for row in rows)  # a pipe would split the table's cell
    assert "3 distinct bad inputs" in page and "for the 1 tried against a real table" in page
