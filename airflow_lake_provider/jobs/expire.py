"""Expire exactly the snapshot IDs resolved upstream, deleting the files only they held.

Args: :class:`~airflow_lake_provider.core.contracts.ExpireJobArgs` (the IDs resolved in the
Airflow worker from metadata, the refs they were resolved on, the refs past their
``max-ref-age-ms``, which Iceberg's ``RemoveSnapshots`` removes in the same commit whatever it is
asked to expire); result: :class:`~airflow_lake_provider.core.contracts.ExpiryOutcome`. Iceberg's
own age rule is switched off (``expireOlderThan(0)``) so no snapshot beyond the named IDs goes;
the IDs are checked again here against fresh metadata, because the table may have moved since
they were resolved.

Who expires: Iceberg's own ``ExpireSnapshots`` in the driver's JVM (:func:`expire_in_driver`), with
no Spark application: the commit Iceberg's Spark action makes and the files Iceberg's reachable
cleanup finds, reading the expired snapshots' manifests on the driver's threads. Only a large table
on a cluster (``core/engines.py``'s ``SPARK_ACTION_MIN_FILES``) takes the Spark action, which
reads the manifests on the executors.
"""

from __future__ import annotations

from typing import Any

from airflow_lake_provider.core.contracts import DELETED_FILE_KINDS, ExpireJobArgs, ExpiryOutcome
from airflow_lake_provider.core.expiry_recheck import ref_heads, still_to_expire
from airflow_lake_provider.core.table_digest import TableDigest
from airflow_lake_provider.jobs import iceberg
from airflow_lake_provider.jobs.iceberg import java_class

_KIND_OF_DELETE_CONTENT = {1: "position_delete_files", 2: "equality_delete_files"}


def expire_snapshot_ids(spark, jtable, args: ExpireJobArgs) -> ExpiryOutcome:
    """Expire ``args.snapshot_ids`` (after :func:`still_to_expire` re-checked them on fresh metadata)
    and count deleted files. ``args.removed_refs`` go in the same commit."""
    removed_refs = args.removed_refs
    digest = iceberg.table_digest(jtable)
    heads = ref_heads(digest)
    todo = still_to_expire(digest, args)
    counts, expired_by = dict.fromkeys(DELETED_FILE_KINDS, 0), None
    if todo or removed_refs:
        # With no ID named, Iceberg still removes the refs past their max-ref-age-ms, and nothing else.
        if iceberg.needs_the_spark_action(spark, jtable):
            expired_by, counts = "spark_action", expire_with_spark_action(spark, jtable, todo)
        else:
            expired_by, counts = "driver", expire_in_driver(jtable, todo, digest)
    after = iceberg.table_digest(jtable)
    return ExpiryOutcome(
        expired_snapshot_ids=sorted(todo),
        already_gone_snapshot_ids=sorted(set(args.snapshot_ids) - set(todo)),
        removed_refs=sorted(set(heads) - set(ref_heads(after))),
        deleted_files=counts,
        snapshot_id_after=after.current_snapshot_id,
        expired_by=expired_by,
    )


def _remove_snapshots(expire, todo: list[int]):
    """Iceberg's expiry of ``todo`` alone: its age rule off, its count rule at its minimum."""
    expire = expire.expireOlderThan(0).retainLast(1)
    # One round trip per ID (about 0.8 s per 10,000): the procedure's snapshot_ids array would
    # loop in the JVM, but Spark takes longer to parse a 10,000-element literal (about 2 s).
    for sid in todo:
        expire = expire.expireSnapshotId(sid)
    return expire


def expire_with_spark_action(spark, jtable, todo: list[int]) -> dict[str, int]:
    result = _remove_snapshots(iceberg.actions(spark).expireSnapshots(jtable), todo).execute()
    return {
        "data_files": int(result.deletedDataFilesCount()),
        "position_delete_files": int(result.deletedPositionDeleteFilesCount()),
        "equality_delete_files": int(result.deletedEqualityDeleteFilesCount()),
        "manifests": int(result.deletedManifestsCount()),
        "manifest_lists": int(result.deletedManifestListsCount()),
        "statistics_files": int(result.deletedStatisticsFilesCount()),
    }


