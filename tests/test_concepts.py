"""One owner per concept: partition identity, partition values as JSON, a table's file sizes,
snapshot lineage. Pure checks, plus one on a real table: the health report's small files are the
planner's small-file candidates."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import uuid
from dataclasses import dataclass

import pytest

from airflow_lake_provider.core.health import table_health
from airflow_lake_provider.core.partitions import json_value, partition_id, partition_key, partition_values
from airflow_lake_provider.core.planning import (
    DataFileInfo,
    RewriteOptions,
    plan_rewrite,
    plan_table,
    table_file_sizes,
)
from airflow_lake_provider.core.history import SnapshotInfo, TableHistory, _partition_key
from airflow_lake_provider.core.snapshots import walk_lineage
from test_sensors import TARGET, append_small_files, healthy_table


@pytest.mark.parametrize(
    "value,expected",
    [
        (None, None), (True, True), (7, 7), ("eu", "eu"), (1.5, 1.5),
        (float("nan"), "nan"), (float("inf"), "inf"),
        (dt.date(2026, 1, 2), "2026-01-02"), (dt.datetime(2026, 1, 2, 3, 4, 5), "2026-01-02T03:04:05"),
        (decimal.Decimal("12.30"), "12.30"), (b"\x01\xff", "01ff"), (bytearray(b"\x02"), "02"),
        (uuid.UUID(int=1), "00000000-0000-0000-0000-000000000001"),
    ],
)
def test_partition_values_become_json_one_way_and_stay_so(value, expected):
    assert json_value(value) == expected
    assert json_value(json_value(value)) == expected  # idempotent: a plan read back from XCom keys the same
    json.dumps(json_value(value), allow_nan=False)


def test_a_partition_has_one_key_whatever_the_order_of_its_fields_or_the_form_of_its_values():
    assert partition_key({"day": 20454, "region": "eu"}) == partition_key({"region": "eu", "day": 20454})
    assert partition_key({"blob": b"\x01"}) == partition_key({"blob": "01"})  # raw PyIceberg value vs its JSON
    assert partition_key({}) == "{}"
    # Same values in two specs: one key (a version of a partition), two identities (two groups).
    assert partition_id(0, {"day": 1}) != partition_id(1, {"day": 1})
    assert partition_id(0, {"day": 1})[1] == partition_id(1, {"day": 1})[1]
    assert partition_values(["day", "region"], [20454, b"\x0a"]) == {"day": 20454, "region": "0a"}


def test_retention_and_planning_key_partitions_alike():
    @dataclass
    class Field:
        name: str

    @dataclass
    class Spec:
        fields: list

    assert _partition_key(Spec([Field("day"), Field("blob")]), [3, b"\x01"]) == partition_key({"blob": "01", "day": 3})
    assert _partition_key(Spec([]), []) == ""  # unpartitioned, as SnapshotInfo documents it


def test_plan_totals_count_partitions_by_identity():
    files = [DataFileInfo(f"f{i}", 0, {"day": i % 2, "region": "eu"}, 10, 1) for i in range(6)]
    plan = plan_rewrite(files, RewriteOptions(target_file_size_bytes=1000, min_input_files=2))
    assert plan.to_json()["totals"]["partitions"] == 2


def test_a_tables_file_sizes_have_one_owner():
    assert table_file_sizes({}) == (512 * 1024**2, int(512 * 1024**2 * 0.75), int(512 * 1024**2 * 1.8))
    sizes = table_file_sizes({"write.target-file-size-bytes": "1000"})
    resolved = RewriteOptions.from_table_properties({"write.target-file-size-bytes": "1000"}).resolved()
    assert sizes == (resolved.target_file_size_bytes, resolved.min_file_size_bytes, resolved.max_file_size_bytes)


def test_health_small_files_are_the_planners_small_file_candidates(lake_hook, namespace):
    name = f"{namespace}.events"
    healthy_table(lake_hook.catalog, name, days=2)
    append_small_files(lake_hook.load_table(name), count=3, day=dt.date(2026, 1, 2))
    table = lake_hook.load_table(name)
    health = table_health(table, table_name=name)
    options = RewriteOptions.from_table_properties(dict(table.properties), min_input_files=2)
    candidates = {f.path for g in plan_table(table, options).groups for f in g.file_details
                  if f.size_bytes < options.resolved().min_file_size_bytes}
    assert health.target_file_size_bytes == TARGET
    assert health.small_file_limit_bytes == options.resolved().min_file_size_bytes
    assert health.small_files == len(candidates) == 3
    # The health report names partitions exactly as the plan does.
    planned = {json.dumps(g.partition, sort_keys=True) for g in plan_table(table, options).groups}
    reported = {json.dumps(p.partition, sort_keys=True) for p in health.by_partition if p.stats.small_files}
    assert planned == reported


def test_lineage_stops_at_an_expired_parent_and_at_a_cycle():
    history = TableHistory(
        snapshots=(SnapshotInfo(3, 2, 30, "append"), SnapshotInfo(2, 1, 20, "append"),
                   SnapshotInfo(5, 6, 50, "append"), SnapshotInfo(6, 5, 60, "append")),
        refs=(), current_snapshot_id=3)
    assert [s.snapshot_id for s in history.main_ancestry()] == [3, 2]  # 1 was expired
    assert [s.snapshot_id for s in history.ancestry(6)] == [6, 5]  # bad metadata: a loop ends the walk
    assert list(walk_lineage(None, history.parent)) == []
