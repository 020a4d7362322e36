"""A real Airflow (api-server, scheduler, dag-processor, triggerer on 127.0.0.1): REST triggers
with conf, params validation (400), and a backfill that compacts each day in its own run."""

from __future__ import annotations

import datetime as dt

import pytest

from demo_data import create_events_table
from lake_checks import live_files, table_fingerprint

pytestmark = [pytest.mark.spark_submit, pytest.mark.slow]
EPOCH = dt.date(1970, 1, 1)


def _files_per_day(table) -> dict[str, int]:
    counts: dict[str, int] = {}
    for task in table.scan().plan_files():
        day = (EPOCH + dt.timedelta(days=task.file.partition[0])).isoformat()
        counts[day] = counts.get(day, 0) + 1
    return counts


def test_rest_trigger_with_conf_maintains_the_table(airflow, lake_hook, namespace):
    name = f"{namespace}.events"
    create_events_table(lake_hook.catalog, name, days=2, commits_per_day=10, rows_per_commit=10)
    fingerprint = table_fingerprint(lake_hook.load_table(name))

    response = airflow.api("POST", "/dags/lake_maintenance/dagRuns",
                           json={"logical_date": None, "conf": {"table": name, "min_input_files": 2}})
    assert response.status_code == 200, response.text
    run = airflow.wait_for_run("lake_maintenance", response.json()["dag_run_id"])
    assert run["state"] == "success", airflow.logs()

    table = lake_hook.load_table(name)
    assert live_files(table)["DATA"] == 2
    assert table_fingerprint(table) == fingerprint
    rewrite = airflow.xcom("lake_maintenance", run["dag_run_id"], "rewrite")
    assert rewrite["snapshot_id_after"] == table.current_snapshot().snapshot_id


@pytest.mark.parametrize(
    ("conf", "field"),
    [
        ({"table": "events; DROP TABLE x"}, "table"),
        ({}, "table"),
        ({"table": "db.events", "min_input_files": 0}, "min_input_files"),
        ({"table": "db.events", "orphan_older_than_hours": 3}, "orphan_older_than_hours"),
        ({"table": "db.events", "policy": "KEEP_NOTHING"}, "policy"),
        ({"table": "db.events", "dry_run": "maybe"}, "dry_run"),
    ],
)
def test_invalid_conf_is_refused_with_400(airflow, bad_input, conf, field):
    response = airflow.api("POST", "/dags/lake_maintenance/dagRuns", json={"logical_date": None, "conf": conf})
    assert response.status_code == 400, response.text
    assert field in response.text
    bad_input("lake_maintenance params (REST API)", f"conf={conf!r}", f"HTTP 400: {response.json().get('detail', response.text)}")


def test_backfill_compacts_each_day_in_its_own_run(airflow, lake_hook, namespace):
    name = f"{namespace}.daily"
    create_events_table(lake_hook.catalog, name, days=3, commits_per_day=6, rows_per_commit=10,
                        first_day=dt.date(2026, 1, 1))
    fingerprint = table_fingerprint(lake_hook.load_table(name))
    airflow.wait_for_dag("lake_maintenance_daily")
    assert airflow.api("PATCH", "/dags/lake_maintenance_daily", json={"is_paused": False}).ok

    response = airflow.api("POST", "/backfills", json={
        "dag_id": "lake_maintenance_daily",
        "from_date": "2026-01-01T00:00:00Z",
        "to_date": "2026-01-02T00:00:00Z",  # two daily runs: enough to show each keeps to its day
        # No orphan listing (a Spark job per run): these runs prove each keeps to its own day; the REST-trigger
        # test runs the same factory DAG with its clean step (tests/BUDGET.md, P5).
        "dag_run_conf": {"table": name, "min_input_files": 2, "remove_orphans": False},
        "max_active_runs": 1,
        "reprocess_behavior": "completed",
    })
    assert response.status_code == 200, response.text
    backfill_id = response.json()["id"]

    def runs_done():
        runs = airflow.api("GET", "/dags/lake_maintenance_daily/dagRuns",
                           params={"run_type": "backfill", "limit": 100}).json()["dag_runs"]
        runs = [r for r in runs if r.get("backfill_id") in (None, backfill_id)]
        return runs if runs and all(r["state"] in ("success", "failed") for r in runs) else None

    runs = airflow.wait_for(runs_done, 900, "the backfill's runs", interval=5,
                            diagnose=lambda: airflow.task_states("lake_maintenance_daily"))
    assert all(r["state"] == "success" for r in runs), airflow.logs()
    run_days = sorted(dt.datetime.fromisoformat(r["data_interval_start"].replace("Z", "+00:00")).date().isoformat()
                      for r in runs)
    assert len(run_days) >= 2

    for run in runs:
        day = dt.datetime.fromisoformat(run["data_interval_start"].replace("Z", "+00:00")).date()
        plan = airflow.xcom("lake_maintenance_daily", run["dag_run_id"], "plan")
        planned_days = {(EPOCH + dt.timedelta(days=g["partition"]["day"])).isoformat() for g in plan["groups"]}
        assert planned_days <= {day.isoformat()}  # each run planned only its own day

    table = lake_hook.load_table(name)
    per_day = _files_per_day(table)
    for day in ("2026-01-01", "2026-01-02", "2026-01-03"):
        assert per_day[day] == (1 if day in run_days else 6), per_day  # days outside the backfill untouched
    assert table_fingerprint(table) == fingerprint
