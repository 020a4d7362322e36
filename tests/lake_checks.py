"""What a user checks on a table: rows, a checksum, files, snapshots. Shared by the tests."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit


def local_path(uri: str) -> str:
    """The local path of a ``file:`` URI (or of a bare path) of the embedded lake."""
    return urlsplit(uri).path


def age_files(paths, hours: float) -> None:
    """Set the modification time of ``paths`` (URIs or paths) ``hours`` back: past an orphan floor."""
    then = time.time() - hours * 3600
    for path in paths:
        os.utime(local_path(path), (then, then))


def rows_fingerprint(rows: list[dict]) -> tuple[int, str]:
    """Row count and a checksum of ``rows`` that ignores their order, so any engine's read compares."""
    digest = hashlib.sha256()
    for text in sorted(repr(sorted(row.items())) for row in rows):
        digest.update(text.encode())
    return len(rows), digest.hexdigest()


def table_fingerprint(table) -> tuple[int, str]:
    """Row count and a checksum of every visible row, read through PyIceberg."""
    return rows_fingerprint(table.scan().to_arrow().to_pylist())


def _is_checksum(path: Path) -> bool:
    """Hadoop's local file system writes ``.NAME.crc`` beside each file and deletes it with the file."""
    return path.name.startswith(".") and path.name.endswith(".crc")


def files_on_disk(table) -> set[str]:
    """Files under the table location (Hadoop's checksum side files left out)."""
    root = Path(urlsplit(table.location()).path)
    return {str(p) for p in root.rglob("*") if p.is_file() and not _is_checksum(p)}


def live_content_files(table):
    """Every live content file (data, position or equality deletes, DVs) of the current snapshot.

    One per manifest entry: deletion vectors of several data files share one Puffin path, so
    entries, not paths, are what a count of delete files means.
    """
    snapshot = table.current_snapshot()
    for manifest in snapshot.manifests(table.io) if snapshot is not None else ():
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
            yield entry.data_file


def live_file_paths(table) -> dict[str, set[str]]:
    """Paths of the current snapshot's live files by content (DATA, POSITION_DELETES, EQUALITY_DELETES)."""
    paths: dict[str, set[str]] = {"DATA": set(), "POSITION_DELETES": set(), "EQUALITY_DELETES": set()}
    for data_file in live_content_files(table):
        paths[data_file.content.name].add(urlsplit(data_file.file_path).path)
    return paths


def live_files(table) -> dict[str, int]:
    """Live data and delete files of the current snapshot by content (each deletion vector counts once)."""
    counts = {"DATA": 0, "POSITION_DELETES": 0, "EQUALITY_DELETES": 0}
    for data_file in live_content_files(table):
        counts[data_file.content.name] += 1
    return counts


def live_deletion_vectors(table) -> int:
    """Live deletion vectors (format v3: position deletes stored as Puffin blobs) of the current snapshot."""
    return sum(1 for f in live_content_files(table)
               if f.content.name == "POSITION_DELETES" and f.file_format.name == "PUFFIN")


def removed_data_file_paths(table, snapshot_id: int) -> set[str]:
    """Data files a snapshot removed (status DELETED in the manifests it wrote)."""
    snapshot = table.snapshot_by_id(snapshot_id)
    paths = set()
    for manifest in snapshot.manifests(table.io):
        if manifest.added_snapshot_id != snapshot_id:
            continue
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=False):
            if entry.status.name == "DELETED" and entry.data_file.content.name == "DATA":
                paths.add(entry.data_file.file_path)
    return paths


class FakeTaskInstance:
    """Just what the operators read from ``context['ti']`` when a test calls ``execute`` directly."""

    def __init__(self, dag_id: str = "tests", run_id: str = "manual__test", task_id: str = "task", map_index: int = -1):
        self.dag_id, self.run_id, self.task_id, self.map_index = dag_id, run_id, task_id, map_index
        self.pushed: dict[str, object] = {}

    def xcom_push(self, key: str, value: object) -> None:
        self.pushed[key] = value


def spark_fingerprint(spark, table_name: str, *, snapshot_id: int | None = None, catalog: str = "lake") -> tuple[int, str]:
    """Row count and checksum of every visible row read by Spark (Iceberg's Java reader, which
    applies equality deletes too), comparable with :func:`table_fingerprint`."""
    reader = spark.read.format("iceberg")
    if snapshot_id is not None:
        reader = reader.option("versionAsOf", str(snapshot_id))
    return rows_fingerprint([row.asDict() for row in reader.load(f"{catalog}.{table_name}").collect()])


def files_by_spec(table) -> dict[int, int]:
    """Live data files of the current snapshot, counted by the partition spec they were written under."""
    counts: dict[int, int] = {}
    for task in table.scan().plan_files():
        counts[task.file.spec_id] = counts.get(task.file.spec_id, 0) + 1
    return counts


def live_delete_files_by_partition(table) -> dict[str, set[str]]:
    """Paths of the live delete files of the current snapshot, by partition (``day=20454``)."""
    found: dict[str, set[str]] = {}
    for data_file in live_content_files(table):
        if data_file.content.name != "DATA":
            spec = table.specs()[data_file.spec_id]
            key = "/".join(f"{f.name}={data_file.partition[i]}" for i, f in enumerate(spec.fields))
            found.setdefault(key, set()).add(data_file.file_path)
    return found


def rows_by_spark(spark, table_name: str, catalog: str = "lake") -> list[tuple]:
    """Every visible row as read by Spark (deletes of every kind applied), sorted: for tables PyIceberg cannot read."""
    return sorted(tuple(row) for row in spark.table(f"{catalog}.{table_name}").collect())


