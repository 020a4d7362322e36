"""Expire exactly the snapshot IDs resolved upstream, deleting the files only they held.

Args: ``table``, ``snapshot_ids`` (resolved in the Airflow worker from metadata),
``protected_ids``, ``snapshot_properties``. Iceberg's own age rule is switched off
(``expireOlderThan(0)``) so nothing beyond the named IDs goes; the IDs are checked again here
against fresh metadata, because the table may have moved since they were resolved.
"""

from __future__ import annotations

from typing import Any

from airflow_lake_provider.jobs import iceberg


class UnsafeExpiry(Exception):
    """A snapshot to expire became current, referenced or protected after it was resolved."""


def referenced_ids(jtable) -> dict[int, str]:
    """Snapshot IDs held by a ref (tag or branch head, and every ancestor of a non-main branch)."""
    held: dict[int, str] = {}
    for name, ref in dict(jtable.refs()).items():
        kind = "branch" if ref.isBranch() else "tag"
        held.setdefault(int(ref.snapshotId()), f"{kind} {name!r}")
        if ref.isBranch() and str(name) != "main":
            snapshot = jtable.snapshot(ref.snapshotId())
            while snapshot is not None:
                held.setdefault(int(snapshot.snapshotId()), f"ancestry of branch {name!r}")
                parent = snapshot.parentId()
                snapshot = jtable.snapshot(parent) if parent is not None else None
    return held


def expire_snapshot_ids(spark, jtable, table_name: str, snapshot_ids: list[int], protected: set[int]) -> dict[str, Any]:
    """Expire ``snapshot_ids`` (after re-checking they are safe to expire) and count deleted files."""
    jtable.refresh()
    current = iceberg.current_snapshot_id(jtable)
    held = referenced_ids(jtable)
    existing = {int(s.snapshotId()) for s in jtable.snapshots()}
    todo = [sid for sid in snapshot_ids if sid in existing]
    for sid in todo:
        if sid == current:
            raise UnsafeExpiry(f"Snapshot {sid} is now the current snapshot of {table_name}; not expiring it.")
        if sid in held:
            raise UnsafeExpiry(f"Snapshot {sid} of {table_name} is now held by {held[sid]}; not expiring it.")
        if sid in protected:
            raise UnsafeExpiry(f"Snapshot {sid} of {table_name} is protected (pending work); not expiring it.")
    counts = {"data_files": 0, "position_delete_files": 0, "equality_delete_files": 0,
              "manifests": 0, "manifest_lists": 0, "statistics_files": 0}
    if todo:
        action = iceberg.actions(spark).expireSnapshots(jtable).expireOlderThan(0).retainLast(1)
        for sid in todo:
            action = action.expireSnapshotId(sid)
        result = action.execute()
        counts = {
            "data_files": int(result.deletedDataFilesCount()),
            "position_delete_files": int(result.deletedPositionDeleteFilesCount()),
            "equality_delete_files": int(result.deletedEqualityDeleteFilesCount()),
            "manifests": int(result.deletedManifestsCount()),
            "manifest_lists": int(result.deletedManifestListsCount()),
            "statistics_files": int(result.deletedStatisticsFilesCount()),
        }
    return {
        "expired_snapshot_ids": sorted(todo),
        "already_gone_snapshot_ids": sorted(set(snapshot_ids) - set(todo)),
        "deleted_files": counts,
        "snapshot_id_after": iceberg.current_snapshot_id(jtable),
    }


def run(spark, catalog: str, args: dict[str, Any]) -> dict[str, Any]:
    table_name = args["table"]
    jtable = iceberg.load_table(spark, catalog, table_name)
    outcome = expire_snapshot_ids(
        spark, jtable, table_name, [int(s) for s in args.get("snapshot_ids") or []],
        {int(s) for s in args.get("protected_ids") or []},
    )
    return {"table": table_name, **outcome}
