"""The fleet DAG on eleven tables: three unhealthy (one of them held by another maintenance run's
lease), one missing. One plan task plans them all, one Spark application compacts the two
unhealthy tables it could lease, the held one is left for the next run, the missing one fails
the run without stopping the others, and every lease the run took is given back."""

from __future__ import annotations

import pytest

from demo_data import create_events_table
from conftest import load_dag
from lake_checks import live_files, table_fingerprint

from airflow_lake_provider.core.lease import LeaseSettings
from airflow_lake_provider.hooks.lease import TableLeaseHook

pytestmark = pytest.mark.spark_submit


def test_fleet_compacts_only_the_tables_that_need_it(airflow_db, lake_hook, namespace):
    healthy = [f"{namespace}.healthy_{i}" for i in range(7)]
    unhealthy = [f"{namespace}.busy_{i}" for i in range(2)]
    held = f"{namespace}.held"  # needs work, but another run holds its maintenance lease
    missing = f"{namespace}.missing"
    for name in healthy:
        create_events_table(lake_hook.catalog, name, days=1, commits_per_day=1, rows_per_commit=20)
    for name in [*unhealthy, held]:
        create_events_table(lake_hook.catalog, name, days=2, commits_per_day=8, rows_per_commit=10)
    before = {name: (lake_hook.load_table(name).current_snapshot().snapshot_id, table_fingerprint(lake_hook.load_table(name)))
              for name in healthy + unhealthy + [held]}
    leases = TableLeaseHook(lake_hook)
    other, _ = leases.try_acquire(held, "elsewhere/lake_maintenance/manual_1", LeaseSettings(ttl_seconds=600))

    dag = load_dag("lake_fleet_maintenance.py", "lake_fleet_maintenance")
    tables = healthy[:3] + [unhealthy[0], missing] + healthy[3:] + [unhealthy[1], held]
    run = dag.test(run_conf={"tables": [*tables, unhealthy[0]]})  # a table listed twice is maintained once

    instances = {(ti.task_id, ti.map_index): ti for ti in run.get_task_instances()}
    # One task planned every table: the missing one is named in its failure, the others were handed on.
    plan = instances[("plan", -1)]
    assert plan.state == "failed"
    failures = plan.xcom_pull(task_ids="plan", key="failures")
    assert list(failures) == [missing] and "does not exist in catalog" in failures[missing]
    plans = plan.xcom_pull(task_ids="plan")
    assert [p["table"] for p in plans] == [t for t in tables if t != missing]
    assert {p["table"] for p in plans if p["groups"]} == {*unhealthy, held}
    # Both leasable unhealthy tables in one rewrite task: one Spark application. The held one is
    # left for the next run, naming its holder; not a failure.
    rewrites = [ti for (task_id, _), ti in instances.items() if task_id == "rewrite"]
    assert len(rewrites) == 1 and rewrites[0].state == "success"
    results = rewrites[0].xcom_pull(task_ids="rewrite", map_indexes=0)
    assert [r["table"] for r in results] == [unhealthy[0], unhealthy[1]]
    busy = rewrites[0].xcom_pull(task_ids="rewrite", key="busy", map_indexes=0)
    assert list(busy) == [held] and "elsewhere/lake_maintenance/manual_1" in busy[held]
    expires = [ti for (task_id, _), ti in instances.items() if task_id == "expire"]
    assert len(expires) == 2 and all(ti.state == "success" for ti in expires)
    releases = [ti for (task_id, _), ti in instances.items() if task_id == "release_lease"]
    assert len(releases) == 2 and all(ti.state == "success" for ti in releases)
    # Every lease the run took is given back; the other run's lease is where it was.
    for name in unhealthy:
        assert next(r for r in results if r["table"] == name)["lease"]["holder"].endswith("/0")  # the batch's
        assert not leases.load(name)[1].held
    assert leases.load(held)[1].record.token == other.token
    leases.release(other)
    assert lake_hook.load_table(held).current_snapshot().snapshot_id == before[held][0]
    # The missing table does not hide behind the others' success: the run is marked failed.
    assert instances[("any_table_failed", -1)].state == "failed" and run.state == "failed"

    for name in unhealthy:
        table = lake_hook.load_table(name)
        assert live_files(table)["DATA"] == 2  # 16 small files -> one per day
        assert table_fingerprint(table) == before[name][1]
        assert table.current_snapshot().summary["airflow.dag-id"] == "lake_fleet_maintenance"
        assert table.current_snapshot().snapshot_id == next(r for r in results if r["table"] == name)["snapshot_id_after"]
    for name in healthy:
        assert lake_hook.load_table(name).current_snapshot().snapshot_id == before[name][0]  # untouched
