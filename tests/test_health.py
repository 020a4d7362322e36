"""Table health: figures from real PyIceberg metadata, checked against the `files` metadata table,
and the score's parts (pure logic)."""

from __future__ import annotations

import datetime as dt
from collections import Counter

import pytest

from airflow_lake_provider.exceptions import LakeConfigError
from airflow_lake_provider.core.health import HealthThresholds, TableHealth, parse_thresholds, table_health
from test_sensors import TARGET, append_small_files, healthy_table

DAY0 = dt.date(1970, 1, 1)


def test_report_matches_the_files_metadata_table(lake_hook, namespace):
    name = f"{namespace}.events"
    healthy_table(lake_hook.catalog, name, days=3)
    append_small_files(lake_hook.load_table(name), count=4, day=dt.date(2026, 1, 2))
    append_small_files(lake_hook.load_table(name), count=1, day=dt.date(2026, 1, 3))
    table = lake_hook.load_table(name)

    health = table_health(table, table_name=name)
    report = health.to_dict()

    files = table.inspect.files().to_pylist()  # independent of health.py: PyIceberg's own metadata table
    data = [f for f in files if f["content"] == 0]
    small_limit = int(TARGET * 0.75)
    assert report["data_files"] == len(data) == 8
    assert report["data_bytes"] == sum(f["file_size_in_bytes"] for f in data)
    assert report["records"] == sum(f["record_count"] for f in data)
    assert report["small_files"] == sum(f["file_size_in_bytes"] < small_limit for f in data) == 5
    assert report["position_delete_files"] == sum(f["content"] == 1 for f in files)
    assert report["equality_delete_files"] == sum(f["content"] == 2 for f in files)
    assert report["delete_records"] == sum(f["record_count"] for f in files if f["content"] != 0)
    assert report["snapshots"] == len(table.inspect.snapshots())
    assert report["manifests"] == len(table.inspect.manifests())
    assert report["average_file_bytes"] == report["data_bytes"] // 8
    assert report["target_file_size_bytes"] == TARGET and report["small_file_limit_bytes"] == small_limit

    # Per partition, against the same table grouped by its partition value.
    per_day = Counter((f["partition"]["day"] - DAY0).days for f in data)
    small_per_day = Counter((f["partition"]["day"] - DAY0).days for f in data if f["file_size_in_bytes"] < small_limit)
    assert report["partitions"] == 3
    assert {p["partition"]["day"]: p["data_files"] for p in report["by_partition"]} == dict(per_day)
    small_in_report = {p["partition"]["day"]: p["small_files"] for p in report["by_partition"] if p["small_files"]}
    assert small_in_report == dict(small_per_day)
    # The worst partition comes first: 4 small files there, of which 3 would merge away.
    worst = report["by_partition"][0]
    assert worst["partition"] == {"day": (dt.date(2026, 1, 2) - DAY0).days}
    assert worst["mergeable_small_files"] == 3
    # One small file alone in its partition is nothing to compact.
    assert report["mergeable_small_files"] == 3
    assert report["score"] == 100 - sum(p["penalty"] for p in report["score_parts"])
    assert report["score_parts"][0]["penalty"] == round(40 * 3 / 8)
    assert "3 of 8 data files" in report["score_parts"][0]["reason"]
    assert len(health.to_dict(max_partitions=1)["by_partition"]) == 1


def test_empty_table_is_healthy(lake_hook, namespace):
    from demo_data import EVENTS_SCHEMA

    table = lake_hook.catalog.create_table(f"{namespace}.empty", schema=EVENTS_SCHEMA)
    report = table_health(table).to_dict()
    assert report["snapshot_id"] is None and report["data_files"] == 0 and report["snapshots"] == 0
    assert report["score"] == 100 and report["score_parts"] == [] and report["oldest_snapshot_age_ms"] is None
    assert report["table"] == f"{namespace}.empty"


def _health(**figures) -> TableHealth:
    base = dict(table="db.t", snapshot_id=1, data_files=100, data_bytes=100 * 400 * 2**20, records=1_000_000,
                small_files=0, target_file_size_bytes=512 * 2**20, position_delete_files=0, equality_delete_files=0,
                delete_records=0, snapshots=5, oldest_snapshot_ms=0, partitions=1,
                small_file_limit_bytes=384 * 2**20, manifests=5, oldest_snapshot_age_ms=3600_000)
    return TableHealth(**{**base, **figures})


def test_score_parts_explain_every_point():
    assert _health().score == 100 and _health().score_parts == []

    deletes = _health(position_delete_files=7, delete_records=50_000)  # 5% of rows deleted
    assert [(p.penalty, "delete ratio 5.00%" in p.reason) for p in deletes.score_parts] == [(15, True)]
    assert _health(delete_records=900_000).score_parts[0].penalty == 30  # capped

    assert _health(snapshots=350).score_parts[0].penalty == 2
    assert _health(snapshots=50_000).score_parts[0].penalty == 10
    old = _health(oldest_snapshot_age_ms=6 * 24 * 3600_000).score_parts
    assert [p.penalty for p in old] == [5] and "144.0 h old" in old[0].reason
    assert _health(manifests=100).score_parts[0].penalty == 4
    assert _health(manifests=10_000).score_parts[0].penalty == 15

    worst = _health(small_files=100, mergeable_small_files=100, delete_records=10**6, snapshots=10**5,
                    oldest_snapshot_age_ms=10**12, manifests=10**5)
    assert [p.penalty for p in worst.score_parts] == [40, 30, 10, 5, 15] and worst.score == 0
    report = worst.to_dict()
    assert report["score"] == 0 and all(set(p) == {"reason", "penalty"} for p in report["score_parts"])


def test_thresholds_fire_when_any_is_crossed():
    thresholds = HealthThresholds.parse(min_small_files=10, min_delete_ratio="0.05", max_score=None)
    assert thresholds.to_dict() == {"min_small_files": 10, "min_delete_ratio": 0.05}
    assert thresholds.crossed(_health(small_files=9)) == []
    assert thresholds.crossed(_health(small_files=10)) == ["small_files 10 >= 10 (min_small_files)"]
    assert thresholds.crossed(_health(delete_records=60_000)) == ["delete_ratio 0.06 >= 0.05 (min_delete_ratio)"]
    assert HealthThresholds.parse(max_score="70").crossed(_health(manifests=10_000, snapshots=10**5)) == []
    assert HealthThresholds.parse(max_score=80).crossed(_health(manifests=10_000, snapshots=10**5)) == [
        "score 75 <= 80 (max_score)"
    ]


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"min_delete_ratio": 1.5}, "min_delete_ratio must be a ratio above 0 and at most 1"),
        ({"min_delete_ratio": 0}, "min_delete_ratio must be a ratio above 0 and at most 1"),
        ({"min_small_files": -3}, "min_small_files must be 1 or more; got -3"),
        ({"min_small_files": 2.5}, "min_small_files must be a whole number; got 2.5"),
        ({"min_snapshots": "many"}, "min_snapshots must be a whole number; got 'many'"),
        ({"max_score": 101}, "max_score must be from 0 to 100; got 101"),
        ({"max_score": True}, "max_score must be a number from 0 to 100; got True"),
        ({}, "Give at least one threshold"),
        ({"min_small_files": None, "max_score": "None"}, "Give at least one threshold"),
    ],
)
def test_bad_thresholds_are_refused_with_a_clear_message(values, message):
    with pytest.raises(LakeConfigError, match=message.replace("(", r"\(").replace(".", r"\.")):
        parse_thresholds(values)
