"""The clean step: remove the snapshots a policy resolved, then orphan files past a floor.

Args: :class:`~airflow_lake_provider.core.contracts.CleanJobArgs` (the expiry, as for expire, and
``orphan_older_than_ms``: files newer than this are never touched); result:
:class:`~airflow_lake_provider.core.contracts.CleanJobResult`.

Orphan files are files under the table location that no metadata of any snapshot, tag or
branch references (left by failed or killed writers). :mod:`.orphan_listing` lists the candidates
as Iceberg's ``DeleteOrphanFiles`` does, in the driver's JVM without a Spark application (Iceberg's
action for a large table on a cluster); :func:`references.never_orphans` then drops
those something else still references (another table, the table's own metadata files and
statistics); only the rest is taken. A dry run stops after the listing, so its list is exactly
what a real run would take.

Taking an orphan means moving it to the table's quarantine (:mod:`.quarantine`, decisions in
:mod:`airflow_lake_provider.core.quarantine`), with a manifest, so a file wrongly taken (a
writer's in-flight file older than the floor) can be restored; ``quarantine_days=0`` deletes at
once instead. At its start the job purges the table's quarantine runs past ``quarantine_days``
(a dry run only names them).
"""

from __future__ import annotations

from typing import Any

from airflow_lake_provider.core.contracts import (
    CleanJobArgs,
    CleanJobResult,
    ExpiryOutcome,
)
from airflow_lake_provider.core.quarantine import manifest_location, quarantine_root
from airflow_lake_provider.jobs import iceberg, references
from airflow_lake_provider.jobs.expire import expire_snapshot_ids
from airflow_lake_provider.jobs.orphan_listing import orphan_candidates
from airflow_lake_provider.jobs.quarantine import Storage, no_hadoop_file_system, purge, quarantine


def run(spark, catalog: str, raw_args: dict[str, Any]) -> dict[str, Any]:
    args = CleanJobArgs.from_json(raw_args).validate()
    jtable = iceberg.load_table(spark, catalog, args.table)
    location = str(jtable.location())
    root = quarantine_root(location, args.table, args.quarantine_location)
    storage = Storage(spark)
    purged_runs, purged_files = purge(storage, root, args.quarantine_days, dry_run=args.dry_run,
                                      default_root=args.quarantine_location is None)
    if args.dry_run:
        digest = iceberg.table_digest(jtable)
        existing = {snapshot.snapshot_id for snapshot in digest.snapshots}
        expiry = ExpiryOutcome(would_expire_snapshot_ids=sorted(s for s in args.snapshot_ids if s in existing),
                               would_remove_refs=sorted(args.removed_refs),
                               snapshot_id_after=digest.current_snapshot_id)
    else:
        expiry = expire_snapshot_ids(spark, jtable, args)

    orphans: list[str] = []
    kept: dict[str, str] = {}
    manifest, listed_by = None, None
    if args.orphan_older_than_ms is not None:
        candidates, listed_by = orphan_candidates(spark, jtable, args.orphan_older_than_ms)
        kept = references.never_orphans(spark, catalog, jtable, candidates,
                                        reference_namespaces=args.reference_namespaces)
        orphans = [path for path in candidates if path not in kept]
        if args.approved_orphan_files is not None:  # an approval gate: new orphans wait for the next run
            approved = set(args.approved_orphan_files)
            orphans = [path for path in orphans if path in approved]
        if orphans and not args.dry_run:
            if args.quarantine_days == 0:
                take_orphans(jtable, orphans)
            else:
                try:
                    manifest = quarantine(storage, root=root, table=args.table, table_location=location,
                                          paths=orphans, airflow_run=args.airflow_run)
                except Exception as error:
                    if not no_hadoop_file_system(error):
                        raise
                    raise ValueError(
                        f"{len(orphans)} orphan files found, but the quarantine moves files through Hadoop's file "
                        f"system, which cannot reach {root}: this table is read through "
                        f"{jtable.io().getClass().getSimpleName()} and no S3A is configured. Set quarantine_days=0 "
                        "to delete them through the table's FileIO, or read the table through S3A (leave io-impl "
                        "out of the connection) to keep the quarantine. Nothing was moved.") from error
    listed = CleanJobResult.ORPHAN_FILES_LISTED
    return CleanJobResult(
        **expiry.to_json(),
        dry_run=args.dry_run,
        orphan_files=orphans[:listed],
        orphan_file_count=len(orphans),
        kept_referenced=dict(sorted(kept.items())[:listed]),
        kept_referenced_count=len(kept),
        quarantine_run=manifest.run_key if manifest else None,
        quarantine_manifest=manifest_location(root, manifest.run_key) if manifest else None,
        quarantined_file_count=len(manifest.files) if manifest else 0,
        purged_runs=purged_runs,
        purged_file_count=purged_files,
        orphans_listed_by=listed_by,
    ).to_json()


def take_orphans(jtable, orphans: list[str]) -> None:
    """Delete the orphan files through the table's own FileIO (the local disk, S3A, ...): ``quarantine_days=0``."""
    io = jtable.io()
    for path in orphans:
        io.deleteFile(path)
