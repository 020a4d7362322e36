"""The expire step: snapshots (and the files only they held) expired by the table's own retention or an override."""

from __future__ import annotations

import dataclasses
import time
from datetime import date, timedelta
from typing import Any, ClassVar

from airflow_lake_provider.core import step_names as names
from airflow_lake_provider.core.coercion import SnapshotIds, parse_older_than
from airflow_lake_provider.core.contracts import AirflowRun, ExpireJobArgs, ExpireResult, ExpiryOutcome
from airflow_lake_provider.core.engines import SPARK_ACTION_MIN_FILES, Engine
from airflow_lake_provider.core.retention_decision import RetentionDecision, resolve_expiry
from airflow_lake_provider.core.retention_settings import ExpirySettings
from airflow_lake_provider.core.settings import setting
from airflow_lake_provider.core.worker_expiry import (
    AUTO_SPARK_MIN_LIST_ENTRIES,
    AUTO_SPARK_MIN_MANIFEST_ENTRIES,
    AUTO_SPARK_MIN_SNAPSHOTS,
    ReachableFiles,
    expire_in_worker,
    too_large,
    worker_refusal,
)
from airflow_lake_provider.exceptions import LakeConfigError
from airflow_lake_provider.steps.approval import keep_to_approval
from airflow_lake_provider.steps.base import Outcome, Prepared, Step, TableReader


@dataclasses.dataclass(frozen=True)
class _Report:
    """What prepare decided, for the result."""

    decision: RetentionDecision
    settings: ExpirySettings
    current_id: int | None


@dataclasses.dataclass(kw_only=True)
class ExpireStep(Step[ExpireJobArgs, ExpireResult]):
    """Expire snapshots of a table; Iceberg deletes the files that only expired snapshots held.

    Which snapshots go is decided from metadata in the worker, before any JVM. By default the
    table's own retention decides, exactly as Iceberg's ``expire_snapshots`` would: its
    ``history.expire.min-snapshots-to-keep`` / ``max-snapshot-age-ms`` / ``max-ref-age-ms``
    properties and every branch's and tag's own settings (tags and branches past their
    ``max-ref-age-ms`` are removed, ``main`` never). ``older_than`` / ``retain_last`` replace the
    table's rules for main only with ``override_table_retention=True``; given without it they are
    refused, so a DAG default can never silently shorten the time travel a table's owner asked for.
    Never expired: the current snapshot, the head of a tag or branch that stays, and
    ``protected_snapshot_ids``. Exactly those IDs are then expired, re-checked first on fresh
    metadata: in the worker for small tables (``engine``), else by Iceberg's Spark action in the
    ``expire`` job; with nothing to expire and no ref to remove, nothing runs. The log lists the rule that kept or
    removed every snapshot. Returns :class:`~airflow_lake_provider.core.contracts.ExpireResult`
    (docs/operators/expire.md).
    """

    name: ClassVar[str] = names.EXPIRE

    override_table_retention: bool = setting(False, doc=(
        "Apply ``older_than`` / ``retain_last`` instead of the table's own retention for main."))
    older_than: str | date | timedelta | None = setting(None, doc=(
        "With the override, a duration (``\"7d\"``, ``\"36h\"``, ``\"P3D\"``, a ``timedelta``) or a timestamp "
        "(ISO text, a ``datetime``); empty: the table's ``max-snapshot-age-ms``."))
    retain_last: int | None = setting(None, doc=(
        "With the override, keep at least this many snapshots of main (>= 1); empty: the table's "
        "``min-snapshots-to-keep``."))
    snapshot_ids: SnapshotIds | None = setting(None, doc="Explicit snapshot IDs to expire as well.")
    protected_snapshot_ids: SnapshotIds | None = setting(None, wired=True, doc=(
        "IDs, lists, or upstream step results (e.g. the rewrite's output) whose snapshots must stay."))
    dry_run: bool = setting(False, doc="Decide and report, change nothing.")
    engine: Engine = setting("auto", doc=(
        "``pyiceberg`` expires in the Airflow worker (no JVM: one catalog commit, then the files Iceberg's "
        "action would delete, through the table's FileIO); ``spark`` in the ``expire`` job (Iceberg's "
        "``ExpireSnapshots`` in the driver's JVM, no Spark application; its Spark action on a cluster for "
        f"tables of {SPARK_ACTION_MIN_FILES:,}+ files); ``auto`` takes the worker below "
        f"{AUTO_SPARK_MIN_SNAPSHOTS:,} snapshots, {AUTO_SPARK_MIN_LIST_ENTRIES:,} manifest-list entries and "
        f"{AUTO_SPARK_MIN_MANIFEST_ENTRIES:,} manifest entries, "
        "the job otherwise and for tables on object storage, format v3, ``gc.enabled=false``, partition "
        "statistics on a snapshot to expire."))
    approved: dict[str, Any] | None = setting(None, wired=True, doc=(
        "The approval gate's result (``approve_expire.output``): only the snapshots it names are expired; those "
        "the fresh decision adds (the table moved on while a person read the list) stay for the next run. "
        "``None``: no gate, the decision alone."))

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
        self.say("Retention of %s (%s):\n%s", name,
                      "override_table_retention: the values given replace the table's rules for main"
                      if settings.override_table_retention else "the table's own settings", decision.explain())
        if self.approved is not None:
            decision = keep_to_approval(self.approved, decision, name, self.name, self.log)
        before = digest.state()
        current_id = history.current_snapshot_id
        report = _Report(decision, settings, current_id)
        removed_refs = sorted(decision.removed_refs)
        if self.dry_run or not (decision.expire_ids or removed_refs):
            self.say("%s %d snapshots of %s (the IDs in the result's would_expire_snapshot_ids); refs: %s",
                          "Would expire" if self.dry_run else "Nothing to expire;",
                          len(decision.expire_ids), name, removed_refs)
            outcome = ExpiryOutcome(would_expire_snapshot_ids=list(decision.expire_ids), would_remove_refs=removed_refs,
                                    snapshot_id_after=current_id)
            return Prepared(before, done=Outcome(
                self._result(report, outcome),
                f"dry run, would expire {len(decision.expire_ids)} snapshots" if self.dry_run else "nothing to expire",
                changed=False))
        args = ExpireJobArgs(
            table=name, snapshot_ids=list(decision.expire_ids), protected_ids=list(self.protected_snapshot_ids or ()),
            refs={ref.name: ref.snapshot_id for ref in history.refs}, removed_refs=removed_refs,
        ).validate()
        prepared: Prepared[ExpireJobArgs, ExpireResult] = Prepared(before, args=args, state=report)
        worker_outcome = expire_in_the_worker(self, self.engine, reader, args)
        if worker_outcome is not None:
            return Prepared(before, done=self.finish(prepared, worker_outcome))
        return prepared

    def finish(self, prepared: Prepared, result: ExpiryOutcome) -> Outcome:
        self.log.info("Expired %d snapshots of %s, removed refs %s; deleted files: %s.",
                      len(result.expired_snapshot_ids), self.dotted, result.removed_refs, result.deleted_files)
        return Outcome(self._result(prepared.state, result),
                       f"expired {len(result.expired_snapshot_ids)} snapshots, deleted {result.deleted_file_count} "
                       "files no live snapshot needs")

    def _result(self, report: _Report, outcome: ExpiryOutcome) -> ExpireResult:
        decision, settings, current_id = report.decision, report.settings, report.current_id
        explained = decision.to_dict()
        return ExpireResult(
            **outcome.to_json(), table=self.dotted, snapshot_id=current_id,
            retention_source="override" if settings.override_table_retention else "table",
            kept=explained["kept"], removed=explained["removed"], removed_ref_reasons=explained["removed_refs"],
            dry_run=self.dry_run, retain_last=settings.retain_last, max_snapshot_age_ms=settings.max_snapshot_age_ms,
        )


