"""The asset event a step emits: only after it changed the table, with figures a consumer can use (pure)."""

from __future__ import annotations

import json

import pytest

from airflow_lake_provider.core.asset_events import maintenance_event_extra

BEFORE = {"snapshot_id": 1, "data_files": 40, "delete_files": 6, "bytes": 400_000, "records": 800, "snapshots": 12}
COMPACTED = {**BEFORE, "snapshot_id": 2, "data_files": 4, "delete_files": 0, "bytes": 90_000, "snapshots": 14}
EXPIRED = {**COMPACTED, "snapshots": 1}


def test_a_rewrite_that_committed_carries_before_and_after():
    extra = maintenance_event_extra("rewrite", "db.events", BEFORE, COMPACTED,
                                    {"snapshot_id_before": 1, "snapshot_id_after": 2, "committed_snapshot_ids": [9, 2]},
                                    health_score=97)
    assert extra["snapshot_id_before"] == 1 and extra["snapshot_id_after"] == 2
    assert (extra["data_files_before"], extra["data_files_after"]) == (40, 4)
    assert (extra["delete_files_before"], extra["delete_files_after"]) == (6, 0)
    assert (extra["bytes_before"], extra["bytes_after"]) == (400_000, 90_000)
    assert extra["committed_snapshot_ids"] == [9, 2] and extra["health_score"] == 97
    assert json.loads(json.dumps(extra)) == extra  # what the scheduler stores


@pytest.mark.parametrize(("step", "before", "after", "result"), [
    ("rewrite", BEFORE, BEFORE, {"committed_snapshot_ids": [], "dry_run": False}),   # empty plan
    ("rewrite", BEFORE, BEFORE, {"dry_run": True}),                                   # dry run
    ("expire", COMPACTED, COMPACTED, {"expired_snapshot_ids": []}),                     # nothing old enough
    ("clean", EXPIRED, EXPIRED, {"orphan_file_count": 0, "expired_snapshot_ids": []}),  # nothing to take
    ("clean", EXPIRED, EXPIRED, {"orphan_file_count": 3, "dry_run": True}),            # a dry run lists, takes none
])
def test_a_step_that_changed_nothing_emits_nothing(step, before, after, result):
    assert maintenance_event_extra(step, "db.events", before, after, result) is None


def test_expiry_clean_and_a_recovered_retry_count_as_changes():
    expired = maintenance_event_extra("expire", "db.events", COMPACTED, EXPIRED, {"expired_snapshot_ids": [1, 3]})
    assert expired["expired_snapshots"] == 2 and (expired["snapshots_before"], expired["snapshots_after"]) == (14, 1)
    cleaned = maintenance_event_extra("clean", "db.events", EXPIRED, EXPIRED, {"orphan_file_count": 3})
    assert cleaned["orphan_files_taken"] == 3
    # A retry finds its first try's commit: the table looks unchanged around this try, the result says otherwise.
    recovered = maintenance_event_extra("rewrite", "db.events", COMPACTED, COMPACTED,
                                        {"snapshot_id_before": 1, "snapshot_id_after": 2, "committed_snapshot_ids": [2],
                                         "recovered_from_earlier_try": True})
    assert recovered["snapshot_id_before"] == 1 and recovered["snapshot_id_after"] == 2
