"""PostgreSQL as the catalog database: a wrong password is a clear error.

Both faces and the whole maintenance DAG on a PostgreSQL catalog run in
``tests/test_topology_s3.py`` (the SQL-catalog topology: PostgreSQL for the catalog, S3 for the files).
"""

from __future__ import annotations

import json

import pytest

from airflow_lake_provider.exceptions import LakeConfigError


def test_wrong_password_is_a_clear_error(monkeypatch, tmp_path, postgres_server, airflow_db):  # noqa: F811
    database = postgres_server.create_database()
    conn = postgres_server.connection(database, tmp_path)
    monkeypatch.setenv("AIRFLOW_CONN_LAKE_DEFAULT", json.dumps({**conn, "password": "not-the-password"}))
    from airflow_lake_provider.hooks.lake import IcebergLakeHook

    with pytest.raises(LakeConfigError, match="password authentication failed"):
        IcebergLakeHook().get_catalog().list_namespaces()
