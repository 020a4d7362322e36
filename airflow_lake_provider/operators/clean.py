"""The clean step: Hudi's cleaner policies on Iceberg, plus orphan file removal."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from airflow_lake_provider.exceptions import LakeConfigError
from airflow_lake_provider.operators.base import LakeMaintenanceOperator, flag_from, snapshot_ids_from
from airflow_lake_provider.core.retention import CleanPolicy, history_from_table, resolve_clean_policy
from airflow_lake_provider.core.snapshots import table_state

ORPHAN_FLOOR_HOURS = 24
DEFAULT_ORPHAN_OLDER_THAN_HOURS = 72


class IcebergCleanPolicyOperator(LakeMaintenanceOperator):
    """Remove snapshots by a cleaner policy, then orphan files older than a floor.

    Policies (resolved from metadata in the Airflow worker into the exact snapshots to remove):

    * ``KEEP_LATEST_COMMITS`` (``retained`` = n): keep the last n commits of main;
    * ``KEEP_LATEST_FILE_VERSIONS`` (n): keep, for every partition, the snapshots holding its last n versions;
    * ``KEEP_LATEST_BY_HOURS`` (h): keep every snapshot that was current in the last h hours.

    The table's own retention is a floor no policy goes under: a snapshot is removed only when
    the policy AND the table's retention (its ``history.expire.*`` properties and its refs'
    settings, as Iceberg's ``expire_snapshots`` resolves them) both let it go, unless
    ``override_table_retention=True``, when the policy alone decides main's history. Other
    branches and tags always follow their own rules (a tag past its ``max-ref-age-ms`` is removed
    as Iceberg would). The current snapshot and ``protected_snapshot_ids`` (pending work) are never
    removed. The log lists the rule that kept or removed every snapshot. Orphan files (under the table location, referenced by no snapshot, tag or branch)
    older than ``orphan_older_than_hours`` (default 72) are deleted; less than 24 hours is refused
    unless ``force_orphan_floor=True``, since a writer still in flight owns young files.
    ``dry_run=True`` returns exactly what would be removed and removes nothing.

    :param policy: one of the policies above (templated).
    :param override_table_retention: let the policy go under the table's own retention for main (templated).
    :param retained: n or h for the policy (templated).
    :param protected_snapshot_ids: IDs, lists, or upstream step results whose snapshots must stay.
    :param orphan_older_than_hours: the orphan floor in hours; ``None`` skips orphan removal.
    :param force_orphan_floor: allow a floor under 24 hours.
    :param dry_run: report, change nothing.
    """

    template_fields: Sequence[str] = (
        *LakeMaintenanceOperator.template_fields,
        "policy", "retained", "override_table_retention", "protected_snapshot_ids", "orphan_older_than_hours",
        "dry_run",
    )

    def __init__(
        self,
        *,
        policy: str = CleanPolicy.KEEP_LATEST_COMMITS.value,
        retained: int = 10,
        override_table_retention: bool = False,
        protected_snapshot_ids: Any = None,
        orphan_older_than_hours: float | None = DEFAULT_ORPHAN_OLDER_THAN_HOURS,
        force_orphan_floor: bool = False,
        dry_run: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.policy = policy
        self.retained = retained
        self.override_table_retention = override_table_retention
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
        override = flag_from(self.override_table_retention, "override_table_retention")
        protected = snapshot_ids_from(self.protected_snapshot_ids)
        table = self.load_table()
        name = self.table_identifier.dotted
        history = history_from_table(table, with_changed_partitions=str(self.policy).upper() == "KEEP_LATEST_FILE_VERSIONS")
        decision = resolve_clean_policy(
            history, self.policy, self.retained, now_ms=now_ms, protected_ids=protected,
            override_table_retention=override,
        )
        self.log.info("Clean policy %s=%s on %s (%s):\n%s", self.policy, self.retained, name,
                      "override_table_retention: the policy alone decides main's history" if override
                      else "never under the table's own retention", decision.explain())
        current = table.current_snapshot()
        before = table_state(table)
        explained = decision.to_dict()
        removed_refs = sorted(decision.removed_refs)
        base = {"table": name, "snapshot_id": current.snapshot_id if current else None, "policy": str(self.policy),
                "retained": self.retained, "retention_source": "override" if override else "table",
                "kept": explained["kept"], "removed": explained["removed"],
                "removed_ref_reasons": explained["removed_refs"],
                "planned_removals": list(decision.expire_ids), "orphan_older_than_ms": cutoff}
        if not decision.expire_ids and not removed_refs and cutoff is None:
            self.log.info("Policy %s keeps every snapshot of %s and orphan removal is off.", self.policy, name)
            self.log_summary(before, "nothing to clean", changed=False)
            return {**base, "dry_run": bool(self.dry_run), "expired_snapshot_ids": [], "removed_refs": [],
                    "deleted_files": {}, "orphan_files": [], "orphan_file_count": 0,
                    "snapshot_id_after": base["snapshot_id"]}
        result = self.run_job(
            "clean",
            {"table": name, "snapshot_ids": list(decision.expire_ids), "protected_ids": protected,
             "refs": {ref.name: ref.snapshot_id for ref in history.refs}, "removed_refs": removed_refs,
             "orphan_older_than_ms": cutoff, "dry_run": bool(self.dry_run)},
        )
        verb = "would remove" if self.dry_run else "removed"
        snapshots = len(result.get("would_expire_snapshot_ids") or result.get("expired_snapshot_ids") or [])
        self.log_summary(before, f"{'dry run, ' if self.dry_run else ''}{verb} {snapshots} snapshots "
                         f"({self.policy}) and {result['orphan_file_count']} orphan files")
        return {**base, **result}
