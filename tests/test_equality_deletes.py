"""Tables with equality delete files (Flink upsert/CDC writers): planned, routed and compacted.

The Spark planning job attaches equality deletes with Iceberg's own rules; its plans are compared
with what Iceberg's ``BinPackRewriteFilePlanner`` (reached through py4j in the shared session)
plans on the same snapshot: the same groups, the same files, the same delete files per file.
"""

from __future__ import annotations

import datetime as dt

import pytest

from demo_data import _batch, create_events_table
from airflow_lake_provider.jobs import plan as plan_job
from airflow_lake_provider.jobs.iceberg import java_map
from airflow_lake_provider.core.planning import RewriteOptions, plan_table
from airflow_lake_provider.hooks.lease import TableLeaseHook
from equality_deletes import commit_equality_deletes


def _spark_plan(spark, lake_hook, name: str, **overrides) -> tuple[dict, RewriteOptions]:
    table = lake_hook.load_table(name)
    options = RewriteOptions.from_table_properties(dict(table.properties), **overrides)
    plan = plan_job.run(spark, "lake", {
        "table": name, "snapshot_id": table.current_snapshot().snapshot_id,
        "options": options.to_iceberg_options(), "include_files": True, "predicates": None,
    })["plan"]
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
    planner.init(java_map(spark, options.to_iceberg_options()))
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


def test_a_table_partitioned_from_its_creation_plans_its_equality_deletes_like_iceberg(spark, lake_hook, namespace):
    """As Flink's ``PARTITIONED BY`` makes it: no unpartitioned spec, so no delete is global. Found on a
    table a real Flink upsert job wrote (96 data, 22 position and 96 equality delete files): the plan
    attached none of the 78 equality deletes that apply, and counted the position deletes only."""
    name = f"{namespace}.t"
    spark.sql(f"CREATE TABLE lake.{name} (event_id BIGINT NOT NULL, day DATE NOT NULL, category STRING NOT NULL, "
              "amount DOUBLE NOT NULL, payload STRING NOT NULL) USING iceberg PARTITIONED BY (day) "
              "TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read')")
    table = lake_hook.load_table(name)
    assert all(not spec.is_unpartitioned() for spec in table.specs().values())
    for i in range(3):
        table.append(_batch(i * 10, 10, dt.date(2026, 1, 1), ["a"]))
    commit_equality_deletes(spark, name, [{"event_id": 1}, {"event_id": 21}], partition_path="day=2026-01-01")
    plan = _assert_plans_like_iceberg(spark, lake_hook, name, **_ONLY_DELETES_MATTER)
    assert plan["totals"]["files"] == 3 and plan["totals"]["delete_files"] == 1


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


# -- the maintenance DAG end to end ------------------------------------------------------------
DAG_CONF = {"override_table_retention": True, "older_than": "0h", "retain_last": 1, "retained": 5, "orphan_older_than_hours": 72}


def _table_with_every_kind_of_delete(spark, lake_hook, name: str) -> None:
    """A v2 table as a Flink upsert job and a Spark job leave it: position and equality deletes, and
    a key deleted by equality then written again (the new row must stay visible)."""
    create_events_table(lake_hook.catalog, name, days=3, commits_per_day=8, rows_per_commit=10)
    spark.sql(f"DELETE FROM lake.{name} WHERE event_id % 10 = 3")  # merge-on-read: position deletes
    commit_equality_deletes(spark, name, [{"event_id": 0}, {"event_id": 30}, {"event_id": 60}],
                            partition_path="day=2026-01-01")
    commit_equality_deletes(spark, name, [{"event_id": 11}, {"event_id": 200}], spec_id=0)  # global
    lake_hook.load_table(name).append(_batch(30, 1, dt.date(2026, 1, 1), ["z"]))  # key 30 written again


