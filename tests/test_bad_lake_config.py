"""A wrong S3 key, a wrong OAuth secret, an unreachable endpoint, missing S3A jars or an unknown
warehouse: refused in seconds before any JVM, in one sentence naming the cause and the fix,
with the table unchanged. ``test_connection`` says the same. Real SeaweedFS (S3 + Iceberg
REST catalog) on 127.0.0.1; a closed port (9, discard) for "unreachable"."""

from __future__ import annotations

import json
import os
import socket
import time
import uuid

import pyarrow as pa
import pytest

from airflow_lake_provider.exceptions import LakeConfigError
from airflow_lake_provider.hooks.lake import IcebergLakeHook
from airflow_lake_provider.operators.rewrite import IcebergRewriteDataFilesOperator
from lake_checks import FakeTaskInstance, table_fingerprint
from ports import free_port

# Refused within this many seconds (PyArrow retries a refused S3 connection for about 2 s).
FAST = 8.0


def _closed_port() -> int:
    """A port nothing listens on (free a moment ago)."""
    return free_port()


def _set(monkeypatch, conn: dict) -> str:
    conn_id = f"badconf_{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(conn))
    return conn_id


def _with(conn: dict, *, extra: dict | None = None, properties: dict | None = None, **fields) -> dict:
    """A copy of ``conn`` with fields, extras and S3 properties replaced."""
    changed = json.loads(json.dumps(conn))
    changed.update(fields)
    changed["extra"].update(extra or {})
    changed["extra"]["properties"].update(properties or {})
    return changed


@pytest.fixture(scope="module")
def rest_table(seaweedfs_oauth_client):
    """A table on S3 behind the REST catalog (OAuth client distinct from the S3 key)."""
    server = seaweedfs_oauth_client
    conn = server.rest_connection()
    conn_id = f"badconf_good_{uuid.uuid4().hex[:6]}"
    os.environ[f"AIRFLOW_CONN_{conn_id.upper()}"] = json.dumps(conn)
    try:
        catalog = IcebergLakeHook(conn_id).catalog
        namespace = f"badconf{uuid.uuid4().hex[:6]}"
        catalog.create_namespace(namespace)
        schema = pa.schema([("id", pa.int64()), ("name", pa.string())])
        table = catalog.create_table(f"{namespace}.items", schema=schema)
        for start in (0, 10, 20):
            table.append(pa.table({"id": list(range(start, start + 10)), "name": ["x"] * 10}, schema=schema))
        yield server, conn, conn_id, f"{namespace}.items"
    finally:
        os.environ.pop(f"AIRFLOW_CONN_{conn_id.upper()}", None)


def _state(conn_id: str, table: str):
    loaded = IcebergLakeHook(conn_id).load_table(table)
    return loaded.current_snapshot().snapshot_id, table_fingerprint(loaded)


def _bad_cases(server, conn: dict, tmp_path) -> list[tuple[str, dict, str, str]]:
    """(label, connection, what the message must say, what the catalogue shows as the input)."""
    closed = _closed_port()
    sql_on_missing_bucket = server.sql_connection(f"sqlite:///{tmp_path}/catalog.db", "wh")
    sql_on_missing_bucket["extra"]["warehouse"] = "s3://no-such-bucket/wh"
    return [
        ("wrong S3 secret key", _with(conn, properties={"s3.secret-access-key": uuid.uuid4().hex}),
         "The S3 store refused the connection's key", "REST catalog fine, s3.secret-access-key wrong"),
        ("wrong OAuth client secret", _with(conn, password=uuid.uuid4().hex),
         "rejected the connection's credential", "REST catalog, Password (client secret) wrong"),
        ("REST catalog unreachable", _with(conn, host=f"http://127.0.0.1:{closed}"),
         "Cannot reach the REST catalog", "REST catalog URI on a closed port"),
        ("S3 endpoint unreachable", _with(conn, properties={"s3.endpoint": f"http://127.0.0.1:{closed}"}),
         "Cannot reach the S3 endpoint", "s3.endpoint on a closed port"),
        ("unknown REST warehouse", _with(conn, extra={"warehouse": "no-such-warehouse"}),
         "has no warehouse 'no-such-warehouse'", "REST warehouse name the catalog does not serve"),
        ("S3 bucket missing", sql_on_missing_bucket,
         "Bucket 'no-such-bucket' does not exist", "SQL catalog, warehouse s3://no-such-bucket/wh"),
    ]


