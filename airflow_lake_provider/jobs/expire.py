"""Expire exactly the snapshot IDs resolved upstream, deleting the files only they held.

Args: :class:`~airflow_lake_provider.core.contracts.ExpireJobArgs` (the IDs resolved in the
Airflow worker from metadata, the refs they were resolved on, the refs past their
``max-ref-age-ms``, which Iceberg's ``RemoveSnapshots`` removes in the same commit whatever it is
asked to expire); result: :class:`~airflow_lake_provider.core.contracts.ExpiryOutcome`. Iceberg's
own age rule is switched off (``expireOlderThan(0)``) so no snapshot beyond the named IDs goes;
the IDs are checked again here against fresh metadata, because the table may have moved since
they were resolved.
"""

from __future__ import annotations

from typing import Any

from airflow_lake_provider.core.contracts import ExpireJobArgs, ExpiryOutcome
from airflow_lake_provider.core.table_digest import TableDigest
from airflow_lake_provider.jobs import iceberg


class UnsafeExpiry(Exception):
    """A snapshot to expire became current, referenced or protected after it was resolved."""


def ref_heads(digest: TableDigest) -> dict[str, tuple[str, int]]:
    """Every ref of the table: name -> (branch or tag, snapshot ID)."""
    return {ref.name: (ref.ref_type, ref.snapshot_id) for ref in digest.refs}


def expire_snapshot_ids(spark, jtable, args: ExpireJobArgs) -> ExpiryOutcome:
    """Expire ``args.snapshot_ids`` (after re-checking they are safe to expire) and count deleted files.

    ``args.refs`` are the refs the decision was taken on: when they changed since (a ref created,
    moved or dropped), the decision may keep too little, so nothing is done. ``args.removed_refs``
    go in the same commit (Iceberg's own ``max-ref-age-ms`` rule); their heads are no longer held.
    """
    table_name, refs, removed_refs, protected = args.table, args.refs, args.removed_refs, set(args.protected_ids)
    digest = iceberg.table_digest(spark, jtable)
    current = digest.current_snapshot_id
    heads = ref_heads(digest)
    # main moving on is normal (writers commit): only keeping more of it is then needed, and the current
    # snapshot is checked below. Any other ref created, moved or dropped means the decision is stale.
    now_refs = {name: sid for name, (_, sid) in heads.items() if name != "main"}
    then_refs = {k: v for k, v in (refs or {}).items() if k != "main"}
    if refs is not None and now_refs != then_refs:
        raise UnsafeExpiry(
            f"The tags and branches of {table_name} changed since the snapshots to expire were decided (then: "
            f"{then_refs}, now: {now_refs}); nothing was expired. Run the task again to decide anew."
        )
    held = {sid: f"{kind} {name!r}" for name, (kind, sid) in heads.items() if name not in set(removed_refs)}
    existing = {snapshot.snapshot_id for snapshot in digest.snapshots}
    todo = [sid for sid in args.snapshot_ids if sid in existing]
    for sid in todo:
        if sid == current:
            raise UnsafeExpiry(f"Snapshot {sid} is now the current snapshot of {table_name}; not expiring it.")
        if sid in held:
            raise UnsafeExpiry(f"Snapshot {sid} of {table_name} is now held by {held[sid]}; not expiring it.")
        if sid in protected:
            raise UnsafeExpiry(f"Snapshot {sid} of {table_name} is protected (pending work); not expiring it.")
    counts = {"data_files": 0, "position_delete_files": 0, "equality_delete_files": 0,
              "manifests": 0, "manifest_lists": 0, "statistics_files": 0}
    if todo or removed_refs:
        # With no ID named, the action still removes the refs past their max-ref-age-ms, and nothing else.
        action = iceberg.actions(spark).expireSnapshots(jtable).expireOlderThan(0).retainLast(1)
        # One round trip per ID (about 0.8 s per 10,000): the procedure's snapshot_ids array would
        # loop in the JVM, but Spark takes longer to parse a 10,000-element literal (about 2 s).
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
    after = iceberg.table_digest(spark, jtable)
    return ExpiryOutcome(
        expired_snapshot_ids=sorted(todo),
        already_gone_snapshot_ids=sorted(set(args.snapshot_ids) - set(todo)),
        removed_refs=sorted(set(heads) - set(ref_heads(after))),
        deleted_files=counts,
        snapshot_id_after=after.current_snapshot_id,
    )


def run(spark, catalog: str, raw_args: dict[str, Any]) -> dict[str, Any]:
    args = ExpireJobArgs.from_json(raw_args).validate()
    return expire_snapshot_ids(spark, iceberg.load_table(spark, catalog, args.table), args).to_json()
