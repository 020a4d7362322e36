"""A table's metadata JSON read lean: what the expire and clean decisions need, nothing more.

PyIceberg's ``load_table`` turns the whole metadata file into pydantic models: every snapshot
with its manifest list and full summary, the snapshot log, every schema. On a table with 10,000
snapshots (6 MB of JSON) that costs the Airflow worker about 64 MB, and it grows with the
history. The retention decision reads four fields of each snapshot (ID, parent, time, operation),
the refs, the properties and the current snapshot's totals. :func:`read_table_digest` keeps only
those while the JSON is decoded (each snapshot object is reduced to a :class:`SnapshotInfo` as
soon as it is parsed, the snapshot log dropped), so the worker holds a few MB where PyIceberg
held tens (``benchmarks/expire_clean.py`` measures it).

Pure logic: the bytes come from :meth:`IcebergLakeHook.read_table_digest`, which knows the
catalogs; the same function parses a PyIceberg table's metadata when a catalog has no lean path,
so there is one reading of the spec's fields, not two.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_lake_provider.core.history import MAIN_BRANCH, SnapshotInfo, SnapshotRef, TableHistory
from airflow_lake_provider.core.snapshots import state_of
from airflow_lake_provider.core.table_retention import TableRetention

if TYPE_CHECKING:
    from pyiceberg.table import Table

# The summary fields anything downstream reads (table_state's totals, the operation).
_SUMMARY_KEYS = ("operation", "total-data-files", "total-delete-files", "total-files-size", "total-records")


@dataclass(frozen=True)
class TableDigest:
    """The parts of a table's metadata the retention decisions and the task's summary line read."""

    location: str
    metadata_location: str | None
    current_snapshot_id: int | None
    snapshots: tuple[SnapshotInfo, ...]
    refs: tuple[SnapshotRef, ...]
    properties: Mapping[str, str]
    current_summary: Mapping[str, str] | None
    # A REST catalog's table config (it may vend storage credentials): for opening the files, never shown.
    storage_config: Mapping[str, str] = field(default_factory=dict, repr=False)

    def history(self) -> TableHistory:
        """The :class:`TableHistory` the policies take (as ``history_from_table`` without partitions)."""
        return TableHistory(snapshots=self.snapshots, refs=self.refs, current_snapshot_id=self.current_snapshot_id,
                            retention=TableRetention.from_properties(self.properties))

    def state(self) -> dict[str, Any]:
        """Headline figures of the current snapshot, as :func:`~airflow_lake_provider.core.snapshots.table_state`."""
        return state_of(self.current_snapshot_id, self.current_summary, len(self.snapshots))


def digest_of_table(table: Table) -> TableDigest:
    """The digest of a table PyIceberg has already loaded, from the metadata file it loaded (read by the
    table's FileIO: PyIceberg 0.12 refuses to serialize format v3 metadata), or from its model when it
    has no file."""
    location = table.metadata_location
    if not location:
        return read_table_digest(table.metadata.model_dump_json())
    with table.io.new_input(location).open() as stream:
        return read_table_digest(stream.read(), metadata_location=location)


def read_table_digest(raw: bytes | str, *, metadata_location: str | None = None) -> TableDigest:
    """Parse a table metadata file (plain or gzip-compressed, as ``write.metadata.compression-codec``
    writes it) or a REST ``loadTable`` response, which wraps it, into a digest."""
    if isinstance(raw, bytes) and raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    summaries: dict[int, dict[str, str]] = {}

    def reduce(obj: dict[str, Any]) -> Any:
        # Called for every JSON object, innermost first: a snapshot's summary is reduced before the snapshot.
        if "operation" in obj:  # a snapshot summary
            return {key: obj[key] for key in _SUMMARY_KEYS if key in obj}
        if "snapshot-id" in obj and "timestamp-ms" in obj:
            if "manifest-list" in obj or "manifests" in obj or "summary" in obj:  # a snapshot
                snapshot_id = obj["snapshot-id"]
                summary = obj.get("summary") or {}
                summaries[snapshot_id] = summary
                return SnapshotInfo(snapshot_id=snapshot_id, parent_id=obj.get("parent-snapshot-id"),
                                    timestamp_ms=obj["timestamp-ms"], operation=summary.get("operation"))
            if len(obj) == 2:  # an entry of the snapshot log: not needed
                return None
        return obj

    document = json.loads(raw, object_hook=reduce)
    response = "metadata" in document and "metadata-location" in document
    metadata = document["metadata"] if response else document
    current = metadata.get("current-snapshot-id")
    current = None if current in (None, -1) else current  # format v1 writes -1 for "no snapshot"
    refs = dict(metadata.get("refs") or {})
    if current is not None and MAIN_BRANCH not in refs:  # v1 tables have no refs: main is implied (as in the spec)
        refs[MAIN_BRANCH] = {"snapshot-id": current, "type": "branch"}
    return TableDigest(
        location=metadata["location"],
        metadata_location=document["metadata-location"] if response else metadata_location,
        current_snapshot_id=current,
        snapshots=tuple(metadata.get("snapshots") or ()),
        refs=tuple(
            SnapshotRef(name, ref["snapshot-id"], ref["type"], min_snapshots_to_keep=ref.get("min-snapshots-to-keep"),
                        max_snapshot_age_ms=ref.get("max-snapshot-age-ms"), max_ref_age_ms=ref.get("max-ref-age-ms"))
            for name, ref in sorted(refs.items())
        ),
        properties=dict(metadata.get("properties") or {}),
        current_summary=summaries.get(current) if current is not None else None,
        storage_config=dict(document.get("config") or {}) if response else {},
    )
