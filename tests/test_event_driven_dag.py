"""The shipped event-driven DAG on a real Airflow: the triggerer watches two tables; commits to
one start its maintenance run, the other (healthy) starts none."""

from __future__ import annotations

import json
import time

import pytest
from demo_data import _batch, create_events_table

DAY = __import__("datetime").date(2026, 1, 1)


def _runs(airflow, dag_id: str) -> list[dict]:
    response = airflow.api("GET", f"/dags/{dag_id}/dagRuns", params={"limit": 20})
    return response.json()["dag_runs"] if response.ok else []


@pytest.mark.spark_submit
def test_commits_start_a_maintenance_run_and_a_healthy_table_starts_none(airflow, lake_hook, namespace):
    busy, calm = f"{namespace}.busy", f"{namespace}.calm"
    create_events_table(lake_hook.catalog, busy, days=1, commits_per_day=2, rows_per_commit=3)
    create_events_table(lake_hook.catalog, calm, days=1, commits_per_day=1, rows_per_commit=3)
    # A dry maintenance keeps the run short: the point here is which runs start, and for which table.
    maintenance = {"dry_run": True, "lease": False, "clean": {"remove_orphans": False}}
    watched = [{"table": t, "thresholds": {"min_commits": 3}, "poll_interval": 2, "maintenance": maintenance}
               for t in (busy, calm)]
    response = airflow.api("POST", "/variables", json={"key": "lake_watched_tables", "value": json.dumps(watched)})
    assert response.ok, response.text
    airflow.reparse("lake_maintenance_on_demand.py")
    busy_dag, calm_dag = (f"lake_on_demand__{t.replace('.', '__')}" for t in (busy, calm))
    try:
        airflow.wait_for_dag(busy_dag)
        airflow.wait_for_dag(calm_dag)
        time.sleep(15)  # the triggerer has picked the watchers up and polled a few times
        assert _runs(airflow, busy_dag) == [] and _runs(airflow, calm_dag) == []  # 2 and 1 commits: under 3

        table = lake_hook.load_table(busy)
        for i in range(2):
            table.append(_batch(10_000 + 10 * i, 3, DAY, ["a"]))
        snapshot = lake_hook.load_table(busy).current_snapshot().snapshot_id

        run = airflow.wait_for(lambda: _runs(airflow, busy_dag), 180, f"a run of {busy_dag}")[0]
        assert run["run_type"] == "asset_triggered"
        assert airflow.wait_for_run(busy_dag, run["dag_run_id"], timeout=300)["state"] == "success", \
            airflow.task_states(busy_dag)
        plan = airflow.xcom(busy_dag, run["dag_run_id"], "plan")
        assert plan["table"] == busy and plan["snapshot_id"] == snapshot
        time.sleep(10)  # the need was announced once: no second run
        assert len(_runs(airflow, busy_dag)) == 1 and _runs(airflow, calm_dag) == []
    finally:
        airflow.api("DELETE", "/variables/lake_watched_tables")
        airflow.reparse("lake_maintenance_on_demand.py")  # its DAGs and their watchers go
