"""The clean step: Hudi's cleaner policies on Iceberg, plus orphan file removal."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from airflow_lake_provider.exceptions import LakeConfigError
from airflow_lake_provider.operators.base import LakeMaintenanceOperator, snapshot_ids_from
from airflow_lake_provider.retention import CleanPolicy, history_from_table, resolve_clean_policy
from airflow_lake_provider.snapshots import table_state

ORPHAN_FLOOR_HOURS = 24
DEFAULT_ORPHAN_OLDER_THAN_HOURS = 72


class IcebergCleanPolicyOperator(LakeMaintenanceOperator):
    """Remove snapshots by a cleaner policy, then orphan files older than a floor.

    Policies (resolved from metadata in the Airflow worker into the exact snapshots to remove):

    * ``KEEP_LATEST_COMMITS`` (``retained`` = n): keep the last n commits of main;
    * ``KEEP_LATEST_FILE_VERSIONS`` (n): keep, for every partition, the snapshots holding its last n versions;
    * ``KEEP_LATEST_BY_HOURS`` (h): keep every snapshot that was current in the last h hours.

    Tags and branches are savepoints and ``protected_snapshot_ids`` are pending work: never
    removed. Orphan files (under the table location, referenced by no snapshot, tag or branch)
    older than ``orphan_older_than_hours`` (default 72) are deleted; less than 24 hours is refused
    unless ``force_orphan_floor=True``, since a writer still in flight owns young files.
    ``dry_run=True`` returns exactly what would be removed and removes nothing.

    :param policy: one of the policies above (templated).
    :param retained: n or h for the policy (templated).
    :param protected_snapshot_ids: IDs, lists, or upstream step results whose snapshots must stay.
    :param orphan_older_than_hours: the orphan floor in hours; ``None`` skips orphan removal.
    :param force_orphan_floor: allow a floor under 24 hours.
    :param dry_run: report, change nothing.
    """

    template_fields: Sequence[str] = (
        *LakeMaintenanceOperator.template_fields,
        "policy", "retained", "protected_snapshot_ids", "orphan_older_than_hours", "dry_run",
    )

    def __init__(
        self,
        *,
        policy: str = CleanPolicy.KEEP_LATEST_COMMITS.value,
        retained: int = 10,
        protected_snapshot_ids: Any = None,
        orphan_older_than_hours: float | None = DEFAULT_ORPHAN_OLDER_THAN_HOURS,
        force_orphan_floor: bool = False,
        dry_run: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.policy = policy
        self.retained = retained
        self.protected_snapshot_ids = protected_snapshot_ids
        self.orphan_older_than_hours = orphan_older_than_hours
        self.force_orphan_floor = force_orphan_floor
        self.dry_run = dry_run

    def orphan_cutoff_ms(self, now_ms: int) -> int | None:
        hours = self.orphan_older_than_hours
        if hours in (None, "", "None"):
            return None
        try:
            hours = float(hours)
        except (TypeError, ValueError):
            raise LakeConfigError(f"orphan_older_than_hours must be a number of hours; got {hours!r}.") from None
        if hours < 0:
            raise LakeConfigError(f"orphan_older_than_hours must not be negative; got {hours}.")
        if hours < ORPHAN_FLOOR_HOURS and not self.force_orphan_floor:
            raise LakeConfigError(
                f"orphan_older_than_hours={hours:g} is under the {ORPHAN_FLOOR_HOURS} h floor: files that young may "
                "belong to a write still in flight, and deleting them would corrupt its commit. Use 24 h or more, "
                "or set force_orphan_floor=True if no writer can be running."
            )
        return now_ms - int(hours * 3600 * 1000)

    def execute(self, context: Any) -> dict[str, Any]:
        now_ms = int(time.time() * 1000)
        cutoff = self.orphan_cutoff_ms(now_ms)
        protected = snapshot_ids_from(self.protected_snapshot_ids)
        table = self.load_table()
        name = self.table_identifier.dotted
        decision = resolve_clean_policy(
            history_from_table(table, with_changed_partitions=str(self.policy).upper() == "KEEP_LATEST_FILE_VERSIONS"),
            self.policy, self.retained, now_ms=now_ms, protected_ids=protected,
        )
        current = table.current_snapshot()
        before = table_state(table)
        base = {"table": name, "snapshot_id": current.snapshot_id if current else None, "policy": str(self.policy),
                "retained": self.retained, "kept": decision.to_dict()["reasons"],
                "planned_removals": list(decision.expire_ids), "orphan_older_than_ms": cutoff}
        if not decision.expire_ids and cutoff is None:
            self.log.info("Policy %s keeps every snapshot of %s and orphan removal is off.", self.policy, name)
            self.log_summary(before, "nothing to clean", changed=False)
            return {**base, "dry_run": bool(self.dry_run), "expired_snapshot_ids": [], "deleted_files": {},
                    "orphan_files": [], "orphan_file_count": 0, "snapshot_id_after": base["snapshot_id"]}
        result = self.run_job(
            "clean",
            {"table": name, "snapshot_ids": list(decision.expire_ids), "protected_ids": protected,
             "orphan_older_than_ms": cutoff, "dry_run": bool(self.dry_run)},
        )
        verb = "would remove" if self.dry_run else "removed"
        snapshots = len(result.get("would_expire_snapshot_ids") or result.get("expired_snapshot_ids") or [])
        self.log_summary(before, f"{'dry run, ' if self.dry_run else ''}{verb} {snapshots} snapshots "
                         f"({self.policy}) and {result['orphan_file_count']} orphan files")
        return {**base, **result}
