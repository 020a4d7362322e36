"""Expire snapshots in the Airflow worker through PyIceberg (the expire step's ``engine="pyiceberg"``).

Why: on a small table, Iceberg's Spark action is a Spark application (12-40 s on 2 cores) to make
one metadata commit and delete a few files. Here the same work is one catalog commit and a few
deletes through the table's own FileIO (its credentials, its endpoint).

What goes is what Iceberg's ``ExpireSnapshotsSparkAction`` deletes: every file reachable from the
table's snapshots before the commit and from none after it (manifest lists, manifests, the live
data and delete files the manifests list, statistics files), after the commit succeeded. The old
metadata JSON files stay, as they do after Iceberg's action. The commit asserts every ref at the
head this worker checked (:func:`~airflow_lake_provider.core.expiry_recheck.still_to_expire`), so a
writer committing meanwhile makes it try again on fresh metadata instead of expiring on stale.

Where the worker cannot be sure, it leaves the table to the Spark job (:func:`worker_refusal`):
tables on object storage (PyArrow's S3 file system leaves directory markers where it deletes),
format v3 tables (the worker writes the metadata file for non-REST catalogs and does not carry
row lineage), ``gc.enabled=false`` (Iceberg refuses and says why), partition statistics on a
snapshot to expire (PyIceberg's commit does not drop them). One difference in the metadata, not in
any file: PyIceberg clears the parent ID of a snapshot whose parent it expired, where Java keeps
the dangling ID; history walks stop at the same snapshot either way.
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from airflow_lake_provider.core.contracts import DELETED_FILE_KINDS, ExpireJobArgs, ExpiryOutcome
from airflow_lake_provider.core.expiry_recheck import still_to_expire
from airflow_lake_provider.core.table_digest import digest_of_table

if TYPE_CHECKING:
    from pyiceberg.io import FileIO
    from pyiceberg.manifest import ManifestFile
    from pyiceberg.table import Table
    from pyiceberg.table.metadata import TableMetadata
    from pyiceberg.table.update import TableRequirement, TableUpdate

#: ``engine="auto"`` leaves a table with this many snapshots to Spark, for the worker's memory: it
#: holds every snapshot's manifest list. Measured (``benchmarks/expire_clean.py``, one-file appends, 2
#: cores): 10,000 snapshots in 48 s (the Spark task 119 s) at +243 MB over the task's baseline
#: (docs/benchmarks.md); 1,000 (``--quick``) in 3.8 s (Spark 33 s) at +15 MB.
AUTO_SPARK_MIN_SNAPSHOTS = 2_000
#: ... and one whose manifests hold this many entries: the worker reads every manifest of every
#: snapshot (the plan's basis, docs/benchmarks.md: about 0.07 s and 3.3 MB per 1,000 entries).
AUTO_SPARK_MIN_MANIFEST_ENTRIES = 200_000
#: ... and one whose manifest lists hold this many entries together: the worker decodes every list (in
#: Python), which the job's driver does in a few seconds whatever the history. Measured on the whole-run
#: benchmark's table (982 snapshots, lists of 1,000-2,000 manifests with partition summaries): 32 s in the
#: worker, about 20 us per entry; the expire job there took 4.3 s, JVM start included. The worker stops
#: reading at this many and leaves the table to the job.
AUTO_SPARK_MIN_LIST_ENTRIES = 100_000
#: Commits tried before the worker gives up (writers kept committing between its reads and commits).
COMMIT_ATTEMPTS = 3
_THREADS = 8

_KIND_OF_CONTENT = {0: "data_files", 1: "position_delete_files", 2: "equality_delete_files"}


def worker_refusal(metadata: TableMetadata, snapshot_ids: Iterable[int]) -> str | None:
    """Why the worker must leave this expiry to Iceberg's Spark job, or ``None``."""
    scheme = urlsplit(metadata.location).scheme
    if scheme not in ("", "file"):
        # Measured on S3 (SeaweedFS): PyArrow's S3 file system recreates a prefix's directory marker
        # when it deletes the prefix's last object, which Iceberg's orphan listing then reports.
        return (f"a table on {scheme}:// (deleting through PyArrow's file system there leaves directory markers "
                "behind; Iceberg's FileIO in the job deletes cleanly)")
    if metadata.format_version >= 3:
        return f"format v{metadata.format_version} (the worker's metadata commit does not carry row lineage)"
    if metadata.properties.get("gc.enabled", "true").strip().lower() == "false":
        return "gc.enabled=false (Iceberg refuses to delete this table's files, and its job says why)"
    expiring = set(snapshot_ids)
    if any(stats.snapshot_id in expiring for stats in metadata.partition_statistics):
        return "partition statistics on a snapshot to expire (PyIceberg's commit does not drop them)"
    return None


