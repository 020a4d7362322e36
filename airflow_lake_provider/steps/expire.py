"""The expire step: snapshots (and the files only they held) expired by the table's own retention or an override."""

from __future__ import annotations

import dataclasses
import time
from datetime import date, timedelta
from typing import Any, ClassVar

from airflow_lake_provider.core.coercion import SnapshotIds, parse_older_than
from airflow_lake_provider.core.contracts import AirflowRun, ExpireJobArgs, ExpireResult, ExpiryOutcome
from airflow_lake_provider.core.retention_decision import resolve_expiry
from airflow_lake_provider.core.retention_settings import ExpirySettings
from airflow_lake_provider.steps.approval import keep_to_approval
from airflow_lake_provider.steps.base import Outcome, Prepared, Step, TableReader


@dataclasses.dataclass(kw_only=True)
class ExpireStep(Step[ExpireJobArgs, ExpireResult]):
    """Expire a table's snapshots (the parameters are
    :class:`~airflow_lake_provider.operators.expire.IcebergExpireSnapshotsOperator`'s; ``approved``
    is the approval gate's result when the step runs under one).

    Which snapshots go is decided from metadata before any JVM; Spark then expires exactly those
    IDs, re-checking them first. With nothing to expire and no ref to remove, no job runs.
    """

    name: ClassVar[str] = "expire"

    override_table_retention: bool = False
    older_than: str | date | timedelta | None = None
    retain_last: int | None = None
    snapshot_ids: SnapshotIds | None = None
    protected_snapshot_ids: SnapshotIds | None = None
    dry_run: bool = False
    approved: dict[str, Any] | None = None
    _report: tuple[Any, ExpirySettings, int | None] | None = dataclasses.field(default=None, init=False, repr=False)

    def prepare(self, reader: TableReader, run: AirflowRun | None) -> Prepared:
        now_ms = int(time.time() * 1000)
        cutoff = parse_older_than(self.older_than, now_ms=now_ms)
        settings = ExpirySettings.requested(self.override_table_retention, older_than_ms=cutoff,
                                            retain_last=self.retain_last, now_ms=now_ms)
        digest = reader.read_digest()
        name = self.dotted
        history = digest.history()
        decision = resolve_expiry(history, settings, now_ms=now_ms, snapshot_ids=self.snapshot_ids or (),
                                  protected_ids=self.protected_snapshot_ids or ())
        self.log.info("Retention of %s (%s):\n%s", name,
                      "override_table_retention: the values given replace the table's rules for main"
                      if settings.override_table_retention else "the table's own settings", decision.explain())
        if self.approved is not None:
            decision = keep_to_approval(self.approved, decision, name, "expire", self.log)
        before = digest.state()
        current_id = history.current_snapshot_id
        self._report = (decision, settings, current_id)
        removed_refs = sorted(decision.removed_refs)
        if self.dry_run or not (decision.expire_ids or removed_refs):
            self.log.info("%s %d snapshots of %s: %s; refs: %s",
                          "Would expire" if self.dry_run else "Nothing to expire;",
                          len(decision.expire_ids), name, list(decision.expire_ids), removed_refs)
            outcome = ExpiryOutcome(would_expire_snapshot_ids=list(decision.expire_ids), would_remove_refs=removed_refs,
                                    snapshot_id_after=current_id)
            return Prepared(before, done=Outcome(
                self._result(outcome), f"dry run, would expire {len(decision.expire_ids)} snapshots" if self.dry_run
                else "nothing to expire", changed=False))
        return Prepared(before, args=ExpireJobArgs(
            table=name, snapshot_ids=list(decision.expire_ids), protected_ids=list(self.protected_snapshot_ids or ()),
            refs={ref.name: ref.snapshot_id for ref in history.refs}, removed_refs=removed_refs,
        ).validate())

    def finish(self, prepared: Prepared, result: ExpiryOutcome) -> Outcome:
        self.log.info("Expired %d snapshots of %s, removed refs %s; deleted files: %s.",
                      len(result.expired_snapshot_ids), self.dotted, result.removed_refs, result.deleted_files)
        return Outcome(self._result(result), f"expired {len(result.expired_snapshot_ids)} snapshots, deleted "
                                             f"{result.deleted_file_count} files no live snapshot needs")

    def _result(self, outcome: ExpiryOutcome) -> ExpireResult:
        if self._report is None:
            raise RuntimeError(f"The {self.name} step of {self.table} was not prepared.")
        decision, settings, current_id = self._report
        explained = decision.to_dict()
        return ExpireResult(
            **outcome.to_json(), table=self.dotted, snapshot_id=current_id,
            retention_source="override" if settings.override_table_retention else "table",
            kept=explained["kept"], removed=explained["removed"], removed_ref_reasons=explained["removed_refs"],
            dry_run=self.dry_run, retain_last=settings.retain_last, max_snapshot_age_ms=settings.max_snapshot_age_ms,
        )
