"""The clean step: Hudi's cleaner policies on Iceberg, plus orphan file removal."""

from __future__ import annotations

import dataclasses
import time
from typing import Annotated, Any, ClassVar, cast

from airflow_lake_provider.core import step_names as names
from airflow_lake_provider.core.approval import Approval
from airflow_lake_provider.core.clean_policy import resolve_clean_policy
from airflow_lake_provider.core.coercion import Days, Hours, OneOf, SnapshotIds
from airflow_lake_provider.core.contracts import (
    DEFAULT_QUARANTINE_DAYS,
    AirflowRun,
    CleanJobArgs,
    CleanJobResult,
    CleanResult,
    ExpireResult,
    ExpiryOutcome,
)
from airflow_lake_provider.core.engines import Engine
from airflow_lake_provider.core.history import MAIN_BRANCH, history_from_table
from airflow_lake_provider.core.lease import iso
from airflow_lake_provider.core.orphan_precheck import find_file_older_than, quarantine_purge_due
from airflow_lake_provider.core.quarantine import checked_quarantine_days, quarantine_root
from airflow_lake_provider.core.retention_decision import RetentionDecision
from airflow_lake_provider.core.retention_settings import (
    DEFAULT_CLEAN_POLICY,
    DEFAULT_CLEAN_RETAINED,
    DEFAULT_ORPHAN_OLDER_THAN_HOURS,
    ORPHAN_FLOOR_HOURS,
    CleanPolicy,
    CleanSettings,
    EffectiveRetention,
    ExpirySettings,
    effective_retention,
)
from airflow_lake_provider.core.settings import setting
from airflow_lake_provider.core.snapshots import table_state
from airflow_lake_provider.steps.approval import keep_to_approval
from airflow_lake_provider.steps.base import Outcome, Prepared, Step, TableReader
from airflow_lake_provider.steps.expire import expire_in_the_worker


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
    #: The policy's snapshots, expired in the worker (``None``: the job expires them, or nothing goes).
    expired: ExpiryOutcome | None = None


