"""The clean step: Hudi's cleaner policies on Iceberg, plus orphan file removal."""

from __future__ import annotations

import dataclasses
import time
from typing import Any, ClassVar

from airflow_lake_provider.core.approval import Approval
from airflow_lake_provider.core.clean_policy import resolve_clean_policy
from airflow_lake_provider.core.coercion import SnapshotIds
from airflow_lake_provider.core.contracts import (
    DEFAULT_QUARANTINE_DAYS,
    AirflowRun,
    CleanJobArgs,
    CleanJobResult,
    CleanResult,
    ExpireResult,
)
from airflow_lake_provider.core.history import MAIN_BRANCH, history_from_table
from airflow_lake_provider.core.quarantine import checked_quarantine_days, quarantine_root
from airflow_lake_provider.core.retention_decision import RetentionDecision
from airflow_lake_provider.core.retention_settings import (
    DEFAULT_CLEAN_POLICY,
    DEFAULT_CLEAN_RETAINED,
    CleanPolicy,
    CleanSettings,
    EffectiveRetention,
    ExpirySettings,
    effective_retention,
)
from airflow_lake_provider.core.snapshots import table_state
from airflow_lake_provider.steps.approval import keep_to_approval
from airflow_lake_provider.steps.base import Outcome, Prepared, Step, TableReader


@dataclasses.dataclass(frozen=True)
class _Decided:
    """What prepare decided, for the result and the log after the job."""

    settings: CleanSettings
    decision: RetentionDecision
    snapshot_id: int | None
    orphan_cutoff_ms: int | None
    together: EffectiveRetention
    quarantine: str
    quarantine_days: float


@dataclasses.dataclass(kw_only=True)
class CleanStep(Step[CleanJobArgs, CleanResult]):
    """Remove snapshots by a cleaner policy, then orphan files older than a floor (the parameters are
    :class:`~airflow_lake_provider.operators.clean.IcebergCleanPolicyOperator`'s; ``approved`` is the
    approval gate's result when the step runs under one)."""

    name: ClassVar[str] = "clean"

    policy: str = DEFAULT_CLEAN_POLICY.value
    retained: int = DEFAULT_CLEAN_RETAINED
    override_table_retention: bool = False
    protected_snapshot_ids: SnapshotIds | None = None
    remove_orphans: bool = True
    orphan_older_than_hours: float | None = None
    force_orphan_floor: bool = False
    dry_run: bool = False
    expire_result: dict[str, Any] | None = None
    reference_namespaces: list[str] | None = None
    quarantine_location: str | None = None
    quarantine_days: float = DEFAULT_QUARANTINE_DAYS
    approved: dict[str, Any] | None = None
    _decided: _Decided | None = dataclasses.field(default=None, init=False, repr=False)

    def _read_history(self, reader: TableReader, policy: CleanPolicy) -> tuple[str, Any, dict[str, Any]]:
        """The table's location, history and headline figures. Only KEEP_LATEST_FILE_VERSIONS needs
        PyIceberg's table (it reads each snapshot's manifests); the others read the metadata lean,
        so the worker's memory does not grow with the history."""
        if policy is CleanPolicy.KEEP_LATEST_FILE_VERSIONS:
            table = reader.load_table()
            return table.location(), history_from_table(table, with_changed_partitions=True), table_state(table)
        digest = reader.read_digest()
        return digest.location, digest.history(), digest.state()

    def prepare(self, reader: TableReader, run: AirflowRun | None) -> Prepared:
        now_ms = int(time.time() * 1000)
        settings = CleanSettings.checked(
            self.policy, self.retained, override_table_retention=self.override_table_retention,
            remove_orphans=self.remove_orphans, orphan_older_than_hours=self.orphan_older_than_hours,
            force_orphan_floor=self.force_orphan_floor,
        )
        cutoff = settings.orphan_cutoff_ms(now_ms)
        quarantine_days = checked_quarantine_days(self.quarantine_days)
        protected = list(self.protected_snapshot_ids or ())
        override = settings.override_table_retention
        name = self.dotted
        location, history, before = self._read_history(reader, settings.policy)
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
        if self.approved is not None:
            decision = keep_to_approval(self.approved, decision, name, "clean", self.log)
        self._decided = _Decided(settings, decision, history.current_snapshot_id, cutoff, together, quarantine,
                                 quarantine_days)
        removed_refs = sorted(decision.removed_refs)
        if not decision.expire_ids and not removed_refs and cutoff is None:
            self.log.info("Policy %s keeps every snapshot of %s and orphan removal is off.", settings.label, name)
            return Prepared(before, done=Outcome(
                self._result(CleanJobResult(dry_run=self.dry_run, snapshot_id_after=history.current_snapshot_id)),
                "nothing to clean", changed=False))
        return Prepared(before, args=CleanJobArgs(
            table=name, snapshot_ids=list(decision.expire_ids), protected_ids=protected,
            refs={ref.name: ref.snapshot_id for ref in history.refs}, removed_refs=removed_refs,
            orphan_older_than_ms=cutoff, dry_run=self.dry_run, reference_namespaces=self.reference_namespaces,
            quarantine_days=quarantine_days, quarantine_location=self.quarantine_location, airflow_run=run,
            approved_orphan_files=Approval.from_json(self.approved).orphan_files if self.approved is not None else None,
        ).validate())

    def finish(self, prepared: Prepared, result: CleanJobResult) -> Outcome:
        decided = self._prepared()
        settings, days = decided.settings, decided.quarantine_days
        verb = "would remove" if self.dry_run else "removed"
        snapshots = len(result.would_expire_snapshot_ids or result.expired_snapshot_ids)
        summary = (f"{'dry run, ' if self.dry_run else ''}{verb} {snapshots} snapshots ({settings.policy}) and "
                   f"{result.orphan_file_count} orphan files"
                   f"{' (to quarantine)' if days and result.orphan_file_count else ''}")
        self._log_quarantine(result, decided.quarantine, days)
        return Outcome(self._result(result), summary)

    def _result(self, outcome: CleanJobResult) -> CleanResult:
        decided = self._prepared()
        decision, settings = decided.decision, decided.settings
        explained = decision.to_dict()
        return CleanResult(
            **outcome.to_json(), table=self.dotted, snapshot_id=decided.snapshot_id,
            policy=str(self.policy), retained=settings.retained,
            retention_source="override" if settings.override_table_retention else "table",
            kept=explained["kept"], removed=explained["removed"], removed_ref_reasons=explained["removed_refs"],
            planned_removals=list(decision.expire_ids), orphan_older_than_ms=decided.orphan_cutoff_ms,
            effective_retention=decided.together.to_dict(), quarantine_days=decided.quarantine_days,
        )

    def _prepared(self) -> _Decided:
        if self._decided is None:
            raise RuntimeError(f"The {self.name} step of {self.table} was not prepared.")
        return self._decided

    def _log_quarantine(self, outcome: CleanJobResult, root: str, days: float) -> None:
        """Say where the orphans went and how to bring them back, and what the purge removed."""
        if outcome.quarantine_run:
            self.log.info("%d orphan files moved to quarantine run %s (manifest %s), kept %g days. To put them back: "
                          "IcebergRestoreQuarantineOperator(table=%r, quarantine_run=%r%s).",
                          outcome.quarantined_file_count, outcome.quarantine_run, outcome.quarantine_manifest, days,
                          self.dotted, outcome.quarantine_run,
                          f", quarantine_location={self.quarantine_location!r}" if self.quarantine_location else "")
            self.log.info("By hand: python -m airflow_lake_provider.operators.restore %s %s",
                          self.dotted, outcome.quarantine_manifest)
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