@pytest.mark.spark_submit
def test_a_refused_plan_fails_the_run_touches_nothing_and_gives_the_lease_back(airflow_db, spark, lake_hook, namespace):
    from conftest import load_dag

    name = f"{namespace}.events"
    create_events_table(lake_hook.catalog, name, days=2, commits_per_day=3, rows_per_commit=10)
    commit_equality_deletes(spark, name, [{"event_id": 1}], partition_path="day=2026-01-01")
    table = lake_hook.load_table(name)
    rows_before, snapshots_before = len(spark.table(f"lake.{name}").collect()), len(table.snapshots())
    current = table.current_snapshot().snapshot_id

    # A filter through the partitions needs PyIceberg's metrics; equality deletes need Spark: refused.
    run = load_dag("lake_maintenance.py", "lake_maintenance").test(
        run_conf={"table": name, "partition_filter": "event_id < 25", **DAG_CONF})
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert states == {"check_run": "success", "acquire_lease": "success", "plan": "failed", "rewrite": "upstream_failed",
                      "expire": "upstream_failed", "clean": "upstream_failed", "release_lease": "success"}
    assert run.state == "failed"
    refusal = run.get_task_instance("plan").xcom_pull(task_ids="plan", key="refused")
    assert "equality delete files" in refusal and "partition boundaries" in refusal
    table = lake_hook.load_table(name)
    assert table.current_snapshot().snapshot_id == current and len(table.snapshots()) == snapshots_before
    assert not TableLeaseHook(lake_hook).load(name)[1].held
    assert len(spark.table(f"lake.{name}").collect()) == rows_before


# -- routing: engine="auto" takes Spark, "pyiceberg" refuses before any JVM ----------------------
def test_pyiceberg_engine_refuses_equality_deletes_before_any_jvm(spark, lake_hook, namespace, bad_input):
    from airflow_lake_provider.exceptions import LakeConfigError, LakePlanRefused
    from airflow_lake_provider.operators.plan import IcebergRewritePlanOperator
    from lake_checks import FakeTaskInstance, rows_by_spark

    name = f"{namespace}.t"
    create_events_table(lake_hook.catalog, name, days=1, commits_per_day=3, rows_per_commit=10)
    commit_equality_deletes(spark, name, [{"event_id": 4}], partition_path="day=2026-01-01")
    before = (rows_by_spark(spark, name), lake_hook.load_table(name).current_snapshot().snapshot_id)
    ti = FakeTaskInstance(task_id="plan")
    op = IcebergRewritePlanOperator(task_id="plan", table=name, engine="pyiceberg")
    op.run_job = None  # any attempt to submit a Spark job would fail with a TypeError, not the refusal
    with pytest.raises(LakePlanRefused, match="engine=.spark. or engine=.auto.") as refused:
        op.execute({"ti": ti})
    assert isinstance(refused.value, LakeConfigError) and "equality delete files" in str(refused.value)
    assert ti.pushed["refused"] == str(refused.value)  # what the DAG's rewrite reads to skip itself
    bad_input("IcebergRewritePlanOperator", "engine='pyiceberg' on a table with equality deletes", refused.value,
              table_checked=True)
    with pytest.raises(LakePlanRefused, match="which PyIceberg cannot plan"):  # not PyIceberg's raw ValueError
        plan_table(lake_hook.load_table(name), table_name=name)
    assert (rows_by_spark(spark, name), lake_hook.load_table(name).current_snapshot().snapshot_id) == before


def test_dangling_delete_removal_keeps_a_global_equality_delete_that_still_applies(spark, lake_hook, namespace):
    """Iceberg's ``remove-dangling-deletes`` on the reproduction that brought 6 deleted rows back on 1.10.2:
    a global equality delete written under the old unpartitioned spec still deletes rows of files under the
    newer partitioned spec once every old-spec file is rewritten. On the runtime the jobs use (1.12) it stays,
    every row with it, while a partition-scoped delete that applies to nothing any more goes. The rewrite job
    refuses the option on such tables only under a release before 1.12 (``core/delete_files.py``)."""
    from airflow_lake_provider.core.delete_files import dangling_delete_removal_unsafe

    name = f"{namespace}.t"
    table = f"lake.{name}"
    day_one = 1767225600  # 2026-01-01T00:00:00Z

    def append(first: int, last: int, day: int) -> None:
        spark.range(first, last).selectExpr(
            "id", f"timestamp_seconds({day_one + 86400 * day} + id % 86400) AS ts", "concat('v', id) AS data",
        ).coalesce(1).writeTo(table).append()

    spark.sql(f"CREATE TABLE {table} (id BIGINT, ts TIMESTAMP, data STRING) USING iceberg "
              "TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read')")
    for i in range(3):
        append(i * 1000, (i + 1) * 1000, 0)  # spec 0, unpartitioned
    spark.sql(f"ALTER TABLE {table} ADD PARTITION FIELD days(ts)")
    append(10_000, 11_000, 1)
    append(20_000, 21_000, 2)
    global_keys = [5, 17, 1500, 2999, 10_005, 10_500, 10_999, 20_000, 20_002, 20_777, 99_999]
    commit_equality_deletes(spark, name, [{"id": k} for k in global_keys], spec_id=0, with_metrics=True)
    append(30_000, 30_010, 0)  # day one under spec 1, after the delete
    commit_equality_deletes(spark, name, [{"id": 30_003}], spec_id=1, partition_path="ts_day=2026-01-01")
    before = sorted(tuple(row) for row in spark.sql(f"SELECT id, data FROM {table}").collect())

    version = str(spark.sparkContext._jvm.org.apache.iceberg.IcebergBuild.version())
    assert not dangling_delete_removal_unsafe(version)  # else the rewrite job refuses the option
    spark.sql(f"""CALL lake.system.rewrite_data_files(table => '{name}', where => "ts < TIMESTAMP '2026-01-02 00:00:00'",
                  options => map('rewrite-all', 'true', 'remove-dangling-deletes', 'true'))""").collect()
    after = sorted(tuple(row) for row in spark.sql(f"SELECT id, data FROM {table}").collect())
    assert after == before and len(after) == 4999  # 5,010 written, 10 keys of the global delete, 1 scoped
    left = spark.sql(f"SELECT spec_id, partition.ts_day AS day FROM {table}.delete_files").collect()
    assert [(row.spec_id, row.day) for row in left] == [(0, None)]  # the global one; the scoped one went


