"""Snapshot lineage questions answered from PyIceberg metadata (no JVM)."""

from __future__ import annotations

from typing import Any

from airflow_lake_provider.exceptions import LakeSnapshotError


def main_ancestry(table) -> list[Any]:
    """Snapshots of main, newest first (current, parent, grandparent...)."""
    found = []
    snapshot = table.current_snapshot()
    while snapshot is not None:
        found.append(snapshot)
        snapshot = table.snapshot_by_id(snapshot.parent_snapshot_id) if snapshot.parent_snapshot_id else None
    return found


def require_in_lineage(table, snapshot_id: int, *, table_name: str, role: str = "planned") -> None:
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


def commits_tagged(table, properties: dict[str, str], *, after: int | None = None) -> list[Any]:
    """Main-line snapshots (oldest first) whose summary carries all ``properties``, newer than ``after``."""
    found = []
    for snapshot in main_ancestry(table):
        if after is not None and snapshot.snapshot_id == after:
            break
        summary = snapshot.summary
        if summary is not None and all(summary.get(k) == v for k, v in properties.items()):
            found.append(snapshot)
    return list(reversed(found))
