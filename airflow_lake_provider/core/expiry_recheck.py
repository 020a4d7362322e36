"""The last check before snapshots are expired, against the table's metadata as it is now.

The IDs to expire were decided in the Airflow worker from metadata read earlier; writers, a
person or another tool may have moved the table since. Whoever expires them (the Spark job, or the
worker itself with ``engine="pyiceberg"``) re-reads the metadata and asks this module which of the
IDs may still go. A tag or branch created, moved or dropped since means the decision may keep too
little, so nothing is expired; main moving on is normal (writers commit) and only the current
snapshot is then checked.
"""

from __future__ import annotations

from airflow_lake_provider.core.contracts import ExpireJobArgs
from airflow_lake_provider.core.history import MAIN_BRANCH
from airflow_lake_provider.core.table_digest import TableDigest


class UnsafeExpiry(Exception):
    """A snapshot to expire became current, referenced or protected after it was resolved."""


def ref_heads(digest: TableDigest) -> dict[str, tuple[str, int]]:
    """Every ref of the table: name -> (branch or tag, snapshot ID)."""
    return {ref.name: (ref.ref_type, ref.snapshot_id) for ref in digest.refs}


def still_to_expire(digest: TableDigest, args: ExpireJobArgs) -> list[int]:
    """The IDs of ``args.snapshot_ids`` the table still has, in order; raises :class:`UnsafeExpiry`
    when the decision is stale (a ref other than main changed) or one of them may no longer go.

    ``args.removed_refs`` go in the same commit (Iceberg's own ``max-ref-age-ms`` rule), so their
    heads are no longer held.
    """
    table_name, protected = args.table, set(args.protected_ids)
    heads = ref_heads(digest)
    now_refs = {name: sid for name, (_, sid) in heads.items() if name != MAIN_BRANCH}
    then_refs = {k: v for k, v in (args.refs or {}).items() if k != MAIN_BRANCH}
    if args.refs is not None and now_refs != then_refs:
        raise UnsafeExpiry(
            f"The tags and branches of {table_name} changed since the snapshots to expire were decided (then: "
            f"{then_refs}, now: {now_refs}); nothing was expired. Run the task again to decide anew."
        )
    held = {sid: f"{kind} {name!r}" for name, (kind, sid) in heads.items() if name not in set(args.removed_refs)}
    existing = {snapshot.snapshot_id for snapshot in digest.snapshots}
    todo = [sid for sid in args.snapshot_ids if sid in existing]
    for sid in todo:
        if sid == digest.current_snapshot_id:
            raise UnsafeExpiry(f"Snapshot {sid} is now the current snapshot of {table_name}; not expiring it.")
        if sid in held:
            raise UnsafeExpiry(f"Snapshot {sid} of {table_name} is now held by {held[sid]}; not expiring it.")
        if sid in protected:
            raise UnsafeExpiry(f"Snapshot {sid} of {table_name} is protected (pending work); not expiring it.")
    return todo
