"""A secret in the catalog connection never reaches the task log, XCom or any process's argv."""

from __future__ import annotations

import json
import threading

import psutil
import pyarrow as pa
import pytest

from conftest import load_dag

pytestmark = pytest.mark.spark_submit

PASSWORD = "Pw-7f3c9e1d-never-log-me"
TOKEN = "Tok-52aa81b0-never-log-me"


def test_connection_secrets_stay_out_of_logs_xcom_and_argv(monkeypatch, tmp_path, airflow_db, capfd):
    monkeypatch.setenv(
        "AIRFLOW_CONN_LAKE_SECRET_PROBE",
        json.dumps({
            "conn_type": "iceberg_lake",
            "host": f"sqlite:///{tmp_path}/catalog.db",
            "login": "maintainer",
            "password": PASSWORD,
            "extra": {"catalog_name": "vault", "warehouse": f"file://{tmp_path}/warehouse",
                      "properties": {"s3.secret-access-key": TOKEN}},
        }),
    )
    from airflow_lake_provider.hooks.lake import IcebergLakeHook

    catalog = IcebergLakeHook("lake_secret_probe").get_catalog()
    catalog.create_namespace("db")
    schema = pa.schema([("id", pa.int64())])
    catalog.create_table("db.items", schema=schema).append(pa.table({"id": [1, 2, 3, 4]}, schema=schema))

    # Record the argv of every process the job starts, while it runs.
    seen_argv: list[str] = []
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            for process in psutil.process_iter(["cmdline"]):
                try:
                    cmdline = " ".join(process.info["cmdline"] or [])
                except (psutil.NoSuchProcess, psutil.AccessDenied):
                    continue
                if "lake-job-" in cmdline and cmdline not in seen_argv:
                    seen_argv.append(cmdline)
            done.wait(0.2)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        dag = load_dag("lake_secret_probe.py", "lake_secret_probe")
        run = dag.test(run_conf={"table": "vault.db.items"})
    finally:
        done.set()
        watcher.join()
    captured = capfd.readouterr()
    log = captured.out + captured.err

    assert run.state == "success"
    xcom = run.get_task_instance("count_rows").xcom_pull(task_ids="count_rows")
    assert xcom["rows"] == [{"n": 4}]
    # The capture and the watcher did see the job: these checks can fail.
    assert "Submitting job 'sql'" in log
    assert any("spark-submit" in argv or "SparkSubmit" in argv for argv in seen_argv)
    for secret in (PASSWORD, TOKEN):
        assert secret not in log
        assert secret not in json.dumps(xcom)
        assert not [argv for argv in seen_argv if secret in argv]
