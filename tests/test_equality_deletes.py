"""Tables with equality delete files (Flink upsert/CDC writers): planned, routed and compacted.

The Spark planning job attaches equality deletes with Iceberg's own rules; its plans are compared
with what Iceberg's ``BinPackRewriteFilePlanner`` (reached through py4j in the shared session)
plans on the same snapshot: the same groups, the same files, the same delete files per file.
"""

from __future__ import annotations

import datetime as dt

import pytest

from airflow_lake_provider.demo_data import _batch, create_events_table
from airflow_lake_provider.jobs import plan as plan_job
from airflow_lake_provider.jobs.rewrite import _java_map
from airflow_lake_provider.planning import RewriteOptions
from equality_deletes import commit_equality_deletes


def _spark_plan(spark, lake_hook, name: str, **overrides) -> tuple[dict, RewriteOptions]:
    table = lake_hook.load_table(name)
    options = RewriteOptions.from_table_properties(dict(table.properties), **overrides)
    plan = plan_job.run(spark, "lake", {
        "table": name, "snapshot_id": table.current_snapshot().snapshot_id,
        "options": options.to_iceberg_options(), "include_files": True, "predicates": None,
    })
    return plan, options


def _groups_of_our_plan(plan: dict) -> list[list[tuple[str, tuple[str, ...]]]]:
    return sorted(
        sorted((d["path"], tuple(sorted(d.get("delete_file_paths", ())))) for d in group["file_details"])
        for group in plan["groups"]
    )


def _groups_of_iceberg_plan(spark, name: str, snapshot_id: int, options: RewriteOptions):
    """The file groups Iceberg's own planner makes: each file with the delete files it applies."""
    jvm = spark.sparkContext._jvm
    jtable = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, f"lake.{name}")
    planner = jvm.org.apache.iceberg.actions.BinPackRewriteFilePlanner(
        jtable, jvm.org.apache.iceberg.expressions.Expressions.alwaysTrue(), snapshot_id, True)
    planner.init(_java_map(spark, options.to_iceberg_options()))
    groups = planner.plan().groups()
    found = []
    try:
        iterator = groups.iterator()
        while iterator.hasNext():
            tasks = iterator.next().fileScanTasks()
            found.append(sorted(
                (str(task.file().location()), tuple(sorted(str(d.location()) for d in task.deletes())))
                for task in tasks
            ))
    finally:
        groups.close()
    return sorted(found)


def _assert_plans_like_iceberg(spark, lake_hook, name: str, **overrides) -> dict:
    plan, options = _spark_plan(spark, lake_hook, name, **overrides)
    expected = _groups_of_iceberg_plan(spark, name, plan["snapshot_id"], options)
    assert _groups_of_our_plan(plan) == expected
    assert expected, "the layout should give Iceberg something to plan"
    return plan


def _equality_deletes_attached(plan: dict) -> set[str]:
    return {p for g in plan["groups"] for d in g["file_details"] for p in d.get("delete_file_paths", ())
            if "eq-delete-" in p}


# Files inside the size range: only their deletes (delete-file-threshold) make them candidates.
_ONLY_DELETES_MATTER = {"target_file_size_bytes": 1024 * 1024, "min_file_size_bytes": 1,
                        "max_file_size_bytes": 10**12, "delete_file_threshold": 1}


def test_partition_scoped_equality_deletes_plan_like_iceberg(spark, lake_hook, namespace):
    name = f"{namespace}.t"
    create_events_table(lake_hook.catalog, name, days=3, commits_per_day=3, rows_per_commit=10)
    commit_equality_deletes(spark, name, [{"event_id": 1}, {"event_id": 31}], partition_path="day=2026-01-01")
    table = lake_hook.load_table(name)
    table.append(_batch(1, 1, dt.date(2026, 1, 1), ["a"]))  # key 1 again, later: the delete does not apply to it
    plan = _assert_plans_like_iceberg(spark, lake_hook, name, **_ONLY_DELETES_MATTER)
    assert {g["partition"]["day"] for g in plan["groups"]} == {20454}  # only 2026-01-01 has deletes
    assert plan["totals"]["files"] == 3 and plan["totals"]["delete_files"] == 1
    assert _assert_plans_like_iceberg(spark, lake_hook, name, target_file_size_bytes=1024 * 1024, min_input_files=2)


def test_global_equality_deletes_of_an_unpartitioned_table_plan_like_iceberg(spark, lake_hook, namespace):
    name = f"{namespace}.t"
    create_events_table(lake_hook.catalog, name, days=1, commits_per_day=4, rows_per_commit=10, partition_by="none")
    commit_equality_deletes(spark, name, [{"event_id": 5}])  # unpartitioned spec: global
    lake_hook.load_table(name).append(_batch(100, 10, dt.date(2026, 1, 1), ["a"]))  # newer: not affected
    plan = _assert_plans_like_iceberg(spark, lake_hook, name, **_ONLY_DELETES_MATTER)
    assert plan["totals"]["files"] == 4 and len(_equality_deletes_attached(plan)) == 1


def test_mixed_global_partition_and_position_deletes_with_key_bounds_plan_like_iceberg(spark, lake_hook, namespace):
    name = f"{namespace}.t"
    create_events_table(lake_hook.catalog, name, days=2, commits_per_day=4, rows_per_commit=10)
    spark.sql(f"DELETE FROM lake.{name} WHERE event_id IN (2, 47)")  # position deletes
    # A global delete (the table's first, unpartitioned spec) and partition-scoped ones, with key
    # bounds as Flink records them: data files whose event_id range misses [70, 75] are not touched.
    commit_equality_deletes(spark, name, [{"event_id": 70}, {"event_id": 75}], spec_id=0, with_metrics=True)
    commit_equality_deletes(spark, name, [{"event_id": 11}], partition_path="day=2026-01-02", with_metrics=True)
    commit_equality_deletes(spark, name, [{"event_id": 23}], partition_path="day=2026-01-02")  # no metrics
    plan = _assert_plans_like_iceberg(spark, lake_hook, name, **_ONLY_DELETES_MATTER)
    # ids 0-79 in 8 files of 10; day 2 holds 10-19, 30-39, 50-59, 70-79. Without the bounds check
    # the global delete would apply to all 8 files and the one for key 11 to all of day 2.
    equality_per_file = sorted(
        len([p for p in d.get("delete_file_paths", ()) if "eq-delete-" in p])
        for g in plan["groups"] for d in g["file_details"])
    assert equality_per_file == [0, 0, 1, 1, 2, 2]
    plan = _assert_plans_like_iceberg(spark, lake_hook, name, **{**_ONLY_DELETES_MATTER, "delete_file_threshold": 2})
    assert plan["totals"]["files"] == 2