def test_bad_s3_and_rest_configuration_is_refused_in_seconds_before_spark(rest_table, tmp_path, monkeypatch,
                                                                          bad_input):
    server, conn, good_id, table = rest_table
    before = _state(good_id, table)
    for label, bad, expected, given in _bad_cases(server, conn, tmp_path):
        if label == "S3 bucket missing":
            target = "wh.items"  # the catalog is empty: the bucket check comes first
        else:
            target = table
        conn_id = _set(monkeypatch, bad)
        op = IcebergRewriteDataFilesOperator(task_id="rewrite", table=target, lake_conn_id=conn_id,
                                             options={"rewrite-all": "true"})
        started = time.monotonic()
        with pytest.raises(LakeConfigError) as raised:
            op.execute({"ti": FakeTaskInstance()})
        elapsed = time.monotonic() - started
        message = str(raised.value)
        assert expected in message, (label, message)
        assert elapsed < FAST, (label, elapsed)
        assert op._job_hook is None, label  # refused before a job hook existed: no JVM
        for secret in (server.secret_key, server.oauth_client_secret, bad["password"] if "password" in bad else ""):
            assert not secret or secret not in message
        assert "\n" not in message and "Traceback" not in message
        bad_input("connection (S3 / REST)", given, raised.value, table_checked=True)

        # The UI's Test button says the same sentence.
        ok, said = IcebergLakeHook(conn_id).test_connection()
        assert not ok and expected in said, (label, said)
    assert _state(good_id, table) == before


@pytest.mark.both_tracks
def test_jars_follow_the_spark_line_from_the_cache_or_by_coordinates(tmp_path, monkeypatch, bad_input):
    """No JVM: the spark-submit command is read. The coordinates are those of the installed Spark line
    (hadoop-aws that of pyspark's own Hadoop); a cached jar is shipped, an uncached one resolved by
    Spark; what the user names is not added again; a Spark line Iceberg has no runtime for is refused."""
    from pathlib import Path

    import pyspark

    from airflow_lake_provider.hooks.spark_job import LakeSparkJobHook
    from airflow_lake_provider.core.spark_settings import SparkSettings
    from airflow_lake_provider.core.contracts import SqlJobArgs
    from airflow_lake_provider.jars import jar_file_name, spark_line

    line = spark_line()
    assert pyspark.__version__.startswith(line.minor)
    hadoop = sorted(Path(pyspark.__file__).parent.glob("jars/hadoop-client-api-*.jar"))
    assert hadoop and line.s3a[0] == f"org.apache.hadoop:hadoop-aws:{hadoop[0].stem.removeprefix('hadoop-client-api-')}"
    scala = sorted(Path(pyspark.__file__).parent.glob("jars/scala-library-*.jar"))
    assert scala and scala[0].stem.removeprefix("scala-library-").startswith(line.scala)
    cache = tmp_path / "cache"
    monkeypatch.setenv("LAKE_JAR_CACHE", str(cache))

    def lake(**extra) -> IcebergLakeHook:
        return IcebergLakeHook(_set(monkeypatch, {
            "conn_type": "iceberg_lake", "host": f"sqlite:///{tmp_path}/catalog.db",
            "extra": {"warehouse": "s3://warehouse/lake", "properties": {"s3.endpoint": "http://127.0.0.1:9"}, **extra}}))

    def command(job: LakeSparkJobHook) -> tuple[list[str], list[str]]:
        work_dir = tmp_path / uuid.uuid4().hex
        work_dir.mkdir()
        argv = job.prepare(SqlJobArgs(statements=["SELECT 1"]), job.resolve_target(), work_dir).command()
        listed = {flag: argv[argv.index(flag) + 1].split(",") if flag in argv else [] for flag in ("--jars", "--packages")}
        return listed["--jars"], listed["--packages"]

    wanted = [line.iceberg_runtime, *line.s3a]
    jars, packages = command(LakeSparkJobHook(lake_hook=lake()))
    assert packages == wanted and jars == ["/usr/share/java/sqlite-jdbc.jar"]
    cache.mkdir()
    for coordinate in wanted:
        (cache / jar_file_name(coordinate)).write_bytes(b"")
    jars, packages = command(LakeSparkJobHook(lake_hook=lake()))
    assert packages == [] and jars == [str(cache / jar_file_name(line.iceberg_runtime)), "/usr/share/java/sqlite-jdbc.jar",
                                       *(str(cache / jar_file_name(c)) for c in line.s3a)]
    # Named by the user (connection's spark_packages, spark.jars.packages, a jar, a provided runtime): theirs only.
    own = ["org.apache.hadoop:hadoop-aws:9.9.9", "org.apache.iceberg:iceberg-spark-runtime-4.1_2.13:1.99.0"]
    for job in (LakeSparkJobHook(lake_hook=lake(spark_packages=",".join(own))),
                LakeSparkJobHook(lake_hook=lake(), settings=SparkSettings(spark_conf={"spark.jars.packages": ",".join(own)}))):
        jars, packages = command(job)
        assert packages == own and not [j for j in jars if "hadoop-aws" in j or "iceberg-spark-runtime" in j]
    jars, packages = command(LakeSparkJobHook(lake_hook=lake(iceberg_runtime_provided=True)))
    assert not [j for j in jars if "iceberg-spark-runtime" in j]
    # A Spark line Iceberg ships no runtime for: refused before any JVM, naming the lines that work.
    job = LakeSparkJobHook(lake_hook=lake(spark_version="4.2.0"))
    with pytest.raises(LakeConfigError) as raised:
        job.run(SqlJobArgs(statements=["SELECT 1"]))
    assert job._submit_hook is None
    assert "Spark 3.5, 4.0, 4.1 only" in str(raised.value) and "pyspark==4.1.3" in str(raised.value)
    bad_input("connection", "spark_version 4.2.0 (no Iceberg runtime for Spark 4.2)", raised.value)
    # The Spark provider 6.3.4's pyspark-client 4.2.0 under a pyspark 4.1.4 (pip overwrote 285 of its files and
    # reported nothing): refused before any JVM, with the pins that make one Spark of the directory.
    import importlib.metadata

    installed = {"pyspark": "4.1.4", "pyspark-client": "4.2.0"}
    monkeypatch.setattr(importlib.metadata, "version", lambda name: installed[name])
    job = LakeSparkJobHook(lake_hook=lake())
    with pytest.raises(LakeConfigError) as raised:
        job.run(SqlJobArgs(statements=["SELECT 1"]))
    assert job._submit_hook is None
    assert "pyspark 4.1.4 and pyspark-client 4.2.0 are both installed" in str(raised.value)
    assert "pip install 'pyspark==4.1.3' 'pyspark-client==4.1.3'" in str(raised.value)  # both published
    bad_input("installation", "pyspark 4.1.4 beside pyspark-client 4.2.0 (the Spark provider 6.3.4's)", raised.value)