class ListsTooLong(Exception):
    """The manifest lists read so far hold more entries than the worker reads (the count, at least)."""


class ReachableFiles:
    """The files a table's snapshots reach, reading each manifest list and manifest once."""

    def __init__(self, io: FileIO) -> None:
        self.io = io
        self._lists: dict[str, list[ManifestFile]] = {}
        self._entries: dict[str, list[tuple[str, str]]] = {}

    def manifests(self, metadata: TableMetadata, *, max_list_entries: int | None = None) -> dict[str, ManifestFile]:
        """Every manifest of every snapshot of ``metadata``, by path. With ``max_list_entries``, raises
        :class:`ListsTooLong` as soon as the lists read hold more entries than that together."""
        todo = [s for s in metadata.snapshots if s.manifest_list not in self._lists]
        step = 4 * _THREADS  # lists read between two looks at the total
        with ThreadPoolExecutor(_THREADS) as pool:
            for start in range(0, len(todo), step):
                chunk = todo[start:start + step]
                for snapshot, manifests in zip(chunk, pool.map(lambda s: s.manifests(self.io), chunk), strict=True):
                    self._lists[snapshot.manifest_list] = manifests
                read = sum(len(manifests) for manifests in self._lists.values())
                if max_list_entries is not None and read > max_list_entries:
                    raise ListsTooLong(read)
        return {m.manifest_path: m for s in metadata.snapshots for m in self._lists[s.manifest_list]}

    def files(self, metadata: TableMetadata) -> dict[str, set[str]]:
        """Kind (as :data:`DELETED_FILE_KINDS`) -> the paths ``metadata``'s snapshots reach."""
        manifests = self.manifests(metadata)
        todo = [m for path, m in manifests.items() if path not in self._entries]
        with ThreadPoolExecutor(_THREADS) as pool:
            for manifest, entries in zip(todo, pool.map(self._live_files, todo), strict=True):
                self._entries[manifest.manifest_path] = entries
        reached: dict[str, set[str]] = {kind: set() for kind in DELETED_FILE_KINDS}
        reached["manifest_lists"] = {s.manifest_list for s in metadata.snapshots}
        reached["manifests"] = set(manifests)
        for path in manifests:
            for kind, file_path in self._entries[path]:
                reached[kind].add(file_path)
        reached["statistics_files"] = ({s.statistics_path for s in metadata.statistics}
                                       | {s.statistics_path for s in metadata.partition_statistics})
        return reached

    def _live_files(self, manifest: ManifestFile) -> list[tuple[str, str]]:
        # Live entries only (added, existing), as Iceberg's ReadManifest: a file a manifest lists as
        # deleted is reached through an older snapshot's manifest, if any keeps it.
        return [(_KIND_OF_CONTENT[int(entry.data_file.content)], entry.data_file.file_path)
                for entry in manifest.fetch_manifest_entry(self.io, discard_deleted=True)]


def manifest_entries(manifests: Iterable[ManifestFile]) -> int | None:
    """The entries the manifests hold, from the manifest list's counts (``None``: a v1 list without them)."""
    total = 0
    for m in manifests:
        counts = (m.added_files_count, m.existing_files_count, m.deleted_files_count)
        if any(c is None for c in counts):
            return None
        total += sum(c for c in counts if c is not None)
    return total


def too_large(table: Table, reachable: ReachableFiles) -> str | None:
    """Why ``engine="auto"`` takes Spark for this table's size, or ``None``."""
    snapshots = len(table.metadata.snapshots)
    if snapshots >= AUTO_SPARK_MIN_SNAPSHOTS:
        return f"{snapshots:,} snapshots (Spark from {AUTO_SPARK_MIN_SNAPSHOTS:,})"
    try:
        manifests = reachable.manifests(table.metadata, max_list_entries=AUTO_SPARK_MIN_LIST_ENTRIES)
    except ListsTooLong as too_long:
        return (f"manifest lists of over {too_long.args[0]:,} entries together "
                f"(Spark from {AUTO_SPARK_MIN_LIST_ENTRIES:,})")
    entries = manifest_entries(manifests.values())
    if entries is None:
        return "manifest lists without file counts (format v1): the worker cannot bound the work"
    if entries >= AUTO_SPARK_MIN_MANIFEST_ENTRIES:
        return f"{entries:,} manifest entries (Spark from {AUTO_SPARK_MIN_MANIFEST_ENTRIES:,})"
    return None


