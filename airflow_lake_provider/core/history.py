"""A table's snapshots and refs as plain values, detached from PyIceberg (pure logic).

The retention decisions are plain functions of a :class:`TableHistory`, so they can be unit-tested
(and reasoned about) on hand-built histories. Two readers build one from a real table:
:func:`history_from_table` from a PyIceberg table (PyIceberg is imported only inside it, for the
manifests), and :mod:`airflow_lake_provider.core.table_digest` from the metadata JSON read lean.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from airflow_lake_provider.core.partitions import partition_key, partition_values
from airflow_lake_provider.core.snapshots import walk_lineage
from airflow_lake_provider.core.table_retention import RetentionRule, TableRetention

__all__ = ["MAIN_BRANCH", "SnapshotInfo", "SnapshotRef", "TableHistory", "history_from_table"]

MAIN_BRANCH = "main"


@dataclass(frozen=True)
class SnapshotInfo:
    """What the policies need to know of one snapshot (nothing that needs a file read, except
    ``changed_partitions``, which only KEEP_LATEST_FILE_VERSIONS uses)."""

    snapshot_id: int
    parent_id: int | None
    timestamp_ms: int
    operation: str | None  # summary 'operation' (append, overwrite, replace, delete)
    # Partition keys (JSON strings) whose files this snapshot added or removed; "" for unpartitioned.
    changed_partitions: frozenset[str] = frozenset()


@dataclass(frozen=True)
class SnapshotRef:
    """A named reference: a branch (``main`` included) or a tag, with its own retention if set."""

    name: str
    snapshot_id: int
    ref_type: str  # "branch" or "tag"
    min_snapshots_to_keep: int | None = None  # branches only
    max_snapshot_age_ms: int | None = None  # branches only
    max_ref_age_ms: int | None = None

    def own_rule(self, name: str, fallback: RetentionRule) -> RetentionRule:
        """This ref's own setting ``name`` (Iceberg spelling) when set, else ``fallback``."""
        value = getattr(self, name.replace("-", "_"))
        return fallback if value is None else RetentionRule(name, value, f"{self.ref_type} {self.name}'s own setting")


@dataclass(frozen=True)
class TableHistory:
    """A table's snapshots, refs and retention settings, detached from PyIceberg so policies are plain functions."""

    snapshots: tuple[SnapshotInfo, ...]
    refs: tuple[SnapshotRef, ...]
    current_snapshot_id: int | None
    retention: TableRetention = field(default_factory=TableRetention)

    @cached_property
    def by_id(self) -> dict[int, SnapshotInfo]:
        """Snapshots by ID (computed once; the dataclass is frozen, so it cannot go stale)."""
        return {s.snapshot_id: s for s in self.snapshots}

    def ancestry(self, snapshot_id: int | None) -> list[SnapshotInfo]:
        """``snapshot_id`` and its ancestors, newest first, following ``parent_id`` while present.

        Stops at the first parent that is no longer in the table (already expired); an unknown
        or ``None`` start gives an empty list.
        """
        start = self.by_id.get(snapshot_id) if snapshot_id is not None else None
        return list(walk_lineage(start, self.parent))

    def parent(self, snapshot: SnapshotInfo) -> SnapshotInfo | None:
        """The parent of ``snapshot``; ``None`` for a root or a parent already expired."""
        return self.by_id.get(snapshot.parent_id) if snapshot.parent_id is not None else None

    def main_ancestry(self) -> list[SnapshotInfo]:
        """The current snapshot and its ancestors, newest first: the history readers of main see."""
        return self.ancestry(self.current_snapshot_id)

    def referenced_ids(self) -> set[int]:
        """Heads of every tag and branch (main included, i.e. the current snapshot)."""
        ids = {ref.snapshot_id for ref in self.refs}
        if self.current_snapshot_id is not None:
            ids.add(self.current_snapshot_id)
        return ids

    def refs_with_main(self) -> list[SnapshotRef]:
        """Every ref, main first; a table with a current snapshot but no main ref (old v1 metadata) gets one."""
        refs = sorted(self.refs, key=lambda r: (r.name != MAIN_BRANCH, r.ref_type != "branch", r.name))
        if self.current_snapshot_id is not None and not any(r.name == MAIN_BRANCH for r in refs):
            refs.insert(0, SnapshotRef(MAIN_BRANCH, self.current_snapshot_id, "branch"))
        return refs

    def describe(self, snapshot_id: int) -> str:
        """How errors name a snapshot: with the current one, so a reader sees which table state was meant."""
        return f"snapshot {snapshot_id} (current snapshot: {self.current_snapshot_id})"


def history_from_table(table: Any, *, with_changed_partitions: bool = False) -> TableHistory:
    """A :class:`TableHistory` from a PyIceberg table's metadata, refs' retention and ``history.expire.*`` properties.

    Without ``with_changed_partitions`` only table metadata is read (cheap, no file I/O). With it,
    each snapshot's own manifests are read (those it added), and the partitions of the data and
    delete files it ADDED or DELETED are collected: that is what "a version of a partition" means
    for KEEP_LATEST_FILE_VERSIONS. EXISTING entries (carried over when manifests are merged) and
    entries of older snapshots are skipped, so each change is counted once, on its own snapshot.
    """
    metadata = table.metadata
    specs = metadata.specs()
    snapshots = []
    for snapshot in metadata.snapshots:
        summary = snapshot.summary
        operation = getattr(getattr(summary, "operation", None), "value", None) if summary is not None else None
        changed = _changed_partitions(table, snapshot, specs) if with_changed_partitions else frozenset()
        snapshots.append(
            SnapshotInfo(
                snapshot_id=snapshot.snapshot_id,
                parent_id=snapshot.parent_snapshot_id,
                timestamp_ms=snapshot.timestamp_ms,
                operation=operation,
                changed_partitions=changed,
            )
        )
    refs = tuple(
        SnapshotRef(
            name, ref.snapshot_id, getattr(ref.snapshot_ref_type, "value", str(ref.snapshot_ref_type)),
            min_snapshots_to_keep=ref.min_snapshots_to_keep, max_snapshot_age_ms=ref.max_snapshot_age_ms,
            max_ref_age_ms=ref.max_ref_age_ms,
        )
        for name, ref in sorted(metadata.refs.items())
    )
    return TableHistory(snapshots=tuple(snapshots), refs=refs, current_snapshot_id=metadata.current_snapshot_id,
                        retention=TableRetention.from_properties(dict(metadata.properties)))


def _changed_partitions(table: Any, snapshot: Any, specs: Mapping[int, Any]) -> frozenset[str]:
    """Partition keys of the files ``snapshot`` added or removed (data and delete files alike)."""
    from pyiceberg.manifest import (
        ManifestEntryStatus,  # only here: the rest of the module is pure
    )

    changed: set[str] = set()
    for manifest in snapshot.manifests(table.io):
        if manifest.added_snapshot_id != snapshot.snapshot_id:
            continue  # written by an earlier snapshot: its changes belong there
        spec = specs[manifest.partition_spec_id]
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=False):
            if entry.status not in (ManifestEntryStatus.ADDED, ManifestEntryStatus.DELETED):
                continue
            if entry.snapshot_id is not None and entry.snapshot_id != snapshot.snapshot_id:
                continue
            changed.add(_partition_key(spec, entry.data_file.partition))
    return frozenset(changed)


def _partition_key(spec: Any, partition: Any) -> str:
    """The partition's key by spec field name (stable across specs); "" when unpartitioned."""
    if not spec.fields:
        return ""
    return partition_key(partition_values((f.name for f in spec.fields), partition))
