"""Assets on a real Airflow: a downstream DAG scheduled on a maintained table's Asset runs after
maintenance that changed the table, and not after maintenance that changed nothing."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from demo_data import create_events_table

from airflow_lake_provider.assets import MAINTENANCE_ALIAS, table_asset

CONSUMER, PRODUCER = "lake_asset_consumer", "lake_asset_producer"


def _consumer_runs(airflow) -> list[dict]:
    return airflow.api("GET", f"/dags/{CONSUMER}/dagRuns", params={"limit": 50}).json()["dag_runs"]


def _maintain(airflow, table: str) -> str:
    response = airflow.api("POST", f"/dags/{PRODUCER}/dagRuns", json={"logical_date": None, "conf": {"table": table}})
    assert response.ok, response.text
    run_id = response.json()["dag_run_id"]
    assert airflow.wait_for_run(PRODUCER, run_id, timeout=600)["state"] == "success", airflow.task_states(PRODUCER)
    return run_id


@pytest.mark.spark_submit
def test_a_downstream_dag_runs_after_maintenance_that_changed_the_table_only(airflow, lake_hook, namespace):
    name = f"{namespace}.events"
    create_events_table(lake_hook.catalog, name, days=1, commits_per_day=6, rows_per_commit=5)
    table = lake_hook.load_table(name)
    snapshot_before = table.current_snapshot().snapshot_id
    asset = table_asset(name, table.location())
    watched = Path(os.environ["LAKE_HOME"]) / "asset-consumer.json"
    watched.write_text(json.dumps({"table": name, "location": table.location()}))
    airflow.reparse("lake_asset_events.py")
    try:
        # The consumer is re-parsed with this table's Asset as its schedule.
        airflow.wait_for(lambda: any(a["uri"] == asset.uri and any(d["dag_id"] == CONSUMER for d in a["scheduled_dags"])
                                     for a in airflow.api("GET", "/assets", params={"limit": 100,
                                                          "uri_pattern": table.location().rsplit("/", 1)[-1]}
                                                          ).json()["assets"]),
                         180, f"{CONSUMER} scheduled on {asset.uri}")
        assert _consumer_runs(airflow) == []

        _maintain(airflow, name)
        table = lake_hook.load_table(name)
        assert len(table.inspect.files()) == 1  # 6 small files compacted into one
        consumer_run = airflow.wait_for(lambda: _consumer_runs(airflow), 180, f"a run of {CONSUMER}")[0]
        assert consumer_run["run_type"] == "asset_triggered"
        assert airflow.wait_for_run(CONSUMER, consumer_run["dag_run_id"], timeout=180)["state"] == "success"
        extras = airflow.xcom(CONSUMER, consumer_run["dag_run_id"], "read_the_compacted_table")
        assert len({json.dumps(e, sort_keys=True) for e in extras}) == 1, extras  # one event (seen per key)
        extra = extras[0]
        history = {s.snapshot_id for s in table.snapshots()}
        assert extra["table"] == name and extra["step"] == "rewrite"
        assert extra["snapshot_id_before"] == snapshot_before
        assert extra["snapshot_id_after"] == table.current_snapshot().snapshot_id and extra["snapshot_id_after"] in history
        assert (extra["data_files_before"], extra["data_files_after"]) == (6, 1)
        assert extra["bytes_before"] > extra["bytes_after"] > 0 and extra["delete_files_after"] == 0
        assert 0 <= extra["health_score"] <= 100
        # The event came through the maintenance alias, from the rewrite of the producer's run.
        events = airflow.api("GET", "/assets/events", params={"source_dag_id": PRODUCER, "limit": 50}).json()
        mine = [e for e in events["asset_events"] if e["uri"] == asset.uri]
        assert [e["source_task_id"] for e in mine] == ["rewrite"]
        aliases = airflow.api("GET", "/assets/aliases", params={"limit": 100}).json()["asset_aliases"]
        assert MAINTENANCE_ALIAS in {alias["name"] for alias in aliases}

        # Control: a second run finds nothing to compact and changes nothing; no event, no consumer run.
        _maintain(airflow, name)
        assert lake_hook.load_table(name).current_snapshot().snapshot_id == extra["snapshot_id_after"]
        time.sleep(20)  # many scheduler loops (heartbeat 2 s)
        assert len(_consumer_runs(airflow)) == 1
        events = airflow.api("GET", "/assets/events", params={"source_dag_id": PRODUCER, "limit": 50}).json()
        assert len([e for e in events["asset_events"] if e["uri"] == asset.uri]) == 1
    finally:
        watched.unlink(missing_ok=True)
        airflow.reparse("lake_asset_events.py")
