"""Scheduled and backfill runs plan only the partitions of their data interval."""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace

import pytest

from demo_data import create_events_table
from airflow_lake_provider.exceptions import LakeConfigError
from airflow_lake_provider.operators.plan import IcebergRewritePlanOperator
from airflow_lake_provider.operators.rewrite import IcebergRewriteDataFilesOperator
from airflow_lake_provider.core.scoping import (
    PartitionFieldInfo, before_first_day, combine_filters, interval_filter, parse_first_day,
)
from conftest import load_dag
from lake_checks import FakeTaskInstance, live_delete_files_by_partition, table_fingerprint

UTC = dt.timezone.utc
DAY = [PartitionFieldInfo("day", "identity", "date")]


def at(*args) -> dt.datetime:
    return dt.datetime(*args, tzinfo=UTC)


@pytest.mark.parametrize(
    ("fields", "start", "end", "expected"),
    [
        (DAY, at(2026, 1, 3), at(2026, 1, 4), "day >= '2026-01-03' AND day < '2026-01-04'"),
        (DAY, at(2026, 1, 3, 6), at(2026, 1, 3, 7), "day >= '2026-01-03' AND day < '2026-01-04'"),
        (DAY, at(2026, 1, 1), at(2026, 2, 1), "day >= '2026-01-01' AND day < '2026-02-01'"),
        ([PartitionFieldInfo("ts", "day", "timestamptz")], at(2026, 1, 3), at(2026, 1, 4),
         "ts >= '2026-01-03T00:00:00+00:00' AND ts < '2026-01-04T00:00:00+00:00'"),
        ([PartitionFieldInfo("ts", "hour", "timestamp")], at(2026, 1, 3, 5), at(2026, 1, 3, 6),
         "ts >= '2026-01-03T05:00:00.000000' AND ts < '2026-01-03T06:00:00.000000'"),
        ([PartitionFieldInfo("category", "identity", "string"), PartitionFieldInfo("d", "month", "date")],
         at(2026, 3, 1), at(2026, 4, 1), "d >= '2026-03-01' AND d < '2026-04-01'"),
        ([PartitionFieldInfo("category", "identity", "string")], at(2026, 3, 1), at(2026, 4, 1), None),
        ([], at(2026, 3, 1), at(2026, 4, 1), None),
    ],
)
def test_interval_filter(fields, start, end, expected):
    assert interval_filter(fields, start, end) == expected


def test_empty_interval_is_refused():
    with pytest.raises(LakeConfigError, match="is empty"):
        interval_filter(DAY, at(2026, 1, 3), at(2026, 1, 3))


def test_combine_filters():
    assert combine_filters("a = 1", None, "", "b = 2") == "(a = 1) AND (b = 2)"
    assert combine_filters(None, "None") is None


def _context(run_type: str, start, end) -> dict:
    return {"ti": FakeTaskInstance(task_id="plan"), "dag_run": SimpleNamespace(run_type=run_type),
            "data_interval_start": start, "data_interval_end": end}


@pytest.mark.parametrize(
    ("run_type", "start", "end", "scope", "planned_days"),
    [
        ("backfill", at(2026, 1, 2), at(2026, 1, 3), "auto", {"2026-01-02"}),
        ("scheduled", at(2026, 1, 3), at(2026, 1, 4), "auto", {"2026-01-03"}),
        # A manual run created for a logical date carries that date's interval: it plans that day.
        ("manual", at(2026, 1, 2), at(2026, 1, 3), "auto", {"2026-01-02"}),
        ("manual", None, None, "auto", {"2026-01-01", "2026-01-02", "2026-01-03"}),
        # A DAG without a schedule (lake_maintenance) gives manual runs an empty interval: whole table.
        ("manual", at(2026, 1, 2), at(2026, 1, 2), "auto", {"2026-01-01", "2026-01-02", "2026-01-03"}),
        ("backfill", at(2026, 1, 2), at(2026, 1, 3), "table", {"2026-01-01", "2026-01-02", "2026-01-03"}),
        ("manual", at(2026, 1, 1), at(2026, 1, 2), "interval", {"2026-01-01"}),
    ],
)
def test_plan_is_scoped_to_the_runs_interval(lake_hook, namespace, run_type, start, end, scope, planned_days):
    name = f"{namespace}.daily"
    create_events_table(lake_hook.catalog, name, days=3, commits_per_day=6, rows_per_commit=5)
    plan = IcebergRewritePlanOperator(task_id="plan", table=name, scope=scope).execute(_context(run_type, start, end))
    epoch = dt.date(1970, 1, 1)
    days = {(epoch + dt.timedelta(days=g["partition"]["day"])).isoformat() for g in plan["groups"]}
    assert days == planned_days
    assert plan["totals"]["files"] == 6 * len(planned_days)


