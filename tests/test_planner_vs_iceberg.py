"""The planner agrees with Iceberg: on the same table and options, the files it plans are
exactly the files Iceberg's own rewrite_data_files rewrites (real Spark, several layouts)."""

from __future__ import annotations

import datetime as dt

import pytest

from demo_data import _batch, create_events_table
from airflow_lake_provider.core.planning import RewriteOptions, plan_table
from lake_checks import removed_data_file_paths


def _rewrite_with_iceberg(spark, lake_hook, name: str, options: dict[str, str]) -> set[str]:
    before = lake_hook.load_table(name).current_snapshot().snapshot_id
    pairs = ", ".join(f"'{k}', '{v}'" for k, v in options.items())
    spark.sql(f"CALL lake.system.rewrite_data_files(table => '{name}', options => map({pairs}))")
    table = lake_hook.load_table(name)
    removed: set[str] = set()
    snapshot = table.current_snapshot()
    while snapshot is not None and snapshot.snapshot_id != before:
        removed |= removed_data_file_paths(table, snapshot.snapshot_id)
        snapshot = table.snapshot_by_id(snapshot.parent_snapshot_id)
    return removed


def _planned_paths(plan) -> dict[str, set[str]]:
    by_partition: dict[str, set[str]] = {}
    for group in plan.to_json()["groups"]:
        by_partition.setdefault(repr(sorted(group["partition"].items())), set()).update(group["file_paths"])
    return by_partition


def _layout_identity(catalog, name):
    return create_events_table(catalog, name, days=3, commits_per_day=8, rows_per_commit=10)


def _layout_day_transform(catalog, name):
    return create_events_table(catalog, name, days=2, commits_per_day=6, rows_per_commit=10, partition_by="day_transform")


def _layout_unpartitioned_mixed_sizes(catalog, name):
    table = create_events_table(catalog, name, days=1, commits_per_day=7, rows_per_commit=10, partition_by="none")
    for start in (10_000, 20_000):  # two large files, inside the target range below
        table.append(_batch(start, 2000, dt.date(2026, 1, 1), ["a"]))
    return catalog.load_table(name)


def _layout_uneven_partitions(catalog, name):
    table = create_events_table(catalog, name, days=1, commits_per_day=6, rows_per_commit=10)  # 6 files on day 1
    for i in range(3):  # 3 files on day 2: under min-input-files
        table.append(_batch(50_000 + i * 10, 10, dt.date(2026, 1, 2), ["a"]))
    return catalog.load_table(name)


@pytest.mark.parametrize(
    "layout",
    [_layout_identity, _layout_day_transform, _layout_unpartitioned_mixed_sizes, _layout_uneven_partitions],
    ids=lambda f: f.__name__.removeprefix("_layout_"),
)
def test_planned_files_are_the_files_iceberg_rewrites(spark, lake_hook, namespace, layout):
    name = f"{namespace}.t"
    table = layout(lake_hook.catalog, name)
    sizes = sorted(task.file.file_size_in_bytes for task in table.scan().plan_files())
    # A target at the largest file: large files sit inside [75%, 180%] of it, small ones are candidates.
    target = sizes[-1] if sizes[-1] > 4 * sizes[0] else 1024 * 1024
    options = RewriteOptions.from_table_properties(dict(table.properties), target_file_size_bytes=target, min_input_files=5)
    plan = plan_table(table, options, table_name=name)

    removed = _rewrite_with_iceberg(spark, lake_hook, name, options.to_iceberg_options())
    planned = set().union(*_planned_paths(plan).values()) if plan.groups else set()
    assert planned == removed
    assert plan.to_json()["totals"]["files"] == len(removed)


def test_a_file_with_too_many_deletes_is_planned_alone_like_iceberg(spark, lake_hook, namespace):
    name = f"{namespace}.t"
    create_events_table(lake_hook.catalog, name, days=2, commits_per_day=2, rows_per_commit=50)
    spark.sql(f"DELETE FROM lake.{name} WHERE event_id IN (1, 2, 3)")  # deletes on the first file only
    table = lake_hook.load_table(name)
    options = RewriteOptions.from_table_properties(dict(table.properties), min_input_files=5, delete_file_threshold=1,
                                                   target_file_size_bytes=1024 * 1024)
    plan = plan_table(table, options, table_name=name)
    removed = _rewrite_with_iceberg(spark, lake_hook, name, options.to_iceberg_options())
    planned = set().union(*_planned_paths(plan).values()) if plan.groups else set()
    assert planned == removed and len(removed) >= 1


def test_a_cap_on_files_per_group_plans_like_iceberg_1_12(spark, lake_hook, namespace):
    """``max-file-group-input-files`` (Iceberg 1.12 on Spark): groups of at most 3 files, and a group left
    under min-input-files is not rewritten, by the planner and by Iceberg alike. Which files share a group
    follows the scan's order, which Iceberg's parallel manifest reading does not fix: the counts per
    partition are compared, not the files."""
    name = f"{namespace}.t"
    table = _layout_identity(lake_hook.catalog, name)  # 8 files in each of 3 partitions
    options = RewriteOptions.from_table_properties(dict(table.properties), target_file_size_bytes=1024 * 1024,
                                                   min_input_files=3, max_file_group_input_files=3)
    plan = plan_table(table, options, table_name=name)
    assert options.to_iceberg_options()["max-file-group-input-files"] == "3"
    assert [len(group["file_paths"]) for group in plan.to_json()["groups"]] == [3] * 6  # 3 + 3 per partition; 2 left
    removed = _rewrite_with_iceberg(spark, lake_hook, name, options.to_iceberg_options())

    def per_partition(paths) -> dict[str, int]:
        counts: dict[str, int] = {}
        for path in paths:
            counts[path.split("/")[-2]] = counts.get(path.split("/")[-2], 0) + 1
        return counts

    planned = set().union(*_planned_paths(plan).values())
    assert per_partition(planned) == per_partition(removed) == {
        "day=2026-01-01": 6, "day=2026-01-02": 6, "day=2026-01-03": 6}