@pytest.mark.spark_submit
def test_auto_engine_plans_equality_deletes_in_spark_and_the_summary_may_lack_totals(spark, lake_hook, namespace):
    from airflow_lake_provider.operators.plan import IcebergRewritePlanOperator
    from airflow_lake_provider.core.snapshots import has_equality_deletes
    from lake_checks import FakeTaskInstance

    name = f"{namespace}.t"
    create_events_table(lake_hook.catalog, name, days=2, commits_per_day=4, rows_per_commit=10)
    commit_equality_deletes(spark, name, [{"event_id": 4}], partition_path="day=2026-01-01")
    table = lake_hook.load_table(name)
    assert has_equality_deletes(table)
    # A writer that keeps no summary totals: the delete manifests are read instead.
    snapshot = table.current_snapshot()
    bare = type(snapshot)(**{**snapshot.model_dump(), "summary": {"operation": "overwrite"}})
    assert has_equality_deletes(table, bare) and not has_equality_deletes(table, table.snapshot_by_id(
        snapshot.parent_snapshot_id))
    plan = IcebergRewritePlanOperator(task_id="plan", table=name, target_file_size_bytes=1024 * 1024, min_input_files=2,
                                      delete_ratio_threshold=0.5, include_file_paths=True).execute(
        {"ti": FakeTaskInstance(task_id="plan")})
    assert plan["engine"] == "spark" and plan["totals"]["files"] == 8 and plan["totals"]["delete_files"] == 1
    assert plan["options"]["delete-ratio-threshold"] == "0.5"  # what the rewrite runs with


# -- health: equality deletes and their rows, scored as Amoro weighs them -----------------------
def test_health_and_sensor_count_equality_deletes_and_weigh_them_more(spark, lake_hook, namespace):
    from airflow_lake_provider.core.health import EQUALITY_DELETE_ROW_WEIGHT, table_health
    from airflow_lake_provider.sensors.health import IcebergTableHealthSensor

    by_position, by_equality = f"{namespace}.pos", f"{namespace}.eq"
    for name in (by_position, by_equality):
        create_events_table(lake_hook.catalog, name, days=1, commits_per_day=1, rows_per_commit=200)
    spark.sql(f"DELETE FROM lake.{by_position} WHERE event_id < 4")  # 4 rows by position
    commit_equality_deletes(spark, by_equality, [{"event_id": i} for i in range(4)], partition_path="day=2026-01-01")

    position = table_health(lake_hook.load_table(by_position))
    equality = table_health(lake_hook.load_table(by_equality))
    assert (equality.equality_delete_files, equality.equality_delete_records, equality.delete_records) == (1, 4, 4)
    assert (position.position_delete_files, position.equality_delete_records, position.delete_records) == (1, 0, 4)
    assert position.delete_ratio == equality.delete_ratio == 0.02
    assert equality.weighted_delete_ratio == EQUALITY_DELETE_ROW_WEIGHT * position.weighted_delete_ratio
    [pos_part], [eq_part] = position.score_parts, equality.score_parts
    assert (pos_part.penalty, eq_part.penalty) == (6, 24) and "4 of them by equality" in eq_part.reason
    assert equality.score < position.score

    result = IcebergTableHealthSensor(task_id="health", table=by_equality, max_score=80).poke({})
    assert result.is_done and result.xcom_value["equality_delete_records"] == 4
    assert result.xcom_value["score"] == equality.score
