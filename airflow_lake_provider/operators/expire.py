"""Expire snapshots (and the files only they held) in Spark, by age, count or explicit IDs."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from airflow_lake_provider.operators.base import LakeMaintenanceOperator, snapshot_ids_from
from airflow_lake_provider.retention import history_from_table, parse_older_than, resolve_expiry
from airflow_lake_provider.snapshots import table_state


class IcebergExpireSnapshotsOperator(LakeMaintenanceOperator):
    """Expire snapshots of a table; Iceberg deletes the files that only expired snapshots held.

    Which snapshots go is decided from metadata in the Airflow worker, before any JVM: those
    older than ``older_than`` beyond the newest ``retain_last`` of main, plus ``snapshot_ids``.
    Never expired: the current snapshot, snapshots of tags and branches, and
    ``protected_snapshot_ids`` (e.g. the rewrite's output, pulled from XCom). Spark then expires
    exactly those IDs (Iceberg's own age rule is switched off), re-checking them first.
    When nothing is to expire, no Spark application is started.

    Returns ``{table, snapshot_id, expired_snapshot_ids, deleted_files: {data_files,
    position_delete_files, equality_delete_files, manifests, manifest_lists, statistics_files},
    snapshot_id_after, kept}``.

    :param older_than: a duration (``"7d"``, ``"36h"``, ``"P3D"``) or a timestamp (templated).
    :param retain_last: keep at least this many snapshots of main (>= 1, default 1).
    :param snapshot_ids: explicit snapshot IDs to expire (templated).
    :param protected_snapshot_ids: IDs, lists, or upstream step results whose snapshots must stay.
    :param dry_run: decide and report, change nothing.
    """

    template_fields: Sequence[str] = (
        *LakeMaintenanceOperator.template_fields,
        "older_than", "retain_last", "snapshot_ids", "protected_snapshot_ids", "dry_run",
    )

    def __init__(
        self,
        *,
        older_than: Any = None,
        retain_last: int = 1,
        snapshot_ids: Any = None,
        protected_snapshot_ids: Any = None,
        dry_run: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.older_than = older_than
        self.retain_last = retain_last
        self.snapshot_ids = snapshot_ids
        self.protected_snapshot_ids = protected_snapshot_ids
        self.dry_run = dry_run

    def execute(self, context: Any) -> dict[str, Any]:
        now_ms = int(time.time() * 1000)
        cutoff = parse_older_than(self.older_than, now_ms=now_ms)
        explicit = snapshot_ids_from(self.snapshot_ids)
        protected = snapshot_ids_from(self.protected_snapshot_ids)
        table = self.load_table()
        name = self.table_identifier.dotted
        decision = resolve_expiry(
            history_from_table(table), now_ms=now_ms, older_than_ms=cutoff, retain_last=self.retain_last,
            snapshot_ids=explicit, protected_ids=protected,
        )
        current = table.current_snapshot()
        before = table_state(table)
        base = {"table": name, "snapshot_id": current.snapshot_id if current else None,
                "kept": decision.to_dict()["reasons"], "dry_run": bool(self.dry_run)}
        if self.dry_run or not decision.expire_ids:
            self.log.info("%s %d snapshots of %s: %s", "Would expire" if self.dry_run else "Nothing to expire;",
                          len(decision.expire_ids), name, list(decision.expire_ids))
            self.log_summary(before, f"dry run, would expire {len(decision.expire_ids)} snapshots" if self.dry_run
                             else "nothing to expire", changed=False)
            return {**base, "expired_snapshot_ids": [],
                    "would_expire_snapshot_ids": list(decision.expire_ids), "deleted_files": {},
                    "snapshot_id_after": base["snapshot_id"]}
        result = self.run_job(
            "expire", {"table": name, "snapshot_ids": list(decision.expire_ids), "protected_ids": protected}
        )
        self.log.info("Expired %d snapshots of %s; deleted files: %s.",
                      len(result["expired_snapshot_ids"]), name, result["deleted_files"])
        self.log_summary(before, f"expired {len(result['expired_snapshot_ids'])} snapshots, deleted "
                         f"{_count_files(result['deleted_files'])} files no live snapshot needs")
        return {**base, **result}


def _count_files(deleted: dict[str, Any]) -> int:
    return sum(int(v) for v in (deleted or {}).values() if isinstance(v, (int, float)))
