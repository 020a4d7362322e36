"""What a user checks on a table: rows, a checksum, files, snapshots. Shared by the tests."""

from __future__ import annotations

import hashlib


def rows_fingerprint(rows: list[dict]) -> tuple[int, str]:
    """Row count and a checksum of ``rows`` that ignores their order, so any engine's read compares."""
    digest = hashlib.sha256()
    for text in sorted(repr(sorted(row.items())) for row in rows):
        digest.update(text.encode())
    return len(rows), digest.hexdigest()


def table_fingerprint(table) -> tuple[int, str]:
    """Row count and a checksum of every visible row, read through PyIceberg."""
    return rows_fingerprint(table.scan().to_arrow().to_pylist())


def spark_fingerprint(spark, table: str) -> tuple[int, str]:
    """Row count and checksum of every visible row of ``catalog.namespace.table``, read by Spark.

    Equal to :func:`table_fingerprint` for the same rows (Spark and PyIceberg hand back the same
    Python values), and the only reader for tables with equality deletes, which PyIceberg refuses.
    """
    return rows_fingerprint([row.asDict() for row in spark.table(table).collect()])


def live_files(table) -> dict[str, int]:
    """Live data and delete files of the current snapshot, from its manifests."""
    counts = {"DATA": 0, "POSITION_DELETES": 0, "EQUALITY_DELETES": 0}
    snapshot = table.current_snapshot()
    if snapshot is None:
        return counts
    for manifest in snapshot.manifests(table.io):
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
            counts[entry.data_file.content.name] += 1
    return counts


def live_deletion_vectors(table) -> int:
    """Live deletion vectors (format v3: position deletes stored as Puffin blobs) of the current snapshot."""
    snapshot = table.current_snapshot()
    if snapshot is None:
        return 0
    return sum(
        1
        for manifest in snapshot.manifests(table.io)
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True)
        if entry.data_file.content.name == "POSITION_DELETES" and entry.data_file.file_format.name == "PUFFIN"
    )


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