def rows_by_pyiceberg(table) -> list[tuple]:
    """Every visible row as read by PyIceberg, sorted, in the shape of :func:`rows_by_spark`."""
    return sorted(tuple(row.values()) for row in table.scan().to_arrow().to_pylist())


def plans_by_both_engines(**operator_args) -> tuple[dict, dict]:
    """The plan operator's result with ``engine="spark"`` and with ``engine="pyiceberg"``, each
    without its ``engine`` key, so a test can assert the two engines plan alike."""
    from airflow_lake_provider.operators.plan import IcebergRewritePlanOperator

    plans = []
    for engine in ("spark", "pyiceberg"):
        plan = IcebergRewritePlanOperator(task_id="plan", engine=engine, **operator_args).execute(
            {"ti": FakeTaskInstance(task_id="plan")})
        assert plan.pop("engine") == engine
        plans.append(plan)
    return plans[0], plans[1]


def job_processes(marker: str = "jobs/main.py", *, under: int | None = None,
                  spark_submit_only: bool = False, drivers_only: bool = False) -> list:
    """Our Spark jobs' processes now running, found by ``marker`` in their command line.

    ``under``: only descendants of that process (a spark-submit the test started);
    ``spark_submit_only``: only spark-submit itself (its JVM or script), not the Python driver;
    ``drivers_only``: only the Python driver (it appears once the JVM is up and starts the job).
    Oldest first: spark-submit's script briefly forks a subshell and a launcher JVM with the same
    command line, so the first is the spark-submit that lives as long as the job.
    """
    import psutil

    try:
        candidates = psutil.Process(under).children(recursive=True) if under else psutil.process_iter()
    except psutil.NoSuchProcess:
        return []
    found = []
    for process in candidates:
        try:
            cmdline = " ".join(process.cmdline())
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
        if "org.apache.spark.launcher.Main" in cmdline:
            continue  # spark-class's command builder: gone within a second
        if marker not in cmdline:
            continue
        submit = "SparkSubmit" in cmdline or "spark-submit" in cmdline
        if (spark_submit_only and not submit) or (drivers_only and (submit or "python" not in process.name().lower())):
            continue
        found.append(process)
    return sorted(found, key=_created)


def _created(process) -> float:
    import psutil

    try:
        return process.create_time()
    except psutil.Error:
        return float("inf")


def assert_lean_digest_matches(hook, name: str):
    """The lean metadata reading (what expire and clean decide from) says what PyIceberg's full
    model says about the table: the same history, refs, retention, figures and location; and it
    was read directly, not through the full model. Returns the digest."""
    from airflow_lake_provider.core.identifiers import TableIdentifier
    from airflow_lake_provider.core.history import history_from_table
    from airflow_lake_provider.core.snapshots import table_state
    from airflow_lake_provider.hooks.lake import _read_digest_directly

    table = hook.load_table(name)
    assert _read_digest_directly(hook.catalog, hook.config.kind, TableIdentifier.parse(name)) is not None, (
        f"the {hook.config.kind} catalog's metadata was not read directly")
    digest = hook.read_table_digest(name)
    assert digest.history() == history_from_table(table)
    assert digest.state() == table_state(table)
    assert (digest.location, digest.metadata_location) == (table.location(), table.metadata_location)
    return digest


def append_without_partition_columns(spark, table, name: str, data, partition: list[tuple[str, Any]]) -> None:
    """Append ``data`` to the table ``name`` (catalog ``lake``) as one Parquet file that leaves out its
    identity-partition columns, committed through Iceberg's Java API with their values: ``partition``
    holds (column, value) in the spec's order. How tables migrated from Hive, or built with
    ``add_files``, hold them: Iceberg's readers fill the columns from the partition metadata (PyIceberg
    only optional ones). The file carries Iceberg's field IDs."""
    import datetime as dt
    import uuid

    import pyarrow as pa
    import pyarrow.parquet as pq

    from airflow_lake_provider.jobs import iceberg

    ids = {field.name: field.field_id for field in table.schema().fields}
    left_out = {column for column, _ in partition}
    kept = [field for field in data.schema if field.name not in left_out]
    schema = pa.schema([field.with_metadata({b"PARQUET:field_id": str(ids[field.name]).encode()}) for field in kept])
    path = f"{local_path(table.location())}/data/imported-{uuid.uuid4().hex}.parquet"
    os.makedirs(os.path.dirname(path), exist_ok=True)
    pq.write_table(pa.Table.from_arrays([data.column(f.name) for f in kept], schema=schema), path)
    jtable = iceberg.load_table(spark, "lake", name)

    def java(class_name: str):
        return iceberg.java_class(jtable, class_name)

    values = java("java.util.ArrayList")()
    for _, value in partition:
        values.add(None if value is None else value.isoformat() if isinstance(value, dt.date) else str(value))
    metrics = java("org.apache.iceberg.parquet.ParquetUtil").fileMetrics(
        jtable.io().newInputFile(f"file:{path}"), java("org.apache.iceberg.MetricsConfig").forTable(jtable))
    data_file = (java("org.apache.iceberg.DataFiles").builder(jtable.spec()).withPath(f"file:{path}")
                 .withFormat(java("org.apache.iceberg.FileFormat").PARQUET).withFileSizeInBytes(os.path.getsize(path))
                 .withPartitionValues(values).withMetrics(metrics).build())
    jtable.newAppend().appendFile(data_file).commit()
