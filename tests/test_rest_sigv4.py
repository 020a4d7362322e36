"""REST catalogs that sign every request with AWS SigV4 (as AWS Glue's and S3 Tables' Iceberg REST
endpoints require), on both faces: PyIceberg in the worker (boto3) and the Spark job (Iceberg's
``iceberg-aws-bundle``, added by the hook). SeaweedFS checks each request's signature against its S3
identities and refuses an unsigned one, so a run that works was signed with the right key, and a
wrong secret is refused before any JVM starts.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
import uuid

import pytest

from demo_data import create_events_table
from lake_checks import FakeTaskInstance, live_files, table_fingerprint
from seaweedfs_server import REGION, TABLE_BUCKET

pytestmark = pytest.mark.spark_submit


def _sigv4_connection(server, secret: str) -> dict:
    """The connection docs/connection.md gives for a SigV4 catalog, signing as the catalog's own identity."""
    signing = {"rest.signing-name": "s3tables", "rest.signing-region": REGION, "client.region": REGION}
    return {
        "conn_type": "iceberg_lake",
        "host": server.rest_uri,
        "extra": {
            "catalog_kind": "rest", "catalog_name": "signed", "warehouse": TABLE_BUCKET,
            "properties": server.s3_properties(),
            "pyiceberg_properties": {"rest.sigv4-enabled": "true", **signing,
                                     "client.access-key-id": server.oauth_client_id,
                                     "client.secret-access-key": secret},
            "spark_properties": {"rest.auth.type": "sigv4", **signing,
                                 "rest.access-key-id": server.oauth_client_id, "rest.secret-access-key": secret},
        },
    }


def test_both_faces_sign_rest_requests_with_sigv4_and_a_wrong_secret_is_refused(seaweedfs_oauth_client, monkeypatch,
                                                                                bad_input):
    from airflow_lake_provider.exceptions import LakeConfigError
    from airflow_lake_provider.hooks.lake import IcebergLakeHook
    from airflow_lake_provider.operators.rewrite import IcebergRewriteDataFilesOperator

    server = seaweedfs_oauth_client
    # The server enforces signatures: an unsigned request is refused.
    with pytest.raises(urllib.error.HTTPError) as unsigned:
        urllib.request.urlopen(f"{server.rest_uri}/v1/namespaces", timeout=10)
    assert unsigned.value.code in (401, 403)

    monkeypatch.setenv("AIRFLOW_CONN_LAKE_SIGNED", json.dumps(_sigv4_connection(server, server.oauth_client_secret)))
    hook = IcebergLakeHook("lake_signed")
    ok, message = hook.test_connection()
    assert ok, message
    assert any("iceberg-aws-bundle" in jar for jar in hook.spark_classpath().jars)  # the Spark face's signer
    namespace = f"sigv4_{uuid.uuid4().hex[:8]}"
    hook.catalog.create_namespace(namespace)
    name = f"{namespace}.events"
    create_events_table(hook.catalog, name, days=1, commits_per_day=6, rows_per_commit=10)  # signed commits
    table = hook.load_table(name)
    fingerprint, before = table_fingerprint(table), table.current_snapshot().snapshot_id
    assert live_files(table)["DATA"] == 6

    # The Spark job loads the table and commits its rewrite through the signed REST catalog.
    result = IcebergRewriteDataFilesOperator(task_id="rewrite", table=name, lake_conn_id="lake_signed").execute(
        {"ti": FakeTaskInstance(task_id="rewrite")})
    table = hook.load_table(name)
    assert result["rewritten_data_files"] == 6 and result["snapshot_id_before"] == before
    assert result["snapshot_id_after"] == table.current_snapshot().snapshot_id
    assert live_files(table)["DATA"] == 1 and table_fingerprint(table) == fingerprint

    # A wrong secret: the server's refusal, said before any JVM, the table untouched.
    monkeypatch.setenv("AIRFLOW_CONN_LAKE_BADLY_SIGNED", json.dumps(_sigv4_connection(server, "not-the-secret")))
    ok, message = IcebergLakeHook("lake_badly_signed").test_connection()
    assert not ok and "signature" in message, message
    with pytest.raises(LakeConfigError, match="signature") as refused:
        IcebergRewriteDataFilesOperator(task_id="rewrite", table=name, lake_conn_id="lake_badly_signed").execute(
            {"ti": FakeTaskInstance(task_id="rewrite")})
    assert "not-the-secret" not in str(refused.value)
    bad_input("connection (S3 / REST)", "a SigV4-signed REST catalog with a wrong secret key", refused.value)
    assert hook.load_table(name).current_snapshot().snapshot_id == result["snapshot_id_after"]
