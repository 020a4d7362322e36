"""Both planning engines give the same plan: PyIceberg in the worker, and the Spark job.

Most layouts call the job's ``run(spark, catalog, args)`` in-process on the shared session (the
same code spark-submit runs); one test goes through the operator and spark-submit.
Plans are compared whole, with every file path in order: bin packing is order-sensitive.
"""

from __future__ import annotations

import datetime as dt

import pytest

from demo_data import _batch, create_events_table
from airflow_lake_provider.exceptions import LakeConfigError
from airflow_lake_provider.jobs import plan as plan_job
from airflow_lake_provider.operators.plan import IcebergRewritePlanOperator
from airflow_lake_provider.steps.plan import AUTO_SPARK_MIN_DATA_FILES, ENGINES, choose_engine
from airflow_lake_provider.core.partition_sql import spark_partition_predicates
from airflow_lake_provider.core.planning import RewriteOptions, parse_partition_filter, plan_table
from lake_checks import FakeTaskInstance, plans_by_both_engines


def _both_plans(spark, lake_hook, name: str, partition_filter: str | None = None, **overrides):
    table = lake_hook.load_table(name)
    options = RewriteOptions.from_table_properties(dict(table.properties), **overrides)
    expected = plan_table(table, options, partition_filter=partition_filter, table_name=name).to_json()
    predicates = spark_partition_predicates(table, parse_partition_filter(table, partition_filter))
    got = plan_job.run(spark, "lake", {
        "table": name, "snapshot_id": table.current_snapshot().snapshot_id,
        "options": options.to_iceberg_options(), "max_files": options.max_files, "max_bytes": options.max_bytes,
        "include_files": True, "predicates": predicates,
    })
    return expected, got["plan"] if got["plan"] is not None else got


def _assert_same(expected, got, *, min_groups: int = 1):
    assert got == expected
    assert len(expected["groups"]) >= min_groups


def test_unpartitioned(spark, lake_hook, namespace):
    name = f"{namespace}.t"
    table = create_events_table(lake_hook.catalog, name, days=1, commits_per_day=7, rows_per_commit=10, partition_by="none")
    table.append(_batch(10_000, 3000, dt.date(2026, 1, 1), ["a"]))  # one large file among small ones
    _assert_same(*_both_plans(spark, lake_hook, name, target_file_size_bytes=64 * 1024, min_input_files=3))


def test_day_partitions_with_merge_on_read_deletes(spark, lake_hook, namespace):
    name = f"{namespace}.t"
    create_events_table(lake_hook.catalog, name, days=3, commits_per_day=4, rows_per_commit=40)
    spark.sql(f"DELETE FROM lake.{name} WHERE event_id IN (1, 2, 3, 45, 200, 201)")
    spark.sql(f"DELETE FROM lake.{name} WHERE event_id % 7 = 0")  # deletes over many files at once
    # 4 files per partition, under min-input-files: only files with deletes make groups.
    expected, got = _both_plans(spark, lake_hook, name, target_file_size_bytes=1024 * 1024, delete_file_threshold=1)
    _assert_same(expected, got)
    assert expected["totals"]["delete_files"] > 0
    details = [d for g in expected["groups"] for d in g["file_details"]]
    assert any(d.get("delete_record_count") for d in details)


def test_delete_ratio_makes_a_lone_file_a_candidate(spark, lake_hook, namespace):
    name = f"{namespace}.t"
    create_events_table(lake_hook.catalog, name, days=1, commits_per_day=2, rows_per_commit=50)
    spark.sql(f"DELETE FROM lake.{name} WHERE event_id < 30")  # 60% of the first file
    # Files inside the size range: only the delete ratio makes one a candidate.
    expected, got = _both_plans(spark, lake_hook, name, target_file_size_bytes=4000, min_file_size_bytes=1,
                                max_file_size_bytes=10**9, delete_ratio_threshold=0.5)
    _assert_same(expected, got)
    assert expected["totals"]["files"] == 1


def test_day_transform_and_an_aligned_partition_filter(spark, lake_hook, namespace):
    name = f"{namespace}.t"
    create_events_table(lake_hook.catalog, name, days=3, commits_per_day=5, rows_per_commit=10, partition_by="day_transform")
    _assert_same(*_both_plans(spark, lake_hook, name, target_file_size_bytes=1024 * 1024))
    expected, got = _both_plans(spark, lake_hook, name, partition_filter="day >= '2026-01-02'",
                                target_file_size_bytes=1024 * 1024)
    _assert_same(expected, got)
    assert {g["partition"]["day_day"] for g in expected["groups"]} == {20455, 20456}  # ints, like PyIceberg


