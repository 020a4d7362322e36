"""The maintenance chain where production lakes live: tables on S3 (SeaweedFS on 127.0.0.1),
behind an Iceberg REST catalog (OAuth2 client credentials), behind a SQL catalog on PostgreSQL and
behind a Hive metastore.

Each topology runs the real ``lake_maintenance`` DAG (``dag.test()``, spark-submit jobs) with
``lake_default`` pointing at the server, and checks it with raw Spark (a second catalog
registered in the shared session, reading S3 through S3A) and with PyIceberg: the same rows,
deleted rows still deleted, fewer files, the XCom snapshot chain in the table's history, every
live file still on S3, and nothing outside the table's prefix touched. Then, at operator
level: the Spark planning engine on S3, and the clean step's orphan floor on S3 (an
unreferenced object older than the floor goes, a younger one stays, a file referenced under
its ``s3a://`` name is the same file as its ``s3://`` listing), the orphan that goes sits in a
quarantine on S3 with its manifest, and a restore brings it back.
"""

from __future__ import annotations

import io
import json
import time
import uuid
from urllib.parse import urlsplit

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from demo_data import create_events_table
from conftest import load_dag
from lake_checks import (FakeTaskInstance, assert_lean_digest_matches, live_content_files, live_files,
                         plans_by_both_engines, spark_fingerprint, table_fingerprint)
from metastore_server import hive_metastore  # noqa: F401 - the session fixture

pytestmark = pytest.mark.spark_submit

RUN_CONF = {"override_table_retention": True, "older_than": "0h", "retain_last": 1, "retained": 5,
            "orphan_older_than_hours": 24}


def _key(location: str) -> str:
    """``bucket/key`` of an ``s3://``/``s3a://`` location (what pyarrow's S3 file system names)."""
    parts = urlsplit(location)
    return f"{parts.netloc}{parts.path}"


def _objects(fs, location: str) -> set[str]:
    """Every object (not the directory markers) under ``location``."""
    from pyarrow import fs as pafs

    infos = fs.get_file_info(pafs.FileSelector(_key(location).rstrip("/"), recursive=True, allow_not_found=True))
    return {info.path for info in infos if info.type == pafs.FileType.File}


def _exists(fs, key: str) -> bool:
    from pyarrow import fs as pafs

    return fs.get_file_info(key).type == pafs.FileType.File


def _put(fs, key: str, data: bytes = b"not a table file") -> None:
    with fs.open_output_stream(key) as out:
        out.write(data)


def _register(spark, hook) -> str:
    """Register the hook's catalog in the shared Spark session (S3A settings into Hadoop's conf)."""
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    for key, value in hook.spark_catalog_conf().items():
        if key.startswith("spark.hadoop."):
            hadoop.set(key[len("spark.hadoop."):], value)
        elif key.startswith(f"spark.sql.catalog.{hook.config.name}"):
            spark.conf.set(key, value)
    return hook.config.name


@pytest.fixture
def s3_lake(monkeypatch, seaweedfs_server, spark, lake_hook, airflow_db):  # noqa: F811
    """``s3_lake(conn)``: ``lake_default`` pointed at ``conn``; returns the catalog hook.

    Asks for the shared ``spark`` and ``lake_hook`` first, so they are built on the embedded
    lake before the connection is redirected (monkeypatch restores it after the test).
    """
    from airflow_lake_provider.jars import cached_jars, spark_line

    cached_jars(spark_line().s3a)  # bootstrap caches them: resolving them per job would cost every test

    def point(conn: dict):
        from airflow_lake_provider.hooks.lake import IcebergLakeHook

        monkeypatch.setenv("AIRFLOW_CONN_LAKE_DEFAULT", json.dumps(conn))
        hook = IcebergLakeHook()
        ok, message = hook.test_connection()
        assert ok, message
        _register(spark, hook)
        return hook

    return point


def assert_compacted_on_s3(table, xcom: dict, snapshot_before: int, fs, location: str) -> None:
    """The 12 small files of the S3 tests' table are 2: the snapshot chain through XCom is the table's,
    every live file is still on S3 and the rewritten ones are gone."""
    assert live_files(table) == {"DATA": 2, "POSITION_DELETES": 0, "EQUALITY_DELETES": 0}
    history = {s.snapshot_id for s in table.snapshots()}
    assert xcom["plan"]["snapshot_id"] == xcom["rewrite"]["snapshot_id_before"] == snapshot_before
    assert xcom["plan"]["totals"]["files"] == 12
    assert xcom["rewrite"]["rewritten_data_files"] == 12 and xcom["rewrite"]["failed_groups"] == []
    # The Arrow rewriter on S3, through the table's own FileIO settings, with the deletes applied.
    assert xcom["rewrite"]["rewriter"] == "arrow", xcom["rewrite"]["rewriter_note"]
    assert xcom["rewrite"]["snapshot_id_after"] == table.current_snapshot().snapshot_id
    assert xcom["rewrite"]["committed_snapshot_ids"][-1] in history
    assert snapshot_before in xcom["expire"]["expired_snapshot_ids"]
    assert not set(xcom["expire"]["expired_snapshot_ids"]) & history
    assert xcom["expire"]["deleted_files"]["data_files"] == 12
    assert xcom["expire"]["expired_by"] == "driver"  # Iceberg's ExpireSnapshots in the job's JVM, no Spark application
    on_s3 = _objects(fs, location)
    live = {_key(f.file_path) for f in live_content_files(table)}
    assert live <= on_s3
    assert not {k for k in on_s3 if "/data/" in k} - live