def expire_in_the_worker(step: Step, engine: str, reader: TableReader, args: ExpireJobArgs) -> ExpiryOutcome | None:
    """``args``' expiry done in the worker (:mod:`..core.worker_expiry`) as ``engine`` lets it, or ``None``
    for the step's Spark job. The expire and clean steps' one way in; their log says which and why."""
    if engine == "spark":
        return None
    table = reader.load_table()
    refusal = worker_refusal(table.metadata, args.snapshot_ids)
    if refusal is not None and engine == "pyiceberg":
        raise LakeConfigError(f"engine='pyiceberg' cannot expire {step.dotted}: {refusal}. Use engine='auto' "
                              f"or 'spark' (Iceberg's action in the {step.name} job).")
    reachable = ReachableFiles(table.io)
    why_spark = refusal or (too_large(table, reachable) if engine == "auto" else None)
    if why_spark is not None:
        step.log.info("engine=%s: the %s job expires %s (%s).", engine, step.name, step.dotted, why_spark)
        return None
    done = expire_in_worker(table, args, reachable)
    for error in done.lost_commits:
        step.log.info("The expiry's commit lost to another commit (%s); read the table again.", error)
    for path, error in done.not_deleted[:20]:
        step.log.warning("Could not delete %s (%s); a later clean takes it as an orphan.", path, error)
    if len(done.not_deleted) > 20:
        step.log.warning("... and %d more files not deleted.", len(done.not_deleted) - 20)
    if done.outcome is None:
        step.log.info("Writers committed before each of the worker's %d tries; the %s job takes over.",
                      len(done.lost_commits), step.name)
    else:
        step.log.info("Expired in the worker (engine=%s): no Spark job.", engine)
    return done.outcome
