"""The production recipe as written: tables on S3 behind a REST catalog, Spark on a standalone cluster.

The two connections are the ``bash`` block of docs/production.md's "The common case" section, read
from the page: only the hosts, the keys, the executors' Python and the executors' sizes are replaced
by this machine's (SeaweedFS's S3 and Iceberg REST catalog, a standalone Master and a Worker of one
core and 1 GiB, all on 127.0.0.1); every other value is the page's. The shipped ``lake_maintenance`` DAG
(``dag.test()``) runs with its defaults in client deploy mode: each job's driver in the task, its
executor on the Worker (the Arrow rewriter's Parquet work too, one task per new file). The test process's ``PYSPARK_PYTHON`` is removed, so the executors' Python
can only come from the page's ``spark.pyspark.python``. The plan is made in Spark (engine ``auto``
with its threshold lowered), whose planning runs Python on the executors; expiry goes to the
cluster because the table is on object storage; clean lists the table in the worker and, finding
nothing old enough to be an orphan, starts no application.
"""

from __future__ import annotations

import json
import os
import re
import sys
import uuid
from pathlib import Path

import pytest

from demo_data import create_events_table
from conftest import load_dag
from lake_checks import live_files, table_fingerprint
from test_topology_s3 import _key, _objects

pytestmark = [pytest.mark.spark_submit, pytest.mark.slow]

PRODUCTION = Path(__file__).resolve().parent.parent / "docs" / "production.md"


def production_connections() -> dict[str, dict]:
    """``AIRFLOW_CONN_* -> connection`` of the recipe's ``bash`` block, as the page writes them."""
    text = PRODUCTION.read_text()
    section = text[text.index("## The common case"):]
    block = section[section.index("```bash\n") + len("```bash\n"):]
    block = block[:block.index("```")]
    found = {name: json.loads(value) for name, value in re.findall(r"export (AIRFLOW_CONN_\w+)='(.*?)'", block, re.S)}
    assert set(found) == {"AIRFLOW_CONN_LAKE_DEFAULT", "AIRFLOW_CONN_SPARK_DEFAULT"}, block
    return found


def _replace(mapping: dict, key: str, value) -> None:
    assert key in mapping, f"docs/production.md's recipe no longer sets {key!r}"
    mapping[key] = value