def expire_in_driver(jtable, todo: list[int], before: TableDigest) -> dict[str, int]:
    """Iceberg's ``RemoveSnapshots`` in this JVM: its commit, and the files its cleanup picks.

    ``before`` is the digest of the table's current metadata, read just before. The cleanup is given a
    delete function that records (:func:`iceberg.recorder`), so the files can be counted by kind, as the
    Spark action reports them, before they are deleted through the table's FileIO, in bulk where it can.
    Iceberg deletes after its commit too, and logs a file it cannot delete; a later clean takes such a
    file as an orphan.
    """
    old_metadata = jtable.operations().current()
    kept = iceberg.recorder(jtable)
    _remove_snapshots(jtable.expireSnapshots(), todo).deleteWith(kept).commit()
    jtable.refresh()
    by_kind = _kinds(jtable, old_metadata, before, iceberg.recorded(jtable, kept))
    return {kind: _delete(jtable, files) for kind, files in by_kind.items()}


def _kinds(jtable, old_metadata, before: TableDigest, paths: list[str]) -> dict[str, list[str]]:
    """The cleanup's ``paths`` by kind: manifest lists and statistics files from the metadata before
    and after, manifests from the manifest lists of the expired snapshots, delete files (by their
    content) from the delete manifests that go."""
    util = java_class(jtable, "org.apache.iceberg.ReachableFileUtil")
    old = java_class(jtable, "org.apache.iceberg.BaseTable")(
        java_class(jtable, "org.apache.iceberg.StaticTableOperations")(old_metadata, jtable.io()), str(jtable.name()))
    manifest_lists = set(iceberg.strings(util.manifestListLocations(old))) - set(
        iceberg.strings(util.manifestListLocations(jtable)))
    statistics = set(iceberg.strings(util.statisticsFilesLocations(old))) - set(
        iceberg.strings(util.statisticsFilesLocations(jtable)))
    by_kind: dict[str, list[str]] = {kind: [] for kind in DELETED_FILE_KINDS}
    manifests: set[str] = set()
    delete_kinds: dict[str, str] = {}
    if any(path not in manifest_lists and path not in statistics for path in paths):
        # Manifests or content files went too (often only manifest lists go: appends carry their manifests on).
        kept = {s.snapshot_id for s in iceberg.metadata_digest(jtable.operations().current()).snapshots}
        expired = [old_metadata.snapshot(s.snapshot_id) for s in before.snapshots if s.snapshot_id not in kept]
        listed = iceberg.with_paths(jtable, iceberg.manifests_of(jtable, expired))
        manifests = {path for path, _, _ in listed}
        deleted = set(paths)
        delete_kinds = _delete_file_kinds(jtable, [manifest for path, content, manifest in listed
                                                   if content != iceberg.DATA_MANIFEST and path in deleted])
    for path in paths:
        if path in manifest_lists:
            by_kind["manifest_lists"].append(path)
        elif path in statistics:
            by_kind["statistics_files"].append(path)
        elif path in manifests:
            by_kind["manifests"].append(path)
        else:
            by_kind[delete_kinds.get(path, "data_files")].append(path)
    return by_kind


def _delete_file_kinds(jtable, manifests: list[Any]) -> dict[str, str]:
    """path -> kind of the live delete files of the delete ``manifests``."""
    return {str(delete_file.location()): _KIND_OF_DELETE_CONTENT[int(delete_file.content().id())]
            for delete_file in iceberg.delete_files_of(jtable, manifests)}


def _delete(jtable, paths: list[str]) -> int:
    """Delete ``paths`` through the table's FileIO (one bulk call where it has one); how many went. As
    Iceberg's cleanup, a failure is not raised (the expiry is committed): the files left are a later
    clean's orphans."""
    if not paths:
        return 0
    io = jtable.io()
    if iceberg.implements(io, "org.apache.iceberg.io.SupportsBulkOperations"):
        splitter = java_class(jtable, "org.apache.iceberg.relocated.com.google.common.base.Splitter")
        files = splitter.on("\u0000").splitToList("\u0000".join(paths))  # a Java list in one round trip
        try:
            io.deleteFiles(files)
        except Exception as error:  # noqa: BLE001 - see above
            java = getattr(error, "java_exception", None)
            bulk_failure = "org.apache.iceberg.io.BulkDeletionFailureException"
            if java is not None and str(java.getClass().getName()) == bulk_failure:
                return len(paths) - int(java.numberFailedObjects())
            return 0  # which went is unknown: none is counted
        return len(paths)
    deleted = 0
    for path in paths:
        try:
            io.deleteFile(path)
            deleted += 1
        except Exception:  # noqa: BLE001 - see above
            pass
    return deleted


def run(spark, catalog: str, raw_args: dict[str, Any]) -> dict[str, Any]:
    args = ExpireJobArgs.from_json(raw_args).validate()
    return expire_snapshot_ids(spark, iceberg.load_table(spark, catalog, args.table), args).to_json()
