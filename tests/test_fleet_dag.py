"""The fleet DAG on ten tables: two unhealthy, one missing."""

from __future__ import annotations

import pytest

from demo_data import create_events_table
from conftest import load_dag
from lake_checks import live_files, table_fingerprint

pytestmark = pytest.mark.spark_submit


def test_fleet_compacts_only_the_tables_that_need_it(airflow_db, lake_hook, namespace):
    healthy = [f"{namespace}.healthy_{i}" for i in range(7)]
    unhealthy = [f"{namespace}.busy_{i}" for i in range(2)]
    missing = f"{namespace}.missing"
    for name in healthy:
        create_events_table(lake_hook.catalog, name, days=1, commits_per_day=1, rows_per_commit=20)
    for name in unhealthy:
        create_events_table(lake_hook.catalog, name, days=2, commits_per_day=8, rows_per_commit=10)
    before = {name: (lake_hook.load_table(name).current_snapshot().snapshot_id, table_fingerprint(lake_hook.load_table(name)))
              for name in healthy + unhealthy}

    dag = load_dag("lake_fleet_maintenance.py", "lake_fleet_maintenance")
    tables = healthy[:3] + [unhealthy[0], missing] + healthy[3:] + [unhealthy[1]]
    run = dag.test(run_conf={"tables": [*tables, unhealthy[0]]})  # a table listed twice is maintained once

    instances = {(ti.task_id, ti.map_index): ti for ti in run.get_task_instances()}
    assert len([key for key in instances if key[0] == "plan"]) == len(tables) == 10
    plan_states = {tables[i]: instances[("plan", i)].state for i in range(len(tables))}
    assert plan_states[missing] == "failed"
    assert all(state == "success" for name, state in plan_states.items() if name != missing)
    rewrites = [ti for (task_id, _), ti in instances.items() if task_id == "rewrite"]
    assert len(rewrites) == 2 and all(ti.state == "success" for ti in rewrites)  # two Spark applications
    # The missing table does not hide behind the others' success: the run is marked failed.
    assert instances[("any_table_failed", -1)].state == "failed" and run.state == "failed"

    for name in unhealthy:
        table = lake_hook.load_table(name)
        assert live_files(table)["DATA"] == 2  # 16 small files -> one per day
        assert table_fingerprint(table) == before[name][1]
        assert table.current_snapshot().summary["airflow.dag-id"] == "lake_fleet_maintenance"
    for name in healthy:
        assert lake_hook.load_table(name).current_snapshot().snapshot_id == before[name][0]  # untouched