def test_interval_scope_without_an_interval_is_an_error(lake_hook, namespace):
    name = f"{namespace}.daily"
    create_events_table(lake_hook.catalog, name, days=1, commits_per_day=1, rows_per_commit=5)
    with pytest.raises(LakeConfigError, match="needs a run with a data interval"):
        IcebergRewritePlanOperator(task_id="plan", table=name, scope="interval").execute(_context("manual", None, None))


@pytest.mark.spark_submit
def test_a_daily_run_rewrites_only_its_own_days_delete_files(spark, lake_hook, namespace):
    """Regression: the position-delete rewrite ran over the whole table (rewrite-all, no filter),
    so a backfill of one day rewrote every day's delete files."""
    name = f"{namespace}.daily"
    create_events_table(lake_hook.catalog, name, days=3, commits_per_day=6, rows_per_commit=5)
    spark.sql(f"DELETE FROM lake.{name} WHERE event_id % 4 = 1")  # delete files in every day
    table = lake_hook.load_table(name)
    fingerprint, deletes_before = table_fingerprint(table), live_delete_files_by_partition(table)
    day_two = f"day={(dt.date(2026, 1, 2) - dt.date(1970, 1, 1)).days}"
    assert len(deletes_before) == 3 and deletes_before[day_two]

    context = _context("backfill", at(2026, 1, 2), at(2026, 1, 3))
    plan = IcebergRewritePlanOperator(task_id="plan", table=name).execute(context)
    result = IcebergRewriteDataFilesOperator(task_id="rewrite", table=name, plan=plan).execute(context)

    table = lake_hook.load_table(name)
    deletes_after = live_delete_files_by_partition(table)
    assert table_fingerprint(table) == fingerprint
    assert day_two not in deletes_after  # the run's own day: compacted, its deletes applied and dropped
    assert deletes_after == {day: paths for day, paths in deletes_before.items() if day != day_two}  # others untouched
    assert result["position_deletes"]["scope"] == "planned partitions"
    assert result["position_deletes"]["rewritten_delete_files"] <= len(deletes_before[day_two])


# -- the daily DAG's first day ---------------------------------------------------------------
def test_first_day_refusal_names_the_day_and_the_setting():
    first = parse_first_day("2026-01-01", setting="LAKE_DAILY_START_DATE")
    assert before_first_day(at(2026, 1, 1), first, dag_id="d", setting="LAKE_DAILY_START_DATE") is None
    assert before_first_day(None, first, dag_id="d", setting="LAKE_DAILY_START_DATE") is None  # no interval
    assert before_first_day(at(2025, 12, 31), first, dag_id="d", setting="LAKE_DAILY_START_DATE") == (
        "This run is for 2025-12-31, before 2026-01-01, the first day d maintains (LAKE_DAILY_START_DATE): nothing "
        "was done. To maintain earlier days, set LAKE_DAILY_START_DATE=2025-12-31 (or earlier) in the environment of "
        "the dag-processor, scheduler and workers, then trigger or backfill these days again.")


def test_a_bad_start_date_setting_fails_the_dag_file_with_a_sentence(monkeypatch):
    monkeypatch.setenv("LAKE_DAILY_START_DATE", "2025-13-01")
    with pytest.raises(LakeConfigError, match=r"LAKE_DAILY_START_DATE='2025-13-01' is not a date: write it as YYYY-MM-DD"):
        load_dag("lake_maintenance_daily.py", "lake_maintenance_daily")


def test_a_run_before_the_first_day_fails_with_a_sentence_instead_of_doing_nothing(airflow_db, monkeypatch, capfd):
    """Regression: Airflow creates no task for a run dated before a DAG's start date, so such a run
    of the daily DAG reported success having run nothing."""
    monkeypatch.setenv("LAKE_DAILY_START_DATE", "2025-07-01")
    dag = load_dag("lake_maintenance_daily.py", "lake_maintenance_daily")
    run = dag.test(logical_date=at(2025, 6, 1), run_conf={"table": "nowhere.nothing"})
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert run.state == "failed"
    assert states["check_run"] == "failed"
    assert {states[t] for t in ("acquire_lease", "plan", "rewrite", "expire", "clean")} == {"upstream_failed"}
    assert "before 2025-07-01, the first day lake_maintenance_daily maintains (LAKE_DAILY_START_DATE)" in capfd.readouterr().out
