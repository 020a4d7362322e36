"""The clean step: remove the snapshots a policy resolved, then orphan files past a floor.

Args: :class:`~airflow_lake_provider.core.contracts.CleanJobArgs` (the expiry, as for expire, and
``orphan_older_than_ms``: files newer than this are never touched); result:
:class:`~airflow_lake_provider.core.contracts.CleanJobResult`.

Orphan files are files under the table location that no metadata of any snapshot, tag or
branch references (left by failed or killed writers). Iceberg's action decides what is
referenced; in a dry run it is given a delete function that deletes nothing, so the list it
returns is exactly what a real run would remove.
"""

from __future__ import annotations

from typing import Any

from airflow_lake_provider.core.contracts import (
    CleanJobArgs,
    CleanJobResult,
    ExpiryOutcome,
)
from airflow_lake_provider.jobs import iceberg
from airflow_lake_provider.jobs.expire import expire_snapshot_ids


def _noop_consumer(spark):
    """A ``java.util.function.Consumer<String>`` that deletes nothing (py4j callback)."""
    from pyspark.java_gateway import ensure_callback_server_started

    gateway = spark.sparkContext._gateway
    ensure_callback_server_started(gateway)

    class KeepFile:
        def accept(self, location):  # noqa: D401 - Java interface method
            return None

        class Java:
            implements = ["java.util.function.Consumer"]

    return KeepFile()


def run(spark, catalog: str, args: dict[str, Any]) -> dict[str, Any]:
    args = CleanJobArgs.from_json(args).validate()
    jtable = iceberg.load_table(spark, catalog, args.table)
    if args.dry_run:
        existing = {int(s.snapshotId()) for s in jtable.snapshots()}
        expiry = ExpiryOutcome(would_expire_snapshot_ids=sorted(s for s in args.snapshot_ids if s in existing),
                               would_remove_refs=sorted(args.removed_refs),
                               snapshot_id_after=iceberg.current_snapshot_id(jtable))
    else:
        expiry = expire_snapshot_ids(spark, jtable, args)

    orphans: list[str] = []
    if args.orphan_older_than_ms is not None:
        jtable.refresh()
        action = iceberg.actions(spark).deleteOrphanFiles(jtable).olderThan(args.orphan_older_than_ms)
        if args.dry_run:
            action = action.deleteWith(_noop_consumer(spark))
        orphans = sorted(str(location) for location in action.execute().orphanFileLocations())
    return CleanJobResult(
        **expiry.to_json(),
        dry_run=args.dry_run,
        orphan_files=orphans[:CleanJobResult.ORPHAN_FILES_LISTED],
        orphan_file_count=len(orphans),
    ).to_json()
