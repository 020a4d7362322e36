"""PostgreSQL as the catalog database: both faces (PyIceberg and Spark) and the whole DAG on it."""

from __future__ import annotations

import json

import pytest

from airflow_lake_provider.demo_data import create_events_table
from airflow_lake_provider.exceptions import LakeConfigError
from conftest import load_dag
from lake_checks import live_files, table_fingerprint


@pytest.fixture
def pg_lake(monkeypatch, tmp_path, postgres_server, airflow_db):  # noqa: F811
    """``lake_default`` pointed at a fresh PostgreSQL database; returns the catalog hook."""
    database = postgres_server.create_database()
    (tmp_path / "warehouse").mkdir()
    monkeypatch.setenv("AIRFLOW_CONN_LAKE_DEFAULT", json.dumps(postgres_server.connection(database, tmp_path / "warehouse")))
    from airflow_lake_provider.hooks.lake import IcebergLakeHook

    hook = IcebergLakeHook()
    assert hook.config.uri == postgres_server.uri(database) and hook.config.user
    return hook


def test_wrong_password_is_a_clear_error(monkeypatch, tmp_path, postgres_server, airflow_db):  # noqa: F811
    database = postgres_server.create_database()
    conn = postgres_server.connection(database, tmp_path)
    monkeypatch.setenv("AIRFLOW_CONN_LAKE_DEFAULT", json.dumps({**conn, "password": "not-the-password"}))
    from airflow_lake_provider.hooks.lake import IcebergLakeHook

    with pytest.raises(LakeConfigError, match="password authentication failed"):
        IcebergLakeHook().get_catalog().list_namespaces()


@pytest.mark.spark_submit
def test_both_faces_and_the_maintenance_dag_on_postgresql(pg_lake):
    from airflow_lake_provider.hooks.spark_job import LakeSparkJobHook

    ok, message = pg_lake.test_connection()
    assert ok, message
    name = "pg.events"
    create_events_table(pg_lake.catalog, name, days=3, commits_per_day=20, rows_per_commit=10)  # PyIceberg writes

    # The Spark face reads what PyIceberg wrote and writes merge-on-read deletes PyIceberg sees.
    result = LakeSparkJobHook(lake_hook=pg_lake).run_job(
        "sql", {"statements": [f"DELETE FROM lake.{name} WHERE event_id % 10 = 3",
                               f"SELECT count(*) AS n, sum(event_id) AS s FROM lake.{name}"]})
    table = pg_lake.load_table(name)
    rows_before, checksum_before = table_fingerprint(table)
    arrow = table.scan(selected_fields=("event_id",)).to_arrow()
    assert result["rows"] == [{"n": rows_before, "s": sum(arrow.column("event_id").to_pylist())}]
    assert rows_before == 540
    files_before = live_files(table)
    assert files_before["DATA"] == 60 and files_before["POSITION_DELETES"] > 0
    snapshot_before = table.current_snapshot().snapshot_id

    # The DAG's default connection is the PostgreSQL catalog: every step goes through it.
    dag = load_dag("lake_maintenance.py", "lake_maintenance")
    run = dag.test(run_conf={"table": name, "override_table_retention": True, "expire_older_than_hours": 0, "retain_last": 1,
                             "clean_retained": 5, "orphan_older_than_hours": 72})
    assert run.state == "success"
    xcom = {task: run.get_task_instance(task).xcom_pull(task_ids=task) for task in ("plan", "rewrite", "expire", "clean")}

    table = pg_lake.load_table(name)
    assert table_fingerprint(table) == (rows_before, checksum_before)
    files_after = live_files(table)
    assert files_after["DATA"] == 3 and files_after["POSITION_DELETES"] == 0
    history = {s.snapshot_id for s in table.snapshots()}
    assert xcom["plan"]["snapshot_id"] == snapshot_before
    assert xcom["rewrite"]["snapshot_id_before"] == snapshot_before
    assert xcom["rewrite"]["rewritten_data_files"] == 60 and xcom["rewrite"]["failed_groups"] == []
    assert xcom["rewrite"]["snapshot_id_after"] == table.current_snapshot().snapshot_id
    assert xcom["rewrite"]["committed_snapshot_ids"][-1] in history  # its earlier data commit is expired in the run
    assert snapshot_before in xcom["expire"]["expired_snapshot_ids"]
    assert not set(xcom["expire"]["expired_snapshot_ids"]) & history
    assert xcom["clean"]["orphan_file_count"] == 0