@dataclasses.dataclass(kw_only=True)
class CleanStep(Step[CleanJobArgs, CleanResult]):
    """Remove snapshots by a cleaner policy, then orphan files older than a floor.

    Policies (resolved from metadata in the worker into the exact snapshots to remove):
    ``KEEP_LATEST_COMMITS`` (``retained`` = n) keeps the last n commits of main;
    ``KEEP_LATEST_FILE_VERSIONS`` (n) keeps, for every partition, the snapshots holding its last n
    versions; ``KEEP_LATEST_BY_HOURS`` (h) keeps every snapshot that was current in the last h hours.

    The table's own retention is a floor no policy goes under: a snapshot is removed only when
    the policy AND the table's retention (its ``history.expire.*`` properties and its refs'
    settings, as Iceberg's ``expire_snapshots`` resolves them) both let it go, unless
    ``override_table_retention=True``, when the policy alone decides main's history. Other
    branches and tags always follow their own rules. The current snapshot and
    ``protected_snapshot_ids`` are never removed. Orphan files (under the table location,
    referenced by no snapshot, tag or branch) older than the orphan floor are moved to a
    quarantine and deleted by a later clean after ``quarantine_days``, so one wrongly taken can be
    put back (:class:`~airflow_lake_provider.operators.restore.IcebergRestoreQuarantineOperator`).
    What expire and clean together keep is stated once, in the log and in the result's
    ``effective_retention``. Returns :class:`~airflow_lake_provider.core.contracts.CleanResult`
    (docs/operators/clean.md).
    """

    name: ClassVar[str] = names.CLEAN

    policy: Annotated[str, OneOf(tuple(p.value for p in CleanPolicy), upper=True)] = setting(
        DEFAULT_CLEAN_POLICY.value, doc=f"One of {', '.join(f'``{p.value}``' for p in CleanPolicy)} (any case).")
    retained: int = setting(DEFAULT_CLEAN_RETAINED, doc="n (commits, versions) or h (hours) for the policy.")
    override_table_retention: bool = setting(False, doc=(
        "Let the policy go under the table's own retention for main."))
    protected_snapshot_ids: SnapshotIds | None = setting(None, wired=True, doc=(
        "IDs, lists, or upstream step results whose snapshots must stay."))
    remove_orphans: bool = setting(True, doc="Take orphan files at all (``False``: only snapshots).")
    orphan_older_than_hours: Hours | None = setting(None, doc=(
        f"The orphan floor in hours, or a duration (``'3d'``, a ``timedelta``) (``None``: "
        f"{DEFAULT_ORPHAN_OLDER_THAN_HOURS:g}); under {ORPHAN_FLOOR_HOURS:g} "
        "is refused unless ``force_orphan_floor``, since a writer still in flight owns young files."))
    force_orphan_floor: bool = setting(False, doc=f"Allow an orphan floor under {ORPHAN_FLOOR_HOURS:g} hours.")
    dry_run: bool = setting(False, doc="Report exactly what would be removed, remove nothing.")
    expire_result: dict[str, Any] | None = setting(None, wired=True, doc=(
        "The expire step's result (e.g. ``expire.output``), for the statement of what the two steps together "
        "keep; empty: the statement covers this step alone."))
    reference_namespaces: list[str] | None = setting(None, doc=(
        "The namespaces whose tables are checked for references to this table's files before an orphan is "
        "taken (``None``: every namespace of the catalog)."))
    quarantine_location: str | None = setting(None, doc=(
        "The root of the orphans' quarantine, a path or URI outside the table location (``None``: "
        "``.lake-quarantine`` beside the table location). Each table's runs sit under "
        "``<quarantine_location>/<namespace>/<table>``."))
    quarantine_days: Days = setting(DEFAULT_QUARANTINE_DAYS, doc=(
        f"Days a quarantined orphan is kept before a later clean deletes it, or a duration (``'36h'``) (default "
        f"{DEFAULT_QUARANTINE_DAYS:g}; "
        "0: delete orphans at once, with no quarantine)."))
    approved: dict[str, Any] | None = setting(None, wired=True, doc=(
        "The approval gate's result (``approve_clean.output``): only the snapshots and orphan files it names are "
        "removed (docs/operators/approval.md)."))
    engine: Engine = setting("auto", doc=(
        "Where the snapshots the policy removes are expired, as the expire step's ``engine``: ``auto`` in the "
        "worker for small tables, ``pyiceberg`` there always, ``spark`` in the ``clean`` job. The orphan listing, "
        "when a file under the table is old enough to be one, is Iceberg's, in the job."))

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
            remove_orphans=self.remove_orphans,
            orphan_older_than_hours=cast("float | None", self.orphan_older_than_hours),  # read as hours
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
        self.say("Clean policy %s on %s (%s):\n%s", settings.label, name,
                      "override_table_retention: the policy alone decides main's history" if override
                      else "never under the table's own retention", decision.explain())
        together = effective_retention(
            history.retention, settings, self._expiry_settings(),
            main=next((ref for ref in history.refs if ref.name == MAIN_BRANCH), None), protected_ids=protected,
        )
        self.say("%s", together)
        if self.approved is not None:
            decision = keep_to_approval(self.approved, decision, name, self.name, self.log)
        decided = _Decided(settings, decision, history.current_snapshot_id, cutoff, together, quarantine,
                           quarantine_days)
        removed_refs = sorted(decision.removed_refs)
        args = CleanJobArgs(
            table=name, snapshot_ids=list(decision.expire_ids), protected_ids=protected,
            refs={ref.name: ref.snapshot_id for ref in history.refs}, removed_refs=removed_refs,
            orphan_older_than_ms=cutoff, dry_run=self.dry_run, reference_namespaces=self.reference_namespaces,
            quarantine_days=quarantine_days, quarantine_location=self.quarantine_location, airflow_run=run,
            approved_orphan_files=Approval.from_json(self.approved).orphan_files if self.approved is not None else None,
        ).validate()
        removes = bool(decision.expire_ids or removed_refs)
        if removes and not self.dry_run:
            decided = dataclasses.replace(decided, expired=expire_in_the_worker(self, self.engine, reader, args))
        if removes and decided.expired is None:
            return Prepared(before, args=args, state=decided)  # the job expires, then lists orphans
        if decided.expired is not None:
            args = dataclasses.replace(args, snapshot_ids=[], removed_refs=[], refs=None)  # orphans only
        why = ("orphan removal is off" if cutoff is None
               else self._nothing_old(reader, location, cutoff, quarantine, quarantine_days, now_ms))
        if why is None:
            return Prepared(before, args=args, state=decided)
        if decided.expired is None:
            self.log.info("Policy %s keeps every snapshot of %s and %s: no Spark job.", settings.label, name, why)
            return Prepared(before, done=Outcome(
                self._result(decided, CleanJobResult(dry_run=self.dry_run,
                                                     snapshot_id_after=history.current_snapshot_id)),
                f"nothing to clean: every snapshot kept, {why}", changed=False))
        self.log.info("No orphan listing for %s: %s.", name, why)
        return Prepared(before, done=self.finish(Prepared(before, args=args, state=decided), CleanJobResult(
            snapshot_id_after=decided.expired.snapshot_id_after)))

    def _nothing_old(self, reader: TableReader, location: str, cutoff_ms: int, quarantine: str,
                     quarantine_days: float, now_ms: int) -> str | None:
        """Why Iceberg's orphan listing and the quarantine's purge would both find nothing (the
        sentence for the log), or ``None`` when the job must look (:mod:`..core.orphan_precheck`)."""
        io = reader.load_table().io
        floor = iso(cutoff_ms)
        listing = find_file_older_than(io, location, cutoff_ms)
        if not listing.nothing_old:
            self.log.info("Orphan listing needed: %s.", f"{listing.found} was modified before the floor ({floor})"
                          if listing.decided else f"the worker cannot list {location} ({listing.why_undecided})")
            return None
        purge = quarantine_purge_due(io, quarantine, quarantine_days, now_ms,
                                     default_root=self.quarantine_location is None)
        if not purge.nothing_old:
            self.log.info("The quarantine needs the job: %s.", f"run {purge.found} is past {quarantine_days:g} days"
                          if purge.decided else f"{quarantine} cannot be listed ({purge.why_undecided})")
            return None
        return (f"none of the {listing.seen} files under {location} was modified before the orphan floor ({floor}), "
                "so no file can be an orphan")

    def finish(self, prepared: Prepared, result: CleanJobResult) -> Outcome:
        decided: _Decided = prepared.state
        if decided.expired is not None:  # the worker expired the policy's snapshots, the job listed orphans
            result = dataclasses.replace(result, **_expiry_fields(decided.expired))
        settings, days = decided.settings, decided.quarantine_days
        verb = "would remove" if self.dry_run else "removed"
        snapshots = len(result.would_expire_snapshot_ids or result.expired_snapshot_ids)
        summary = (f"{'dry run, ' if self.dry_run else ''}{verb} {snapshots} snapshots ({settings.policy}) and "
                   f"{result.orphan_file_count} orphan files"
                   f"{' (to quarantine)' if days and result.orphan_file_count else ''}")
        self._log_quarantine(result, decided.quarantine, days)
        return Outcome(self._result(decided, result), summary)

    def _result(self, decided: _Decided, outcome: CleanJobResult) -> CleanResult:
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

    def _log_quarantine(self, outcome: CleanJobResult, root: str, days: float) -> None:
        """Say where the orphans went and how to bring them back, and what the purge removed."""
        if outcome.quarantine_run:
            self.say("%d orphan files moved to quarantine run %s (manifest %s), kept %g days. To put them back: "
                          "IcebergRestoreQuarantineOperator(table=%r, quarantine_run=%r%s).",
                          outcome.quarantined_file_count, outcome.quarantine_run, outcome.quarantine_manifest, days,
                          self.dotted, outcome.quarantine_run,
                          f", quarantine_location={self.quarantine_location!r}" if self.quarantine_location else "")
            self.log.info("By hand: python -m airflow_lake_provider.operators.restore %s %s",
                          self.dotted, outcome.quarantine_manifest)
        if outcome.purged_runs:
            self.say("%s %d quarantine runs past %g days under %s (%d files): %s.",
                          "Would purge" if self.dry_run else "Purged", len(outcome.purged_runs), days, root,
                          outcome.purged_file_count, ", ".join(outcome.purged_runs))

    def _expiry_settings(self) -> ExpirySettings | None:
        """What the expire step applied to main, read from its result (``None``: not given)."""
        if self.expire_result is None:
            return None
        expire = ExpireResult.from_json(self.expire_result)
        return ExpirySettings(expire.retention_source == "override", expire.retain_last, expire.max_snapshot_age_ms)


def _expiry_fields(expired: ExpiryOutcome) -> dict[str, Any]:
    """What the worker's expiry expired, deleted and removed, for the clean result (the table's
    snapshot after is the job's, read last)."""
    return {f.name: getattr(expired, f.name) for f in dataclasses.fields(ExpiryOutcome)
            if f.name != "snapshot_id_after"}
