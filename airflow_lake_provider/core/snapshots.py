"""Snapshot lineage questions answered from PyIceberg metadata (no JVM).

The one owner of "walking a snapshot's ancestry": PyIceberg tables are walked with PyIceberg's
own ``ancestors_of`` (:func:`ancestry`, :func:`main_ancestry`, :func:`parent_of`); histories held
as plain values (:mod:`airflow_lake_provider.core.history`) walk with :func:`walk_lineage`.
PyIceberg is imported only inside functions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from itertools import islice
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from airflow_lake_provider.exceptions import LakeSnapshotError

if TYPE_CHECKING:
    from pyiceberg.table import Table
    from pyiceberg.table.snapshots import Snapshot


class _HasSnapshotId(Protocol):
    @property
    def snapshot_id(self) -> int: ...


S = TypeVar("S", bound=_HasSnapshotId)


def walk_lineage(snapshot: S | None, parent: Callable[[S], S | None]) -> Iterator[S]:
    """``snapshot`` and its ancestors, newest first, while ``parent`` finds the next one.

    For histories of plain values (anything with a ``snapshot_id``): ``parent`` returns ``None``
    for a root or for a parent no longer in the table (expired). A snapshot ID met twice
    (corrupt metadata) ends the walk.
    """
    seen: set[int] = set()
    while snapshot is not None and snapshot.snapshot_id not in seen:
        seen.add(snapshot.snapshot_id)
        yield snapshot
        snapshot = parent(snapshot)


def ancestry(table: Table, snapshot: Snapshot | None = None) -> Iterator[Snapshot]:
    """``snapshot`` (default: the current one) and its ancestors in ``table``, newest first.

    PyIceberg's ``ancestors_of``: stops at a root or at the first parent already expired.
    """
    from pyiceberg.table.snapshots import ancestors_of

    return iter(ancestors_of(table.current_snapshot() if snapshot is None else snapshot, table.metadata))


def main_ancestry(table: Table) -> list[Snapshot]:
    """Snapshots of main, newest first (current, parent, grandparent...)."""
    return list(ancestry(table))


def parent_of(table: Table, snapshot: Snapshot | None) -> Snapshot | None:
    """The parent of ``snapshot`` in ``table``; ``None`` for a root or an expired parent."""
    if snapshot is None:
        return None
    return next(islice(ancestry(table, snapshot), 1, None), None)


def require_in_lineage(table: Table, snapshot_id: int, *, table_name: str, role: str = "planned") -> None:
    """Fail unless ``snapshot_id`` is the current snapshot of main or one of its ancestors."""
    current = table.current_snapshot()
    current_id = current.snapshot_id if current else None
    if snapshot_id == current_id:
        return
    if table.snapshot_by_id(snapshot_id) is None:
        raise LakeSnapshotError(
            f"The {role} snapshot {snapshot_id} is not in the history of {table_name} (current snapshot: "
            f"{current_id}): it was expired, or it belongs to another table. Plan again on the current snapshot."
        )
    if snapshot_id not in {s.snapshot_id for s in main_ancestry(table)}:
        raise LakeSnapshotError(
            f"The {role} snapshot {snapshot_id} of {table_name} is no longer an ancestor of the current snapshot "
            f"{current_id}: the table was rolled back or replaced since. Plan again on the current snapshot."
        )


def commits_tagged(table: Table, properties: dict[str, str], *, after: int | None = None) -> list[Snapshot]:
    """Main-line snapshots (oldest first) whose summary carries all ``properties``, newer than ``after``.

    No ``properties`` (a step run outside Airflow, with no run to tag its commits): none, since no
    commit can be told to be this run's."""
    if not properties:
        return []
    found = []
    for snapshot in main_ancestry(table):
        if after is not None and snapshot.snapshot_id == after:
            break
        summary = snapshot.summary
        if summary is not None and all(summary.get(k) == v for k, v in properties.items()):
            found.append(snapshot)
    return list(reversed(found))


def summary_int(snapshot: Snapshot | None, key: str) -> int:
    """A count from a snapshot's summary (``total-data-files``, ``added-data-files``...); 0 when absent."""
    return summary_total(snapshot.summary if snapshot is not None else None, key)


def counts_no_delete_files(summary: Any) -> bool:
    """Whether a snapshot's summary says it holds no delete file. A summary without the total (a writer
    that keeps none) may hide some: only an explicit "0" counts."""
    return summary is not None and summary.get("total-delete-files") == "0"


def summary_total(summary: Any, key: str) -> int:
    """A count from a summary (a PyIceberg ``Summary`` or a plain mapping); 0 when absent."""
    return int((summary.get(key) if summary is not None else None) or 0)


def has_equality_deletes(table: Table, snapshot: Snapshot | None = None) -> bool:
    """Whether ``snapshot`` (default: the current one) holds live equality delete files.

    From the summary's ``total-equality-deletes`` when the writer kept it; otherwise from the
    entries of the delete manifests only (a table without deletes has none to open). PyIceberg
    cannot plan or read such a snapshot; Iceberg's Java planner (Spark) can.
    """
    snapshot = table.current_snapshot() if snapshot is None else snapshot
    if snapshot is None:
        return False
    total = snapshot.summary.get("total-equality-deletes") if snapshot.summary is not None else None
    if total is not None:
        return int(total) > 0
    from pyiceberg.manifest import DataFileContent, ManifestContent

    return any(
        entry.data_file.content == DataFileContent.EQUALITY_DELETES
        for manifest in snapshot.manifests(table.io) if manifest.content == ManifestContent.DELETES
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True)
    )


def table_state(table: Table) -> dict[str, Any]:
    """Headline figures of the current snapshot, from its summary totals (no manifest is read)."""
    current = table.current_snapshot()
    return state_of(current.snapshot_id if current is not None else None,
                    current.summary if current is not None else None, len(table.snapshots()))


def state_of(snapshot_id: int | None, summary: Any, snapshot_count: int) -> dict[str, Any]:
    """The headline figures from a current snapshot's ID and summary (a PyIceberg ``Summary`` or a
    plain mapping) and the number of snapshots: one reading for every way a table is loaded."""
    return {
        "snapshot_id": snapshot_id,
        "data_files": summary_total(summary, "total-data-files"),
        "delete_files": summary_total(summary, "total-delete-files"),
        "bytes": summary_total(summary, "total-files-size"),
        "records": summary_total(summary, "total-records"),
        "snapshots": snapshot_count,
    }


def describe_change(table_name: str, before: dict[str, Any], after: dict[str, Any], done: str) -> str:
    """One line for the end of a task's log: what the step did, and the table before -> after."""

    def change(key: str) -> str:
        return f"{before[key]:,}" if before[key] == after[key] else f"{before[key]:,} -> {after[key]:,}"

    return (
        f"Summary for {table_name}: {done}. Data files {change('data_files')}, delete files "
        f"{change('delete_files')}, bytes {change('bytes')}, snapshots {change('snapshots')}; "
        f"current snapshot {before['snapshot_id']}" + ("" if before["snapshot_id"] == after["snapshot_id"]
                                                       else f" -> {after['snapshot_id']}") + "."
    )