def _maintain_and_verify(hook, spark, fs, name: str, *, remove_orphans: bool = True, before_dag=None) -> tuple:
    """Write a table of small files with deletes, run the DAG, check everything a user would.

    ``before_dag(name)``: more checks on the table as written, before the DAG runs. ``remove_orphans=False``:
    the run's clean lists no orphans (one Spark application fewer), checked in its result."""
    catalog = hook.config.name
    create_events_table(hook.catalog, name, days=2, commits_per_day=6, rows_per_commit=10)  # PyIceberg writes to S3
    spark.sql(f"DELETE FROM {catalog}.{name} WHERE event_id % 10 = 3")  # Spark writes merge-on-read deletes there
    table = hook.load_table(name)
    location = table.location()
    assert urlsplit(location).scheme == "s3"
    fingerprint = table_fingerprint(table)
    assert spark_fingerprint(spark, name, catalog=catalog) == fingerprint and fingerprint[0] == 108
    files_before = live_files(table)
    assert files_before["DATA"] == 12 and files_before["POSITION_DELETES"] > 0
    snapshot_before = table.current_snapshot().snapshot_id
    assert_lean_digest_matches(hook, name)  # what expire and clean will decide from, read without PyIceberg's model
    # Beside the table: a sibling whose name starts with the table's, and a neighbour in its namespace
    # (in table layout: SeaweedFS's table bucket refuses other keys).
    sentinels = [f"{_key(location)}_backup/data/old.parquet",
                 f"{_key(location).rsplit('/', 1)[0]}/neighbour/data/keep.parquet"]
    for key in sentinels:
        _put(fs, key)
    if before_dag is not None:
        before_dag(name)

    run_conf = {"table": name, **RUN_CONF, **({} if remove_orphans else {"remove_orphans": False})}
    run = load_dag("lake_maintenance.py", "lake_maintenance").test(run_conf=run_conf)
    assert run.state == "success"
    xcom = {task: run.get_task_instance(task).xcom_pull(task_ids=task) for task in ("plan", "rewrite", "expire", "clean")}

    table = hook.load_table(name)
    assert table_fingerprint(table) == fingerprint
    spark.sql(f"REFRESH TABLE {catalog}.{name}")
    assert spark_fingerprint(spark, name, catalog=catalog) == fingerprint
    assert not spark.sql(f"SELECT 1 FROM {catalog}.{name} WHERE event_id % 10 = 3").collect()
    assert_compacted_on_s3(table, xcom, snapshot_before, fs, location)
    assert xcom["clean"]["orphan_file_count"] == 0
    assert (xcom["clean"]["orphan_older_than_ms"] is not None) == remove_orphans
    assert all(_exists(fs, key) for key in sentinels)
    return table, fingerprint, sentinels