@pytest.mark.both_tracks
def test_the_production_recipe_runs_the_maintenance_dag(airflow_db, spark_cluster, seaweedfs_server,  # noqa: F811
                                                         monkeypatch):
    from airflow_lake_provider.hooks.lake import IcebergLakeHook
    from airflow_lake_provider.jars import cached_jars, spark_line

    cached_jars(spark_line().s3a)  # bootstrap caches the S3A pair: the executors fetch it from the driver
    connections = production_connections()
    lake, spark_conn = connections["AIRFLOW_CONN_LAKE_DEFAULT"], connections["AIRFLOW_CONN_SPARK_DEFAULT"]
    _replace(lake, "host", seaweedfs_server.rest_uri)
    _replace(lake, "login", seaweedfs_server.access_key)
    _replace(lake, "password", seaweedfs_server.secret_key)
    for key, value in seaweedfs_server.s3_properties().items():
        _replace(lake["extra"]["properties"], key, value)
    # The executors' Python, and what one Worker of 1 core and 1 GiB holds (expiry shuffles into
    # spark.sql.shuffle.partitions: hundreds of tasks on one core with the page's 64).
    for key, value in {"spark.pyspark.python": sys.executable, "spark.driver.host": "127.0.0.1",
                       "spark.executor.memory": "1g", "spark.cores.max": "1", "spark.sql.shuffle.partitions": "4"}.items():
        _replace(lake["extra"]["spark_conf"], key, value)
    _replace(spark_conn, "host", "spark://127.0.0.1")
    _replace(spark_conn, "port", int(spark_cluster.master_url.rsplit(":", 1)[1]))
    for name, conn in connections.items():
        monkeypatch.setenv(name, json.dumps(conn))
    for variable in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON"):
        monkeypatch.delenv(variable, raising=False)
    # engine="auto" plans in Spark from this many data files on: here, always.
    monkeypatch.setattr("airflow_lake_provider.steps.plan.AUTO_SPARK_MIN_DATA_FILES", 1)

    hook = IcebergLakeHook()
    assert hook.config.kind == "rest" and hook.test_connection()[0]
    namespace = f"prod_{uuid.uuid4().hex[:8]}"  # the REST catalog takes lower-case names only
    hook.catalog.create_namespace(namespace)
    name = f"{namespace}.events"
    create_events_table(hook.catalog, name, days=2, commits_per_day=12, rows_per_commit=10)
    table = hook.load_table(name)
    rows_before, snapshot_before = table_fingerprint(table), table.current_snapshot().snapshot_id
    assert live_files(table)["DATA"] == 24

    run = load_dag("lake_maintenance.py", "lake_maintenance").test(run_conf={
        "table": name, "min_input_files": 2, "override_table_retention": True, "older_than": "0h",
        "retain_last": 1, "retained": 1})
    assert run.state == "success", spark_cluster.logs()
    tis = {task: run.get_task_instance(task) for task in ("plan", "rewrite", "expire", "clean")}
    xcom = {task: ti.xcom_pull(task_ids=task) for task, ti in tis.items()}

    # plan and rewrite ran as applications of the cluster (app-... ids), to the end, with the page's sizing;
    # expire's job did its metadata work in its driver (Iceberg's ExpireSnapshots), with no application.
    apps = {app["name"]: app for app in spark_cluster.applications()}
    assert xcom["expire"]["expired_by"] == "driver" and not any(n.startswith("lake-expire") for n in apps)
    for step in ("plan", "rewrite"):
        app = next((a for n, a in apps.items() if n.startswith(f"lake-{step}")), None)
        assert app is not None, f"no lake-{step} application on the cluster: {sorted(apps)}"
        assert app["id"].startswith("app-") and app["state"] == "FINISHED"
        assert app["cores"] == 1 and app.get("memoryperexecutor", app.get("memoryperslave")) == 1024
    assert not any(n.startswith("lake-clean") for n in apps)  # nothing old enough to be an orphan
    assert xcom["plan"]["engine"] == "spark"  # its planning ran Python on the cluster's executor
    # The Arrow rewriter's Parquet work ran as tasks on the cluster's executor (Iceberg planned and committed).
    assert (xcom["rewrite"]["rewriter"], xcom["rewrite"]["rewritten_by"]) == ("arrow", "executors"), xcom["rewrite"]
    said = tis["clean"].xcom_pull(task_ids="clean", key="summary")
    assert said[-1].startswith(f"Summary for {name}: nothing to clean"), said
    assert {w["state"] for w in spark_cluster.state()["workers"]} == {"ALIVE"}

    # The same rows, compacted, every live file on S3 and the rewritten ones gone.
    table = hook.load_table(name)
    assert table_fingerprint(table) == rows_before
    assert live_files(table) == {"DATA": 2, "POSITION_DELETES": 0, "EQUALITY_DELETES": 0}  # one per day
    live = {_key(task.file.file_path) for task in table.scan().plan_files()}
    assert {k for k in _objects(seaweedfs_server.filesystem(), table.location()) if "/data/" in k} == live
    # The snapshot chain through XCom matches the table.
    history = {s.snapshot_id for s in table.snapshots()}
    assert xcom["plan"]["snapshot_id"] == snapshot_before == xcom["rewrite"]["snapshot_id_before"]
    assert xcom["plan"]["totals"]["files"] == 24
    assert xcom["rewrite"]["rewritten_data_files"] == 24 and xcom["rewrite"]["added_data_files"] == 2
    assert table.current_snapshot().snapshot_id == xcom["rewrite"]["snapshot_id_after"] in history
    assert snapshot_before in xcom["expire"]["expired_snapshot_ids"]
    assert not set(xcom["expire"]["expired_snapshot_ids"]) & history
    assert xcom["expire"]["deleted_files"]["data_files"] == 24
    assert "PYSPARK_PYTHON" not in os.environ  # nothing put it back for the executors