@pytest.mark.parametrize("partition_by", ["day", "day_transform"])
def test_a_daily_data_interval_scope_selects_the_same_partitions(spark, lake_hook, namespace, partition_by):
    from airflow_lake_provider.core.scoping import interval_filter, partition_fields_of

    name = f"{namespace}.t"
    table = create_events_table(lake_hook.catalog, name, days=3, commits_per_day=5, rows_per_commit=10,
                                partition_by=partition_by)
    scope = interval_filter(partition_fields_of(table), dt.datetime(2026, 1, 2, tzinfo=dt.timezone.utc),
                            dt.datetime(2026, 1, 3, tzinfo=dt.timezone.utc))
    expected, got = _both_plans(spark, lake_hook, name, partition_filter=scope, target_file_size_bytes=1024 * 1024)
    _assert_same(expected, got)
    assert [g["partition"] for g in expected["groups"]] == [{"day" if partition_by == "day" else "day_day": 20455}]


def test_identity_partition_on_a_string_with_a_filter(spark, lake_hook, namespace):
    name = f"{namespace}.t"
    spark.sql(f"CREATE TABLE lake.{name} (id BIGINT, category STRING) USING iceberg PARTITIONED BY (category)")
    for i in range(5):
        spark.sql(f"INSERT INTO lake.{name} VALUES ({i}, 'a'), ({i}, 'b\\'s'), ({i}, 'c')")  # b's
    _assert_same(*_both_plans(spark, lake_hook, name, target_file_size_bytes=1024 * 1024), min_groups=3)
    expected, got = _both_plans(spark, lake_hook, name, partition_filter="category IN ('a', 'b''s')",
                                target_file_size_bytes=1024 * 1024)
    _assert_same(expected, got, min_groups=2)


def test_identity_partition_on_a_timestamp_without_zone(spark, lake_hook, namespace):
    """Spark hands NTZ partition values out as wall-clock datetimes; the plan must carry Iceberg's micros."""
    name = f"{namespace}.t"
    spark.sql(f"CREATE TABLE lake.{name} (id BIGINT, at TIMESTAMP_NTZ) USING iceberg PARTITIONED BY (at)")
    for i in range(4):
        spark.sql(f"INSERT INTO lake.{name} VALUES ({i}, TIMESTAMP_NTZ'2026-03-01 10:00:00.000001'), "
                  f"({i}, TIMESTAMP_NTZ'1969-12-31 23:00:00'), ({i}, NULL)")
    expected, got = _both_plans(spark, lake_hook, name, target_file_size_bytes=1024 * 1024, min_input_files=2)
    _assert_same(expected, got, min_groups=3)
    assert {g["partition"]["at"] for g in expected["groups"]} == {1772359200000001, -3600000000, None}


def test_spec_evolution_lumps_old_files_under_the_null_partition(spark, lake_hook, namespace):
    name = f"{namespace}.t"
    table = create_events_table(lake_hook.catalog, name, days=2, commits_per_day=3, rows_per_commit=10, partition_by="none")
    table.update_spec().add_identity("day").commit()
    table = lake_hook.load_table(name)
    for i in range(4):
        table.append(_batch(1000 + 10 * i, 10, dt.date(2026, 1, 1 + i % 2), ["a"]))
    expected, got = _both_plans(spark, lake_hook, name, target_file_size_bytes=1024 * 1024, min_input_files=2)
    _assert_same(expected, got, min_groups=3)
    assert {"day": None} in [g["partition"] for g in expected["groups"]]


