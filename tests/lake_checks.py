"""What a user checks on a table: rows, a checksum, files, snapshots. Shared by the tests."""

from __future__ import annotations

import hashlib


def table_fingerprint(table) -> tuple[int, str]:
    """Row count and a checksum of every visible row (order-independent), read through PyIceberg."""
    rows = table.scan().to_arrow().sort_by("event_id").to_pylist()
    digest = hashlib.sha256()
    for row in rows:
        digest.update(repr(sorted(row.items())).encode())
    return len(rows), digest.hexdigest()


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


def rows_by_spark(spark, table_name: str, catalog: str = "lake") -> list[tuple]:
    """Every visible row as read by Spark (deletes of every kind applied), sorted: for tables PyIceberg cannot read."""
    return sorted(tuple(row) for row in spark.table(f"{catalog}.{table_name}").collect())


def rows_by_pyiceberg(table) -> list[tuple]:
    """Every visible row as read by PyIceberg, sorted, in the shape of :func:`rows_by_spark`."""
    return sorted(tuple(row.values()) for row in table.scan().to_arrow().to_pylist())
