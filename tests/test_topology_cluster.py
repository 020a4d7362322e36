"""The maintenance chain on a Spark standalone cluster: plan, rewrite, expire, clean ran there.

The ``lake_maintenance`` DAG (``dag.test()``) with an Airflow ``spark_default`` connection to a
standalone Master on 127.0.0.1 in client deploy mode: each job's driver runs in the task, its
executor on the Worker, which reaches the embedded lake's files on the same machine. The
executors' Python is named the documented way (``spark.pyspark.python`` in the lake connection's
``spark_conf``); the test process's ``PYSPARK_PYTHON`` is removed, so nothing else could supply
it. The plan is made in Spark (engine ``auto`` with its threshold lowered), whose planning runs
Python on the executors.
"""

from __future__ import annotations

import json
import os
import sys

import pytest

from demo_data import create_events_table
from conftest import load_dag
from lake_checks import age_files, files_on_disk, live_file_paths, live_files, local_path, table_fingerprint

pytestmark = [pytest.mark.spark_submit, pytest.mark.slow]


@pytest.mark.both_tracks
def test_maintenance_chain_runs_on_a_standalone_cluster(airflow_db, lake_hook, lake_home, namespace, spark_cluster,
                                                        monkeypatch):
    name = f"{namespace}.events"
    create_events_table(lake_hook.catalog, name, days=2, commits_per_day=12, rows_per_commit=10)
    table = lake_hook.load_table(name)
    rows_before = table_fingerprint(table)
    files_before = live_files(table)
    snapshot_before = table.current_snapshot().snapshot_id
    assert files_before["DATA"] == 24
    # As old as production tables are: a metadata file in the table's log past the orphan floor, so the
    # worker cannot rule out orphans and clean's listing runs on the cluster; being referenced, it stays.
    aged = table.metadata.metadata_log[0].metadata_file
    age_files([aged], hours=100)

    # What a user sets up: a Spark connection to the cluster (client mode), and the lake
    # connection's spark_conf with the executors' Python and their resources.
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({
        "conn_type": "spark", "host": "spark://127.0.0.1", "port": int(spark_cluster.master_url.rsplit(":", 1)[1]),
        "extra": {"deploy-mode": "client"}}))
    monkeypatch.setenv("AIRFLOW_CONN_LAKE_DEFAULT", json.dumps({
        "conn_type": "iceberg_lake", "host": f"sqlite:///{lake_home}/catalog.db",
        "extra": {"catalog_name": "lake", "warehouse": f"file://{lake_home}/warehouse", "spark_conf": {
            "spark.pyspark.python": sys.executable,
            "spark.executor.memory": "1g", "spark.cores.max": "1",
            # Expiry and clean shuffle into 200 partitions by default: 600 and 200 tasks on one core.
            "spark.sql.shuffle.partitions": "4",
            # The cluster's daemons listen on 127.0.0.1: the driver must too.
            "spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
        }}}))
    for variable in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON"):
        monkeypatch.delenv(variable, raising=False)
    # engine="auto" plans in Spark from this many data files on: here, always.
    monkeypatch.setattr("airflow_lake_provider.steps.plan.AUTO_SPARK_MIN_DATA_FILES", 1)

    dag = load_dag("lake_maintenance.py", "lake_maintenance")
    run = dag.test(run_conf={"table": name, "min_input_files": 2, "override_table_retention": True,
                             "older_than": "0h", "retain_last": 1, "retained": 1,
                             "orphan_older_than_hours": 72,
                             # expire on the cluster too (auto would expire a table this small in the worker)
                             "expire_settings": {"engine": "spark"}})
    assert run.state == "success", spark_cluster.logs()
    xcom = {task: run.get_task_instance(task).xcom_pull(task_ids=task) for task in ("plan", "rewrite", "expire", "clean")}

    # Every Spark step ran as an application of the cluster (an app-... id, not local-...), to the end.
    apps = {app["name"]: app for app in spark_cluster.applications()}
    for step in ("plan", "rewrite", "expire", "clean"):
        app = next((a for n, a in apps.items() if n.startswith(f"lake-{step}")), None)
        assert app is not None, f"no lake-{step} application on the cluster: {sorted(apps)}"
        assert app["id"].startswith("app-") and app["state"] == "FINISHED"
        assert app["cores"] == 1  # spark.cores.max from the connection reached spark-submit
    assert xcom["plan"]["engine"] == "spark"  # its planning ran Python on the cluster's executor
    # auto leaves a cluster's compaction to its executors (the Arrow rewriter would work in the driver).
    assert xcom["rewrite"]["rewriter"] == "iceberg" and "cluster (spark)" in xcom["rewrite"]["rewriter_note"]
    assert {w["state"] for w in spark_cluster.state()["workers"]} == {"ALIVE"}

    table = lake_hook.load_table(name)
    assert table_fingerprint(table) == rows_before
    files_after = live_files(table)
    assert files_after["DATA"] == 2  # one per day partition
    assert {p for p in files_on_disk(table) if "/data/" in p} == live_file_paths(table)["DATA"]

    # The snapshot chain through XCom matches the table.
    history = {s.snapshot_id for s in table.snapshots()}
    assert xcom["plan"]["snapshot_id"] == snapshot_before == xcom["rewrite"]["snapshot_id_before"]
    assert xcom["plan"]["totals"]["files"] == 24
    assert xcom["rewrite"]["rewritten_data_files"] == 24 and xcom["rewrite"]["added_data_files"] == 2
    assert table.current_snapshot().snapshot_id == xcom["rewrite"]["snapshot_id_after"] in history
    assert snapshot_before in xcom["expire"]["expired_snapshot_ids"]
    assert not set(xcom["expire"]["expired_snapshot_ids"]) & history
    assert xcom["expire"]["deleted_files"]["data_files"] == 24
    assert xcom["clean"]["orphan_file_count"] == 0 and os.path.exists(local_path(aged))
    assert "PYSPARK_PYTHON" not in os.environ  # nothing put it back for the executors