def test_test_connection_on_real_seaweedfs(rest_table, monkeypatch):
    server, conn, good_id, table = rest_table
    ok, message = IcebergLakeHook(good_id).test_connection()
    assert ok, message
    assert f"read the metadata of {table}" in message and "tables." in message
    # The same messages through the REST and S3 names a user types; one sentence each.
    cases = {
        "unreachable": (_with(conn, host=f"http://127.0.0.1:{_closed_port()}"), "connection refused"),
        "rejected": (_with(conn, password="not-the-secret"), "invalid_client"),
        "missing warehouse": (_with(conn, extra={"warehouse": "nope"}), "table bucket nope not found"),
    }
    for label, (bad, detail) in cases.items():
        started = time.monotonic()
        ok, message = IcebergLakeHook(_set(monkeypatch, bad)).test_connection()
        assert not ok and detail in message, (label, message)
        assert time.monotonic() - started < FAST
        assert "\n" not in message and "Traceback" not in message and "HTTPConnectionPool" not in message


def test_spark_redaction_covers_every_secret_the_catalog_conf_holds():
    """Spark hides a conf value in its event log and UI when the key matches spark.redaction.regex;
    its default misses the REST ``credential`` and ``s3.access-key-id``. The jobs' pattern covers
    every key the catalog conf fills with a secret (both are plain regexes, same in Java and Python)."""
    import re

    from airflow_lake_provider.catalog_config import CatalogConfig, is_secret_key
    from airflow_lake_provider.jobs.session import SPARK_DEFAULT_REDACTION, redaction_regex

    config = CatalogConfig(
        name="lake", kind="rest", uri="http://127.0.0.1:8181", warehouse="tables", user="client", password="c0ffee99",
        properties={"s3.endpoint": "http://127.0.0.1:8333", "s3.access-key-id": "AKID0001", "s3.secret-access-key": "f00d",
                    "s3.session-token": "beef"},
    )
    conf = config.spark_catalog_conf()
    secret_keys = [key for key in conf if is_secret_key(key)]
    assert "spark.sql.catalog.lake.credential" in secret_keys and "spark.hadoop.fs.s3a.secret.key" in secret_keys
    missed_by_default = [key for key in secret_keys if not re.search(SPARK_DEFAULT_REDACTION, key)]
    assert "spark.sql.catalog.lake.credential" in missed_by_default  # why the jobs widen it
    widened = redaction_regex(None)
    assert not [key for key in secret_keys if not re.search(widened, key)]
    # A user's own pattern is widened, not replaced; widening twice changes nothing.
    assert redaction_regex("(?i)mine").startswith("(?i)mine|") and redaction_regex(widened) == widened


def test_a_rest_catalog_that_never_answers_is_refused_in_seconds(monkeypatch, bad_input):
    """PyIceberg's REST client sets no timeout: a catalog host that accepts the connection and
    stays silent would hang the task. The bounded REST catalog gives up (timeouts shortened here)."""
    from airflow_lake_provider import preflight

    monkeypatch.setattr(preflight, "REST_OPEN_TIMEOUT", (1.0, 1.5))
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)  # the kernel completes the handshake; nothing ever reads or answers
        uri = f"http://127.0.0.1:{silent.getsockname()[1]}"
        conn_id = _set(monkeypatch, {"conn_type": "iceberg_lake", "host": uri, "login": "client", "password": "c0ffee",
                                     "extra": {"catalog_kind": "rest", "warehouse": "tables"}})
        started = time.monotonic()
        ok, message = IcebergLakeHook(conn_id).test_connection()
        assert time.monotonic() - started < 6
        assert not ok and "did not answer in time" in message and uri in message, message
        with pytest.raises(LakeConfigError) as raised:
            IcebergLakeHook(conn_id).get_catalog()
    bad_input("connection (S3 / REST)", "REST catalog URI on a host that accepts connections and never answers",
              raised.value)
