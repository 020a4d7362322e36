"""Many tables per task: the fleet's plan and rewrite, without Airflow.

Each table goes through exactly the steps a single-table run makes (:class:`~airflow_lake_provider.steps.plan.PlanStep`,
:class:`~airflow_lake_provider.steps.rewrite.RewriteStep`, one per table); what the tables share is
one task and, for the rewrites, one ``batch`` Spark application. A table that fails does not stop
the others: its failure is collected with why, and the others are maintained. The fleet operators
(:mod:`airflow_lake_provider.operators.fleet`) hand in how to read a table, run a job and hold the
leases, push what comes back and fail the task when a table failed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow_lake_provider.core import step_names as names
from airflow_lake_provider.core.contracts import AirflowRun, RewriteResult
from airflow_lake_provider.core.job_registry import batch_of
from airflow_lake_provider.core.lease import LeaseSettings
from airflow_lake_provider.core.settings import settings_of
from airflow_lake_provider.exceptions import LakeJobError, LakePlanRefused
from airflow_lake_provider.steps.base import Prepared, StepLog, TableReader
from airflow_lake_provider.steps.plan import PlanStep
from airflow_lake_provider.steps.rewrite import RewriteStep
from airflow_lake_provider.steps.runner import JobRunner, StepRun, complete, run_step

if TYPE_CHECKING:
    from airflow_lake_provider.hooks.lease import HeldLeases

#: The lease settings the fleet's rewrite takes: it never waits for a table (``on_busy`` is always
#: ``"skip"``), a table another run holds is left for the next run.
FLEET_LEASE_SETTINGS = tuple(s for s in settings_of(LeaseSettings) if s.name in ("ttl_seconds", "holder"))

#: How the fleet reads a table (``namespace.table``) for its step.
ReaderOf = Callable[[str], TableReader]


@dataclasses.dataclass
class TableChange:
    """A table a fleet step changed: its state before and after, and the step's result (its asset event)."""

    table: str
    before: dict[str, Any]
    after: dict[str, Any]
    result: dict[str, Any]


@dataclasses.dataclass
class FleetRun:
    """What a fleet step gave: the results (JSON) of the tables it maintained, in the order given; the
    tables it could not maintain, with why; the tables another run's lease kept it from, with the
    sentence naming the holder; and the tables it changed."""

    results: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    failures: dict[str, str] = dataclasses.field(default_factory=dict)
    busy: dict[str, str] = dataclasses.field(default_factory=dict)
    changed: list[TableChange] = dataclasses.field(default_factory=list)

    def failed(self, where: str) -> LakeJobError | None:
        """The error that fails the fleet's task ``where`` when some table failed, naming each with why."""
        if not self.failures:
            return None
        return LakeJobError(f"{len(self.failures)} of {len(self.failures) + len(self.results)} tables were not "
                            f"maintained by {where}: " + "; ".join(f"{t}: {why}" for t, why in self.failures.items()))

    def keep(self, ran: StepRun) -> dict[str, Any]:
        """The result of a table's step run, its before -> after kept for its asset event."""
        data = ran.result.to_json()
        assert ran.after is not None, "a rewrite always has a summary"
        self.changed.append(TableChange(data["table"], ran.before, ran.after, data))
        return data


def plan_fleet(tables: Sequence[str], settings: Mapping[str, Any] | None, *, data_interval: tuple[Any, Any],
               reader_of: ReaderOf, run: AirflowRun | None, run_job: JobRunner, log: StepLog) -> FleetRun:
    """Plan each table (each once, in the order given) as a single-table plan does; a table that
    cannot be planned (missing, unreadable, a refused plan) is a failure, the others are planned."""
    planned = FleetRun()
    for table in dict.fromkeys(tables):
        try:
            step = PlanStep.build(table=table, log=log, **(settings or {}))
            step = dataclasses.replace(step, data_interval=data_interval)
            planned.results.append(run_step(step, reader_of(table), run, run_job).result.to_json())
        except LakePlanRefused as refusal:
            planned.failures[table] = f"plan refused: {refusal}"
        except Exception as error:  # one table's failure is reported, the others planned
            log.exception("Could not plan %s.", table)
            planned.failures[table] = f"{type(error).__name__}: {error}"
    work = [plan for plan in planned.results if plan["groups"]]
    log.info("Planned %d tables: %d with file groups to compact (%s), %d failed.", len(planned.results), len(work),
             ", ".join(plan["table"] for plan in work) or "none", len(planned.failures))
    return planned


