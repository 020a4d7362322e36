"""The clean step: remove the snapshots a policy resolved, then orphan files past a floor.

Args: ``table``, ``snapshot_ids``, ``protected_ids``, ``refs``, ``removed_refs`` (as for expire), ``orphan_older_than_ms``
(epoch ms; files newer than this are never touched), ``dry_run``.

Orphan files are files under the table location that no metadata of any snapshot, tag or
branch references (left by failed or killed writers). Iceberg's action decides what is
referenced; in a dry run it is given a delete function that deletes nothing, so the list it
returns is exactly what a real run would remove.
"""

from __future__ import annotations

from typing import Any

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
    table_name = args["table"]
    dry_run = bool(args.get("dry_run"))
    jtable = iceberg.load_table(spark, catalog, table_name)
    snapshot_ids = [int(s) for s in args.get("snapshot_ids") or []]
    if dry_run:
        existing = {int(s.snapshotId()) for s in jtable.snapshots()}
        expiry = {"expired_snapshot_ids": [], "would_expire_snapshot_ids": sorted(s for s in snapshot_ids if s in existing),
                  "removed_refs": [], "would_remove_refs": sorted(args.get("removed_refs") or []),
                  "deleted_files": {}, "snapshot_id_after": iceberg.current_snapshot_id(jtable)}
    else:
        expiry = expire_snapshot_ids(spark, jtable, table_name, snapshot_ids, {int(s) for s in args.get("protected_ids") or []},
                                     args.get("refs"), list(args.get("removed_refs") or []))

    orphans: list[str] = []
    older_than = args.get("orphan_older_than_ms")
    if older_than is not None:
        jtable.refresh()
        action = iceberg.actions(spark).deleteOrphanFiles(jtable).olderThan(int(older_than))
        if dry_run:
            action = action.deleteWith(_noop_consumer(spark))
        orphans = sorted(str(location) for location in action.execute().orphanFileLocations())
    return {
        "table": table_name,
        "dry_run": dry_run,
        **expiry,
        "orphan_files": orphans[:1000],
        "orphan_file_count": len(orphans),
    }
