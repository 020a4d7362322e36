"""Table health from metadata alone (PyIceberg, no JVM): what makes a table slow or costly.

The figures a maintainer looks at first: how many data files and how small, how many
delete files, how long the snapshot history is. Pure logic over PyIceberg metadata.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

DEFAULT_TARGET_FILE_SIZE = 512 * 1024 * 1024
SMALL_FILE_FRACTION = 0.75  # same default as Iceberg's min-file-size-bytes


@dataclass(frozen=True)
class TableHealth:
    table: str
    snapshot_id: int | None
    data_files: int
    data_bytes: int
    records: int
    small_files: int
    target_file_size_bytes: int
    position_delete_files: int
    equality_delete_files: int
    delete_records: int
    snapshots: int
    oldest_snapshot_ms: int | None
    partitions: int

    @property
    def average_file_bytes(self) -> int:
        return self.data_bytes // self.data_files if self.data_files else 0

    @property
    def delete_files(self) -> int:
        return self.position_delete_files + self.equality_delete_files

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "average_file_bytes": self.average_file_bytes, "delete_files": self.delete_files}


def target_file_size(properties: dict[str, str]) -> int:
    """The table's ``write.target-file-size-bytes``, or Iceberg's default of 512 MiB."""
    return int(properties.get("write.target-file-size-bytes", DEFAULT_TARGET_FILE_SIZE))


def table_health(table, *, table_name: str = "") -> TableHealth:
    """Health of a PyIceberg table's current snapshot, from its manifests only."""
    target = target_file_size(table.properties)
    small_limit = int(target * SMALL_FILE_FRACTION)
    snapshot = table.current_snapshot()
    data_files = data_bytes = records = small = pos_deletes = eq_deletes = delete_records = 0
    partitions: set[str] = set()
    if snapshot is not None:
        # Every live entry of every manifest: delete files that no longer match any data
        # file (dangling deletes) are counted too, unlike in a scan plan.
        for manifest in snapshot.manifests(table.io):
            for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
                content = entry.data_file
                kind = content.content.name
                if kind == "DATA":
                    data_files += 1
                    data_bytes += content.file_size_in_bytes
                    records += content.record_count
                    small += content.file_size_in_bytes < small_limit
                    partitions.add(repr((content.spec_id, tuple(content.partition))))
                else:
                    delete_records += content.record_count
                    if kind == "EQUALITY_DELETES":
                        eq_deletes += 1
                    else:
                        pos_deletes += 1
    snapshots = table.snapshots()
    return TableHealth(
        table=table_name or ".".join(table.name()),
        snapshot_id=snapshot.snapshot_id if snapshot else None,
        data_files=data_files,
        data_bytes=data_bytes,
        records=records,
        small_files=small,
        target_file_size_bytes=target,
        position_delete_files=pos_deletes,
        equality_delete_files=eq_deletes,
        delete_records=delete_records,
        snapshots=len(snapshots),
        oldest_snapshot_ms=min((s.timestamp_ms for s in snapshots), default=None),
        partitions=len(partitions),
    )