@pytest.mark.both_tracks
def test_maintenance_dag_on_s3_behind_the_rest_catalog(s3_lake, seaweedfs_server, spark):  # noqa: F811
    from airflow_lake_provider.operators.clean import IcebergCleanPolicyOperator

    # The official provider's `iceberg` connection: its fields suffice for a REST catalog on S3.
    hook = s3_lake(seaweedfs_server.official_rest_connection(catalog_name="s3rest"))
    assert hook.config.kind == "rest" and hook.config.user == seaweedfs_server.access_key
    fs = seaweedfs_server.filesystem()
    namespace = f"rest_{uuid.uuid4().hex[:8]}"  # the REST catalog takes lower-case names only
    hook.catalog.create_namespace(namespace)
    name = f"{namespace}.events"
    table, (rows, _), sentinels = _maintain_and_verify(hook, spark, fs, name)

    # A file committed under its s3a:// name: the clean step lists s3:// names and must see one file.
    location = table.location()
    extra = table.scan(limit=4).to_arrow()
    extra = pa.Table.from_pylist(
        [{**row, "event_id": row["event_id"] + 100_000} for row in extra.to_pylist()],
        schema=pa.schema([field.remove_metadata() for field in extra.schema]))
    buffer = io.BytesIO()
    pq.write_table(extra, buffer)
    s3a_file = f"s3a://{_key(location)}/data/added-under-s3a.parquet"
    _put(fs, _key(s3a_file), buffer.getvalue())
    table.add_files([s3a_file])
    # Unreferenced objects in the table's data/: one older than the floor, one under it.
    old_orphan = f"{_key(location)}/data/orphan-old.parquet"
    _put(fs, old_orphan)
    time.sleep(6)  # S3 times have whole seconds: keep well clear of the floor on both sides
    young_orphan = f"{_key(location)}/data/orphan-young.parquet"
    _put(fs, young_orphan)

    # The table bucket takes table keys only (as S3 Tables do), so the quarantine is in the plain bucket.
    quarantine = f"s3://warehouse/quarantine-{uuid.uuid4().hex[:8]}"
    result = IcebergCleanPolicyOperator(task_id="clean", table=name, retained=5, orphan_older_than_hours=3 / 3600,
                                        force_orphan_floor=True, quarantine_location=quarantine,
                                        ).execute({"ti": FakeTaskInstance(task_id="clean")})
    assert result["orphan_files"] == [f"s3://{old_orphan}"]
    assert result["orphans_listed_by"] == "driver"  # Iceberg's listing in the job's JVM, no Spark application
    assert not _exists(fs, old_orphan) and _exists(fs, young_orphan)
    assert _exists(fs, _key(s3a_file)) and all(_exists(fs, key) for key in sentinels)
    # The orphan sits in the quarantine on S3, named in the run's manifest; the restore puts it back.
    run_dir = f"{_key(quarantine)}/{namespace}/events/{result['quarantine_run']}"
    assert _exists(fs, f"{run_dir}/files/data/orphan-old.parquet")
    with fs.open_input_stream(f"{run_dir}/manifest.json") as manifest:
        entries = json.loads(manifest.read())["files"]
    assert [(e["original_path"], e["size"]) for e in entries] == [(f"s3://{old_orphan}", len(b"not a table file"))]
    from airflow_lake_provider.jobs import restore_quarantine

    restored = restore_quarantine.run(spark, "s3rest", {"table": name, "quarantine_run": result["quarantine_run"],
                                                        "quarantine_location": quarantine})
    assert restored["restored"] == [f"s3://{old_orphan}"] and _exists(fs, old_orphan)
    assert not _exists(fs, f"{run_dir}/files/data/orphan-old.parquet")
    table = hook.load_table(name)
    assert table.scan().to_arrow().num_rows == rows + 4
    spark.sql(f"REFRESH TABLE s3rest.{name}")
    assert spark.table(f"s3rest.{name}").count() == rows + 4


def test_maintenance_dag_on_s3_behind_a_sql_catalog(s3_lake, seaweedfs_server, postgres_server, spark):  # noqa: F811
    """The SQL catalog on PostgreSQL, as production runs it: PyIceberg, Spark jobs and the shared
    session all go through its database (with Login/Password), the files through S3.

    Its DAG run lists no orphans: its warehouse is the plain ``s3://warehouse/<prefix>`` layout, whose
    orphan listing the REST test's operator-level clean covers (and the REST and Hive DAG runs list
    orphans in the table bucket's and the metastore's layouts)."""
    from postgres_server import CATALOG_PASSWORD, CATALOG_USER

    prefix = f"sql-{uuid.uuid4().hex[:8]}"
    database = postgres_server.create_database()
    hook = s3_lake(seaweedfs_server.sql_connection(postgres_server.uri(database), prefix, catalog_name="s3sql",
                                                   login=CATALOG_USER, password=CATALOG_PASSWORD))
    assert hook.config.jdbc_driver == "postgresql"
    fs = seaweedfs_server.filesystem()
    hook.catalog.create_namespace("db")
    name = "db.events"

    def plans_alike(table: str) -> None:
        """Both planning engines on S3 give the same plan (the Spark one reads the manifests through S3A)."""
        by_spark, by_pyiceberg = plans_by_both_engines(table=table, target_file_size_bytes=1024 * 1024,
                                                       include_file_paths=True)
        assert by_spark == by_pyiceberg and by_spark["totals"]["files"] == 12

    table, _, _ = _maintain_and_verify(hook, spark, fs, name, remove_orphans=False, before_dag=plans_alike)
    assert table.location().startswith(f"s3://warehouse/{prefix}/")


def test_maintenance_dag_on_s3_behind_a_hive_metastore(s3_lake, seaweedfs_server, hive_metastore, spark):  # noqa: F811
    """A Hive metastore (2.3, the version pyspark's jars carry) whose warehouse is on S3: the
    namespace and table go where the metastore says, and both faces commit under its locks."""
    hook = s3_lake(seaweedfs_server.catalog_connection("hive", hive_metastore.uri, hive_metastore.warehouse,
                                                       catalog_name="s3hive"))
    assert hook.config.kind == "hive"
    fs = seaweedfs_server.filesystem()
    namespace = f"hive_{uuid.uuid4().hex[:8]}"
    hook.catalog.create_namespace(namespace)
    table, _, _ = _maintain_and_verify(hook, spark, fs, f"{namespace}.events")
    assert table.location() == f"{hive_metastore.warehouse}/{namespace}.db/events"


