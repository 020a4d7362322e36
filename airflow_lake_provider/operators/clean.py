"""The clean step: Hudi's cleaner policies on Iceberg, plus orphan file removal."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from airflow_lake_provider.core.approval import Approval
from airflow_lake_provider.core.clean_policy import resolve_clean_policy
from airflow_lake_provider.core.coercion import SnapshotIds
from airflow_lake_provider.core.contracts import (
    DEFAULT_QUARANTINE_DAYS,
    CleanJobArgs,
    CleanJobResult,
    CleanResult,
    ExpireResult,
)
from airflow_lake_provider.core.history import MAIN_BRANCH, history_from_table
from airflow_lake_provider.core.quarantine import checked_quarantine_days, quarantine_root
from airflow_lake_provider.core.retention_settings import (
    DEFAULT_CLEAN_POLICY,
    DEFAULT_CLEAN_RETAINED,
    DEFAULT_ORPHAN_OLDER_THAN_HOURS,
    CleanPolicy,
    CleanSettings,
    ExpirySettings,
    effective_retention,
)
from airflow_lake_provider.core.snapshots import table_state
from airflow_lake_provider.operators.approval import keep_to_approval, passed_gate
from airflow_lake_provider.operators.base import LakeMaintenanceOperator, airflow_run

__all__ = ["IcebergCleanPolicyOperator"]


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
    older than ``orphan_older_than_hours`` (default 72) are taken; less than 24 hours is refused
    unless ``force_orphan_floor=True``, since a writer still in flight owns young files. Taken
    orphans are moved to a quarantine (a manifest per run) and deleted by a later clean after
    ``quarantine_days``, so one wrongly taken can be put back
    (:class:`~airflow_lake_provider.operators.restore.IcebergRestoreQuarantineOperator`);
    ``quarantine_days=0`` deletes them at once.
    ``dry_run=True`` returns exactly what would be removed and removes nothing.

    Expire and clean stay two tasks; what the two together keep is stated once
    (:func:`~airflow_lake_provider.core.retention_settings.effective_retention`), in the log and in the
    result's ``effective_retention``, from this step's settings, the table's retention and the
    expire step's settings (``expire_result``). Returns
    :class:`~airflow_lake_provider.core.contracts.CleanResult` as JSON (schema: ``docs/operators/clean.md``).

    :param policy: one of the policies above (templated).
    :param override_table_retention: let the policy go under the table's own retention for main (templated).
    :param retained: n or h for the policy (templated).
    :param protected_snapshot_ids: IDs, lists, or upstream step results whose snapshots must stay.
    :param orphan_older_than_hours: the orphan floor in hours; ``None`` skips orphan removal.
    :param force_orphan_floor: allow a floor under 24 hours.
    :param dry_run: report, change nothing.
    :param reference_namespaces: the namespaces whose tables are checked for references to this
        table's files before an orphan is taken (templated; ``None``: every namespace of the catalog).
    :param expire_result: the expire step's result (e.g. ``expire.output``, templated), for the
        statement of what the two steps together keep; empty: the statement covers this step alone.
    :param quarantine_location: the root of the orphans' quarantine, a path or URI outside the table
        location (templated); ``None``: ``.lake-quarantine`` beside the table location. Each table's
        runs sit under ``<quarantine_location>/<namespace>/<table>``.
    :param quarantine_days: days a quarantined orphan is kept before a later clean deletes it
        (templated; default 7; 0: delete orphans at once, with no quarantine).
    :param approved: the approval gate's result (``approve_clean.output``, templated): only the
        snapshots and orphan files it names are removed (see ``docs/operators/approval.md``).
    :param require_approval: set by the group with a gate: without an approval (rejected, skipped) the
        step skips itself and removes nothing.
    """

    template_fields: Sequence[str] = (
        *LakeMaintenanceOperator.template_fields,
        "policy", "retained", "override_table_retention", "protected_snapshot_ids", "orphan_older_than_hours",
        "dry_run", "expire_result", "reference_namespaces", "quarantine_location", "quarantine_days", "approved",
    )
    template_fields_renderers = {**LakeMaintenanceOperator.template_fields_renderers, "expire_result": "json",
                                 "approved": "json"}

    def __init__(
        self,
        *,
        policy: str = DEFAULT_CLEAN_POLICY.value,
        retained: int = DEFAULT_CLEAN_RETAINED,
        override_table_retention: bool = False,
        protected_snapshot_ids: SnapshotIds | None = None,
        orphan_older_than_hours: float | None = DEFAULT_ORPHAN_OLDER_THAN_HOURS,
        force_orphan_floor: bool = False,
        dry_run: bool = False,
        expire_result: dict[str, Any] | None = None,
        reference_namespaces: list[str] | None = None,
        quarantine_location: str | None = None,
        quarantine_days: float = DEFAULT_QUARANTINE_DAYS,
        approved: dict[str, Any] | None = None,
        require_approval: bool = False,
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
        self.expire_result = expire_result
        self.reference_namespaces = reference_namespaces
        self.quarantine_location = quarantine_location
        self.quarantine_days = quarantine_days
        self.approved = approved
        self.require_approval = require_approval

    def _read_history(self, policy: CleanPolicy) -> tuple[str, Any, dict[str, Any]]:
        """The table's location, history and headline figures. Only KEEP_LATEST_FILE_VERSIONS needs
        PyIceberg's table (it reads each snapshot's manifests); the others read the metadata lean,
        so the worker's memory does not grow with the history."""
        if policy is CleanPolicy.KEEP_LATEST_FILE_VERSIONS:
            table = self.load_table()
            return table.location(), history_from_table(table, with_changed_partitions=True), table_state(table)
        digest = self.read_digest()
        return digest.location, digest.history(), digest.state()

    def execute(self, context: Any) -> dict[str, Any]:
        self.coerce_rendered_fields()
        gated = passed_gate(self, "clean")
        now_ms = int(time.time() * 1000)
        settings = CleanSettings.checked(
            self.policy, self.retained, override_table_retention=self.override_table_retention,
            orphan_older_than_hours=self.orphan_older_than_hours, force_orphan_floor=self.force_orphan_floor,
        )
        cutoff = settings.orphan_cutoff_ms(now_ms)
        quarantine_days = checked_quarantine_days(self.quarantine_days)
        protected = list(self.protected_snapshot_ids or ())
        override = settings.override_table_retention
        name = self.table_identifier.dotted
        location, history, before = self._read_history(settings.policy)
        quarantine = quarantine_root(location, name, self.quarantine_location)
        decision = resolve_clean_policy(history, settings, now_ms=now_ms, protected_ids=protected)
        self.log.info("Clean policy %s on %s (%s):\n%s", settings.label, name,
                      "override_table_retention: the policy alone decides main's history" if override
                      else "never under the table's own retention", decision.explain())
        together = effective_retention(
            history.retention, settings, self._expiry_settings(),
            main=next((ref for ref in history.refs if ref.name == MAIN_BRANCH), None), protected_ids=protected,
        )
        self.log.info("%s", together)
        if gated:
            decision = keep_to_approval(self, decision, name, "clean")
        removed_refs = sorted(decision.removed_refs)
        if not decision.expire_ids and not removed_refs and cutoff is None:
            self.log.info("Policy %s keeps every snapshot of %s and orphan removal is off.", settings.label, name)
            self.log_summary(before, "nothing to clean", changed=False)
            outcome = CleanJobResult(dry_run=self.dry_run, snapshot_id_after=history.current_snapshot_id)
        else:
            job_args = CleanJobArgs(
                table=name, snapshot_ids=list(decision.expire_ids), protected_ids=protected,
                refs={ref.name: ref.snapshot_id for ref in history.refs}, removed_refs=removed_refs,
                orphan_older_than_ms=cutoff, dry_run=self.dry_run, reference_namespaces=self.reference_namespaces,
                quarantine_days=quarantine_days, quarantine_location=self.quarantine_location,
                airflow_run=airflow_run(context),
                approved_orphan_files=Approval.from_json(self.approved).orphan_files if gated else None,
            ).validate()
            outcome = CleanJobResult.from_json(self.run_job("clean", job_args.to_json()))
            verb = "would remove" if self.dry_run else "removed"
            snapshots = len(outcome.would_expire_snapshot_ids or outcome.expired_snapshot_ids)
            self.log_summary(before, f"{'dry run, ' if self.dry_run else ''}{verb} {snapshots} snapshots "
                             f"({settings.policy}) and {outcome.orphan_file_count} orphan files"
                             f"{' (to quarantine)' if quarantine_days and outcome.orphan_file_count else ''}")
            self._log_quarantine(outcome, quarantine, quarantine_days)
        explained = decision.to_dict()
        return CleanResult(
            **outcome.to_json(), table=name, snapshot_id=history.current_snapshot_id, policy=str(self.policy),
            retained=settings.retained, retention_source="override" if override else "table",
            kept=explained["kept"], removed=explained["removed"], removed_ref_reasons=explained["removed_refs"],
            planned_removals=list(decision.expire_ids), orphan_older_than_ms=cutoff,
            effective_retention=together.to_dict(), quarantine_days=quarantine_days,
        ).to_json()

    def _log_quarantine(self, outcome: CleanJobResult, root: str, days: float) -> None:
        """Say where the orphans went and how to bring them back, and what the purge removed."""
        if outcome.quarantine_run:
            self.log.info("%d orphan files moved to quarantine run %s (manifest %s), kept %g days. To put them back: "
                          "IcebergRestoreQuarantineOperator(table=%r, quarantine_run=%r%s).",
                          outcome.quarantined_file_count, outcome.quarantine_run, outcome.quarantine_manifest, days,
                          self.table_identifier.dotted, outcome.quarantine_run,
                          f", quarantine_location={self.quarantine_location!r}" if self.quarantine_location else "")
            self.log.info("By hand: python -m airflow_lake_provider.operators.restore %s %s",
                          self.table_identifier.dotted, outcome.quarantine_manifest)
        if outcome.purged_runs:
            self.log.info("%s %d quarantine runs past %g days under %s (%d files): %s.",
                          "Would purge" if self.dry_run else "Purged", len(outcome.purged_runs), days, root,
                          outcome.purged_file_count, ", ".join(outcome.purged_runs))

    def _expiry_settings(self) -> ExpirySettings | None:
        """What the expire step applied to main, read from its result (``None``: not given)."""
        if self.expire_result is None:
            return None
        expire = ExpireResult.from_json(self.expire_result)
        return ExpirySettings(expire.retention_source == "override", expire.retain_last, expire.max_snapshot_age_ms)

