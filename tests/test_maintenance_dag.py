"""The lake_maintenance DAG end to end: real Airflow (dag.test), real Spark, real Iceberg."""

from __future__ import annotations

import json
import re

import pytest

from airflow_lake_provider.demo_data import create_events_table
from airflow_lake_provider.links import SparkHistoryLink
from conftest import load_dag
from lake_checks import live_files, table_fingerprint

pytestmark = pytest.mark.spark_submit


def test_dag_compacts_keeps_rows_and_chains_snapshot_ids(airflow_db, lake_hook, spark, namespace):
    name = f"{namespace}.events"
    create_events_table(lake_hook.catalog, name, days=4, commits_per_day=60, rows_per_commit=10)
    # Merge-on-read deletes from another engine, like a real writer would leave them.
    spark.sql(f"DELETE FROM lake.{name} WHERE event_id % 10 = 3")
    table = lake_hook.load_table(name)
    rows_before, checksum_before = table_fingerprint(table)
    files_before = live_files(table)
    snapshot_before = table.current_snapshot().snapshot_id
    assert files_before["DATA"] == 240 and files_before["POSITION_DELETES"] > 0

    dag = load_dag("lake_maintenance.py", "lake_maintenance")
    run = dag.test(run_conf={"table": name, "override_table_retention": True, "expire_older_than_hours": 0, "retain_last": 1,
                             "clean_retained": 5, "orphan_older_than_hours": 72})
    assert run.state == "success"
    xcom = {task: run.get_task_instance(task).xcom_pull(task_ids=task) for task in ("plan", "rewrite", "expire", "clean")}

    table = lake_hook.load_table(name)
    files_after = live_files(table)
    # A small fraction of the files: one per day partition.
    assert files_after["DATA"] == 4
    # No dangling or small position-delete files left behind.
    assert files_after["POSITION_DELETES"] == 0 and files_after["EQUALITY_DELETES"] == 0
    # Same rows, deleted rows stay deleted.
    assert table_fingerprint(table) == (rows_before, checksum_before)
    assert not [r for r in table.scan(selected_fields=("event_id",)).to_arrow().to_pylist() if r["event_id"] % 10 == 3]

    # Snapshot IDs through XCom match the table's history.
    history = {s.snapshot_id for s in table.snapshots()}
    assert xcom["plan"]["snapshot_id"] == snapshot_before
    assert xcom["plan"]["totals"]["files"] == 240
    assert xcom["rewrite"]["snapshot_id_before"] == snapshot_before
    assert xcom["rewrite"]["rewritten_data_files"] == 240 and xcom["rewrite"]["added_data_files"] == 4
    assert xcom["rewrite"]["failed_groups"] == []
    assert xcom["rewrite"]["snapshot_id_after"] in history
    assert set(xcom["rewrite"]["committed_snapshot_ids"]) <= history
    assert table.current_snapshot().snapshot_id == xcom["rewrite"]["snapshot_id_after"]
    for sid in xcom["rewrite"]["committed_snapshot_ids"]:
        summary = table.snapshot_by_id(sid).summary
        assert summary["airflow.dag-id"] == "lake_maintenance" and summary["airflow.task-id"] == "rewrite"
    # Expiry removed the old history but not what the rewrite produced.
    assert snapshot_before in xcom["expire"]["expired_snapshot_ids"]
    assert not set(xcom["expire"]["expired_snapshot_ids"]) & history
    assert xcom["expire"]["deleted_files"]["data_files"] == 240
    assert xcom["clean"]["orphan_file_count"] == 0

    # Running it again is idempotent: nothing left to do, so no new snapshot and the same rows.
    history_before = [s.snapshot_id for s in table.snapshots()]
    current_before = table.current_snapshot().snapshot_id
    again = dag.test(run_conf={"table": name, "override_table_retention": True, "expire_older_than_hours": 0, "retain_last": 1,
                               "clean_retained": 5, "orphan_older_than_hours": 72})
    assert again.state == "success"
    assert again.get_task_instance("rewrite").state == "skipped"
    table = lake_hook.load_table(name)
    assert table.current_snapshot().snapshot_id == current_before
    assert {s.snapshot_id for s in table.snapshots()} <= set(history_before)  # expiry may still trim history
    assert table_fingerprint(table) == (rows_before, checksum_before)


def test_dag_on_a_healthy_table_skips_the_rewrite(airflow_db, lake_hook, namespace):
    name = f"{namespace}.tidy"
    create_events_table(lake_hook.catalog, name, days=2, commits_per_day=1, rows_per_commit=100)
    snapshot_before = lake_hook.load_table(name).current_snapshot().snapshot_id

    dag = load_dag("lake_maintenance.py", "lake_maintenance")
    run = dag.test(run_conf={"table": name, "dry_run": True})
    assert run.state == "success"
    assert run.get_task_instance("rewrite").state == "skipped"
    assert run.get_task_instance("plan").xcom_pull(task_ids="plan")["groups"] == []
    assert lake_hook.load_table(name).current_snapshot().snapshot_id == snapshot_before


def test_dry_run_shows_the_plan_and_what_would_go_and_changes_nothing(airflow_db, lake_hook, namespace, monkeypatch):
    # A Spark connection that names its history server: the Spark task links to its application.
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps(
        {"conn_type": "spark", "host": "local[*]", "extra": {"history_server_url": "http://127.0.0.1:18080/"}}))
    name = f"{namespace}.events"
    create_events_table(lake_hook.catalog, name, days=2, commits_per_day=8, rows_per_commit=10)
    table = lake_hook.load_table(name)
    before = (table_fingerprint(table), live_files(table), [s.snapshot_id for s in table.snapshots()])

    dag = load_dag("lake_maintenance.py", "lake_maintenance")
    run = dag.test(run_conf={"table": name, "dry_run": True, "override_table_retention": True, "expire_older_than_hours": 0, "retain_last": 1,
                             "clean_policy": "KEEP_LATEST_COMMITS", "clean_retained": 4})
    assert run.state == "success"
    xcom = {task: run.get_task_instance(task).xcom_pull(task_ids=task) for task in ("plan", "rewrite", "expire", "clean")}

    # What a real run would do, shown...
    assert xcom["plan"]["totals"]["files"] == 16 and xcom["plan"]["totals"]["groups"] == 2
    assert xcom["rewrite"]["dry_run"] is True and xcom["rewrite"]["committed_snapshot_ids"] == []
    snapshots = before[2]
    assert sorted(xcom["expire"]["would_expire_snapshot_ids"]) == sorted(snapshots[:-1])  # all but the current
    assert sorted(xcom["clean"]["would_expire_snapshot_ids"]) == sorted(snapshots[:-4])  # all but the last 4 commits
    assert xcom["expire"]["expired_snapshot_ids"] == [] and xcom["clean"]["expired_snapshot_ids"] == []
    link = run.get_task_instance("clean").xcom_pull(task_ids="clean", key=SparkHistoryLink().xcom_key)
    assert re.fullmatch(r"http://127\.0\.0\.1:18080/history/local-\d+/jobs/", link), link
    # ...and nothing done.
    table = lake_hook.load_table(name)
    assert (table_fingerprint(table), live_files(table), [s.snapshot_id for s in table.snapshots()]) == before