@dataclass(frozen=True)
class WorkerExpiry:
    """What the worker's expiry did: its outcome (``None``: writers won every commit, nothing changed),
    the errors of the commits it lost, and the files it could not delete (path, error)."""

    outcome: ExpiryOutcome | None
    lost_commits: tuple[str, ...] = ()
    not_deleted: tuple[tuple[str, str], ...] = ()


def expire_in_worker(table: Table, args: ExpireJobArgs, reachable: ReachableFiles) -> WorkerExpiry:
    """Expire ``args`` on ``table`` and delete the files only the expired snapshots reached, trying
    the commit up to :data:`COMMIT_ATTEMPTS` times (then Spark's job, which retries on its own, can
    take over). Raises :class:`~airflow_lake_provider.core.expiry_recheck.UnsafeExpiry` as the job does.

    A file that cannot be deleted is left (as Iceberg's action leaves it): a later clean takes it as
    an orphan."""
    from pyiceberg.exceptions import CommitFailedException
    from pyiceberg.table.update import (
        AssertRefSnapshotId,
        AssertTableUUID,
        RemoveSnapshotRefUpdate,
        RemoveSnapshotsUpdate,
    )

    lost: list[str] = []
    while len(lost) < COMMIT_ATTEMPTS:
        base = table.metadata
        todo = still_to_expire(digest_of_table(table), args)
        removed_refs = [name for name in args.removed_refs if name in base.refs]
        if not (todo or removed_refs):
            return WorkerExpiry(_outcome(args, todo, base, base, {}), tuple(lost))
        updates: list[TableUpdate] = [RemoveSnapshotRefUpdate(ref_name=name) for name in removed_refs]
        if todo:
            updates.append(RemoveSnapshotsUpdate(snapshot_ids=todo))
        requirements: list[TableRequirement] = [AssertTableUUID(uuid=base.table_uuid)]
        requirements += [AssertRefSnapshotId(ref=name, snapshot_id=ref.snapshot_id) for name, ref in base.refs.items()]
        try:
            committed = table.catalog.commit_table(table, tuple(requirements), tuple(updates)).metadata
        except CommitFailedException as error:
            lost.append(str(error))
            table = table.refresh()
            continue
        gone = {kind: paths - after for (kind, paths), after in
                zip(reachable.files(base).items(), reachable.files(committed).values(), strict=True)}
        counts, not_deleted = _delete(table.io, gone)
        return WorkerExpiry(_outcome(args, todo, base, committed, counts), tuple(lost), not_deleted)
    return WorkerExpiry(None, tuple(lost))


def _delete(io: FileIO, gone: dict[str, set[str]]) -> tuple[dict[str, int], tuple[tuple[str, str], ...]]:
    """Delete the files: the count deleted by kind, and those left with why."""
    work = [(kind, path) for kind, paths in gone.items() for path in sorted(paths)]

    def one(item: tuple[str, str]) -> str | None:
        try:
            io.delete(item[1])
        except Exception as error:  # noqa: BLE001 - any storage error leaves the file, as Iceberg's action does
            return f"{type(error).__name__}: {error}"
        return None

    counts = dict.fromkeys(DELETED_FILE_KINDS, 0)
    not_deleted = []
    with ThreadPoolExecutor(_THREADS) as pool:
        for (kind, path), error in zip(work, pool.map(one, work), strict=True):
            if error is None:
                counts[kind] += 1
            else:
                not_deleted.append((path, error))
    return counts, tuple(not_deleted)


def _outcome(args: ExpireJobArgs, todo: list[int], base: TableMetadata, after: TableMetadata,
             counts: dict[str, int]) -> ExpiryOutcome:
    return ExpiryOutcome(
        expired_snapshot_ids=sorted(todo),
        already_gone_snapshot_ids=sorted(set(args.snapshot_ids) - set(todo)),
        removed_refs=sorted(set(base.refs) - set(after.refs)),
        deleted_files={**dict.fromkeys(DELETED_FILE_KINDS, 0), **counts},
        snapshot_id_after=after.current_snapshot_id,
        expired_by="pyiceberg" if base is not after else None,  # the same metadata: nothing was committed
    )
