"""What a user checks on a table: rows, a checksum, files, snapshots. Shared by the tests."""

from __future__ import annotations

import hashlib
from pathlib import Path
from urllib.parse import urlsplit


def table_fingerprint(table) -> tuple[int, str]:
    """Row count and a checksum of every visible row (order-independent), read through PyIceberg."""
    rows = table.scan().to_arrow().sort_by("event_id").to_pylist()
    digest = hashlib.sha256()
    for row in rows:
        digest.update(repr(sorted(row.items())).encode())
    return len(rows), digest.hexdigest()


def _is_checksum(path: Path) -> bool:
    """Hadoop's local file system writes ``.NAME.crc`` beside each file and deletes it with the file."""
    return path.name.startswith(".") and path.name.endswith(".crc")


def files_on_disk(table) -> set[str]:
    """Files under the table location (Hadoop's checksum side files left out)."""
    root = Path(urlsplit(table.location()).path)
    return {str(p) for p in root.rglob("*") if p.is_file() and not _is_checksum(p)}


def live_file_paths(table) -> dict[str, set[str]]:
    """Paths of the current snapshot's live files by content (DATA, POSITION_DELETES, EQUALITY_DELETES)."""
    paths: dict[str, set[str]] = {"DATA": set(), "POSITION_DELETES": set(), "EQUALITY_DELETES": set()}
    snapshot = table.current_snapshot()
    for manifest in snapshot.manifests(table.io) if snapshot is not None else ():
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
            paths[entry.data_file.content.name].add(urlsplit(entry.data_file.file_path).path)
    return paths


def live_files(table) -> dict[str, int]:
    """Live data and delete files of the current snapshot, from its manifests."""
    return {content: len(paths) for content, paths in live_file_paths(table).items()}


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