def rewrite_fleet(work: Sequence[Mapping[str, Any]], settings: Mapping[str, Any] | None, *, lease: LeaseSettings,
                  leases: HeldLeases, release_leases: bool, reader_of: ReaderOf, run: AirflowRun,
                  run_job: JobRunner, log: StepLog) -> FleetRun:
    """Compact the tables of ``work`` (``{"table", "plan"}`` items or plain plans; a plan without file
    groups is left alone) with their rewrite jobs in one ``batch`` application.

    Per table, before any JVM: take its lease (held by another run: left, listed in ``busy``),
    prepare its step (a refusal is a failure, its lease given back); a step that needs no job (an
    earlier try's commits) is finished at once. Then one ``run_job`` runs every prepared table's job,
    and each outcome is finished by its table's step. A failed table's lease is given back at once,
    every lease when this raises; at the end all of them when a table failed or ``release_leases``,
    else each result hands its table's lease on (``lease``).
    """
    done = FleetRun()
    results: dict[str, dict[str, Any]] = {}
    ready: list[tuple[RewriteStep, Prepared]] = []
    holder = lease.holder_name(run)
    plans = [item.get("plan", item) for item in work]  # {"table", "plan"} items, or plain plans
    tables = [(item.get("table") or plan.get("table"), plan) for item, plan in zip(work, plans, strict=True)]
    try:
        for table, plan in tables:
            if not plan.get("groups"):
                continue
            try:
                busy_with = leases.take(table, holder, lease)
                if busy_with is not None:
                    log.info("%s Left for the next run.", busy_with.sentence)
                    done.busy[table] = busy_with.sentence
                    continue
                step = RewriteStep.build(table=table, log=log, **(settings or {}))
                step = dataclasses.replace(step, plan=plan, require_plan=True)
                prepared = step.prepare(reader_of(table), run)
            except Exception as error:  # noqa: BLE001 - refused before Spark; the others go on
                done.failures[table] = f"{type(error).__name__}: {error}"
                leases.release(table)
                continue
            if prepared.done is not None:
                results[table] = done.keep(complete(step, reader_of(table), prepared))
            else:
                ready.append((step, prepared))
        if ready:
            _run_batch(ready, results, done, leases=leases, reader_of=reader_of, run_job=run_job, log=log)
    except BaseException:
        leases.release_all()  # the run stops here: nothing downstream will release them
        raise
    if done.failures or release_leases:  # failing, no expiry or release of this run follows
        leases.release_all()
    done.results = [{**results[table], "lease": held.to_json() if (held := leases.of(table)) else None}
                    for table, _ in tables if table in results]
    return done


def _run_batch(ready: list[tuple[RewriteStep, Prepared]], results: dict[str, dict[str, Any]], done: FleetRun, *,
               leases: HeldLeases, reader_of: ReaderOf, run_job: JobRunner, log: StepLog) -> None:
    """The tables' rewrite jobs in one ``batch`` application; each outcome finished by its table's step."""
    # Every prepared step here has its job's args (a prepared step has either args or an outcome).
    batch = batch_of([prepared.args for _, prepared in ready if prepared.args is not None])
    log.info("Compacting %d tables in one Spark application: %s.", len(ready),
             ", ".join(step.dotted for step, _ in ready))
    outcomes = run_job(batch).outcomes
    for (step, prepared), outcome in zip(ready, outcomes, strict=True):
        try:
            if outcome.failed:
                raise LakeJobError(f"{outcome.error_class}: {outcome.message}", job=names.REWRITE)
            results[step.table] = done.keep(complete(step, reader_of(step.table), prepared,
                                                     RewriteResult.from_json(outcome.result)))
        except LakeJobError as error:  # failed in Spark, or file groups left uncommitted
            done.failures[step.table] = str(error)
            leases.release(step.table)