def test_a_partition_split_into_several_bins_keeps_scan_order(spark, lake_hook, namespace):
    name = f"{namespace}.t"
    table = create_events_table(lake_hook.catalog, name, days=1, commits_per_day=4, rows_per_commit=10)
    for i, rows in enumerate((300, 20, 150, 5, 400, 60, 10, 250)):  # uneven sizes: order changes the bins
        table.append(_batch(10_000 + 1000 * i, rows, dt.date(2026, 1, 1), ["a", "b"]))
    spark.sql(f"DELETE FROM lake.{name} WHERE event_id = 10005")  # a delete manifest in the list too
    sizes = sorted(t.file.file_size_in_bytes for t in lake_hook.load_table(name).scan().plan_files())
    # Every file above max-file-size: all are candidates and every bin is kept, singletons too.
    expected, got = _both_plans(spark, lake_hook, name, target_file_size_bytes=sizes[0] // 2, min_file_size_bytes=1,
                                max_file_size_bytes=sizes[0] // 2 + 1,
                                max_file_group_size_bytes=2 * sizes[len(sizes) // 2])
    _assert_same(expected, got, min_groups=4)
    assert len({str(g["partition"]) for g in expected["groups"]}) == 1  # several bins of one partition


def test_budget_is_applied_in_the_same_order(spark, lake_hook, namespace):
    name = f"{namespace}.t"
    create_events_table(lake_hook.catalog, name, days=4, commits_per_day=5, rows_per_commit=10)
    expected, got = _both_plans(spark, lake_hook, name, target_file_size_bytes=1024 * 1024, max_files=11)
    _assert_same(expected, got, min_groups=2)
    assert expected["skipped_by_budget"] == 2


def test_a_filter_that_cuts_through_partitions_is_reported_not_guessed(spark, lake_hook, namespace):
    name = f"{namespace}.t"
    create_events_table(lake_hook.catalog, name, days=2, commits_per_day=3, rows_per_commit=10)
    expected, got = _both_plans(spark, lake_hook, name, partition_filter="event_id < 25",
                                target_file_size_bytes=1024 * 1024)
    assert got["unaligned_files"] == 6 and "groups" not in got


# -- the operator: engine choice ------------------------------------------------------------
def test_engine_is_validated_before_any_jvm(lake_hook, namespace):
    name = f"{namespace}.t"
    create_events_table(lake_hook.catalog, name, days=1, commits_per_day=2, rows_per_commit=5)
    with pytest.raises(LakeConfigError, match="engine must be one of"):  # at the DAG's parse
        IcebergRewritePlanOperator(task_id="plan", table=name, engine="duckdb")
    op = IcebergRewritePlanOperator(task_id="plan", table=name, engine="{{ params.engine }}",
                                    params={"engine": "duckdb"})
    op.engine = "duckdb"  # as the template renders it
    with pytest.raises(LakeConfigError, match="engine must be one of"):  # a rendered value, when the task runs
        op.execute({"ti": FakeTaskInstance(task_id="plan")})


@pytest.mark.parametrize(
    ("data_files", "manifests", "expected"),
    [(0, 0, "pyiceberg"), (AUTO_SPARK_MIN_DATA_FILES - 1, 10, "pyiceberg"), (AUTO_SPARK_MIN_DATA_FILES, 10, "spark"),
     (5 * AUTO_SPARK_MIN_DATA_FILES, 1, "spark")],
)
def test_auto_picks_spark_only_for_large_tables(data_files, manifests, expected):
    assert choose_engine("auto", data_files=data_files, manifests=manifests) == expected
    assert choose_engine("pyiceberg", data_files=data_files, manifests=manifests) == "pyiceberg"
    assert choose_engine("spark", data_files=0, manifests=0) == "spark"
    assert set(ENGINES) == {"auto", "pyiceberg", "spark"}


def test_auto_plans_a_small_table_with_pyiceberg(lake_hook, namespace):
    name = f"{namespace}.t"
    create_events_table(lake_hook.catalog, name, days=2, commits_per_day=6, rows_per_commit=5)
    op = IcebergRewritePlanOperator(task_id="plan", table=name, engine="auto", target_file_size_bytes=1024 * 1024)
    plan = op.execute({"ti": FakeTaskInstance(task_id="plan")})
    assert plan["engine"] == "pyiceberg" and plan["totals"]["files"] == 12


@pytest.mark.spark_submit
def test_operator_with_the_spark_engine_gives_the_pyiceberg_plan(lake_hook, namespace):
    name = f"{namespace}.t"
    create_events_table(lake_hook.catalog, name, days=3, commits_per_day=5, rows_per_commit=10)
    common = {"table": name, "target_file_size_bytes": 1024 * 1024, "partition_filter": "day < '2026-01-03'",
              "include_file_paths": True}
    by_spark, by_pyiceberg = plans_by_both_engines(**common)
    assert by_spark == by_pyiceberg and by_spark["totals"]["files"] == 10


# -- the filter translation: Spark SQL agrees with PyIceberg's partition evaluator, NULLs included
@pytest.mark.parametrize("text", [
    "category = 'a'", "category != 'a'", "category IN ('a', 'c')", "category NOT IN ('a')", "category IS NULL",
    "category IS NOT NULL", "category < 'b'", "category >= 'b'", "NOT category = 'b'", "category LIKE 'a%'",
    "category NOT LIKE 'a%'", "category = 'a' OR category IS NULL", "category != 'a' AND category != 'c'",
])
def test_partition_predicates_match_pyiceberg_on_partition_values(spark, lake_hook, namespace, text):
    from pyiceberg.expressions.visitors import expression_evaluator, inclusive_projection
    from pyiceberg.schema import Schema
    from pyiceberg.typedef import Record

    table = create_events_table(lake_hook.catalog, f"{namespace}.t", days=1, commits_per_day=1, rows_per_commit=1,
                                partition_by="none")
    table.update_spec().add_identity("category").commit()
    table = lake_hook.load_table(f"{namespace}.t")
    spec = table.spec()
    row_filter = parse_partition_filter(table, text)
    evaluate = expression_evaluator(Schema(*spec.partition_type(table.schema()).fields),
                                    inclusive_projection(table.schema(), spec, True)(row_filter), True)
    values = ["a", "b", "c", "ab", None]
    expected = [evaluate(Record(v)) for v in values]
    frame = spark.createDataFrame([(spec.spec_id, (v,)) for v in values], "spec_id INT, part STRUCT<category: STRING>")
    predicate = spark_partition_predicates(table, row_filter)["inclusive"]
    got = [row[0] for row in frame.selectExpr(predicate).collect()]
    assert got == expected
