"""Maintain many tables with one task per step: plan them all in the worker, compact the ones
that need it in one Spark application.

A fleet of small tables pays per table for what does not depend on the table: an Airflow task
(a process, its imports, its database rows) and, for the heavy steps, a JVM start (5-7 s on 2
cores) that can cost more than the compaction itself. These operators keep every table's checks
exactly as the single-table operators make them (they run the same steps,
:class:`~airflow_lake_provider.steps.plan.PlanStep` and
:class:`~airflow_lake_provider.steps.rewrite.RewriteStep`, one per table) and share what is
shared: one task, and one ``batch`` application.

A table that fails does not stop the others: each operator finishes the fleet, returns (pushes)
the results of the tables that succeeded, then fails naming the ones that did not, so the run
is not green while every other table was still maintained.
"""

from __future__ import annotations

import dataclasses
import socket
from collections.abc import Mapping, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any, cast

from airflow_lake_provider.assets import announce_table_change, maintenance_alias
from airflow_lake_provider.core import step_names as names
from airflow_lake_provider.core.coercion import Seconds
from airflow_lake_provider.core.contracts import RewriteResult
from airflow_lake_provider.core.identifiers import TableIdentifier
from airflow_lake_provider.core.job_registry import batch_of
from airflow_lake_provider.core.lease import DEFAULT_TTL_SECONDS, Lease, LeaseSettings
from airflow_lake_provider.exceptions import LakeJobError, LakePlanRefused
from airflow_lake_provider.hooks.lease import HeldLeases, TableLeaseHook
from airflow_lake_provider.operators.base import LakeSparkOperator, LakeTable, airflow_run, task_run
from airflow_lake_provider.steps.base import Prepared
from airflow_lake_provider.steps.plan import PlanStep
from airflow_lake_provider.steps.rewrite import RewriteStep
from airflow_lake_provider.steps.runner import StepRun, complete, run_step

if TYPE_CHECKING:
    from airflow.sdk import Context

#: The XCom key where a fleet step lists the tables it could not maintain, with why.
FAILURES_XCOM_KEY = "failures"
#: The XCom key where the fleet rewrite lists the tables it left because another run held their lease.
BUSY_XCOM_KEY = "busy"


class _FleetStep(LakeSparkOperator):
    """What both fleet steps share: one step per table, failures collected."""

    def lake_table(self, table: str) -> LakeTable:
        return LakeTable(self.lake_hook, TableIdentifier.parse(table))

    def end(self, context: Context, results: list[dict[str, Any]], failures: dict[str, str]) -> list[dict[str, Any]]:
        """Return the results; with failures, push them (the downstream still gets the rest) and fail."""
        context["ti"].xcom_push(key=FAILURES_XCOM_KEY, value=failures)
        if not failures:
            return results
        context["ti"].xcom_push(key="return_value", value=results)
        raise LakeJobError(f"{len(failures)} of {len(failures) + len(results)} tables were not maintained by "
                           f"{self.task_id}: " + "; ".join(f"{table}: {why}" for table, why in failures.items()))


class IcebergFleetPlanOperator(_FleetStep):
    """Plan the compaction of every table of a fleet in one task, each exactly as
    :class:`~airflow_lake_provider.operators.plan.IcebergRewritePlanOperator` plans it.

    Returns the list of plans, in the order of ``tables`` (each
    :class:`~airflow_lake_provider.core.contracts.PlanResult` as JSON). A table that cannot be
    planned (missing, unreadable, a refused plan) is listed with why in the XCom key
    ``failures``; the others are planned and returned, then the task fails.

    :param tables: ``namespace.table`` names (templated; an ``XComArg`` of a listing task).
    :param plan_settings: the plan step's settings for every table (``min_input_files``,
        ``max_files``, ``engine``...; docs/operators/plan.md#settings; templated).
    """

    template_fields: Sequence[str] = (*LakeSparkOperator.template_fields, "tables", "plan_settings")
    template_fields_renderers = {**LakeSparkOperator.template_fields_renderers, "tables": "json",
                                 "plan_settings": "json"}

    def __init__(self, *, tables: Sequence[str] | str, plan_settings: dict[str, Any] | None = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.tables = tables
        self.plan_settings = plan_settings
        if isinstance(plan_settings, Mapping):
            PlanStep.check(plan_settings, where=f"{self.task_id}: plan_settings")

    def execute(self, context: Context) -> list[dict[str, Any]]:
        self.coerce_rendered_fields()
        plans, failures = [], {}
        run = airflow_run(context)
        interval = (context.get("data_interval_start"), context.get("data_interval_end"))
        for table in dict.fromkeys(self.tables):
            try:
                step = PlanStep.build(table=table, log=self.log, **(self.plan_settings or {}))
                step = dataclasses.replace(step, data_interval=interval)
                plans.append(run_step(step, self.lake_table(table), run, self.run_job).result.to_json())
            except LakePlanRefused as refusal:
                failures[table] = f"plan refused: {refusal}"
            except Exception as error:  # one table's failure is reported, the others planned
                self.log.exception("Could not plan %s.", table)
                failures[table] = f"{type(error).__name__}: {error}"
        work = [plan for plan in plans if plan["groups"]]
        self.log.info("Planned %d tables: %d with file groups to compact (%s), %d failed.", len(plans), len(work),
                      ", ".join(plan["table"] for plan in work) or "none", len(failures))
        return self.end(context, plans, failures)


class IcebergFleetRewriteOperator(_FleetStep):
    """Compact several tables in one Spark application: one JVM start for all of them.

    Each table goes through exactly the checks of
    :class:`~airflow_lake_provider.operators.rewrite.IcebergRewriteDataFilesOperator` before
    any JVM starts (the plan against the table's lineage, the job's arguments, this task's own
    commits from an earlier try, which are returned instead of rewriting again); then one
    ``batch`` application runs the tables' ``rewrite`` jobs one after another, each with its own
    commit checks, conflict retries and snapshot properties. What a table's rewrite guarantees
    alone, it guarantees here.

    **One maintenance run per table** (docs/lease.md): before preparing a table it takes the
    table's maintenance lease, as the acquire task of a single-table run does. A table another
    run holds is left for the next run (listed with the holder in the XCom key ``busy``; not a
    failure). The leases are renewed while the batch runs (a lost one stops it) and given back when
    the task ends; with ``release_leases=False`` they are handed on instead, in each result's
    ``lease`` key, for the table's expiry and an :class:`IcebergReleaseLeaseOperator` after it (as
    ``lake_fleet_maintenance`` does). A table that fails, or every table when the task fails, has
    its lease given back at once.

    Returns one :class:`~airflow_lake_provider.core.contracts.RewriteResult` (JSON, with the
    table's ``lease``) per table that was compacted, in the order of ``work``; failures as in
    :class:`IcebergFleetPlanOperator`.
    After a successful run, an asset event for every table it changed (docs/assets.md); a run
    that fails for some table emits none (Airflow keeps outlet events of successful tasks only).

    :param work: ``[{"table": ..., "plan": ...}]`` or plain plans (the fleet plan's results;
        templated). Tables whose plan has no file groups are left alone.
    :param rewrite_settings: the rewrite step's settings for every table (``strategy``,
        ``options``...; docs/operators/rewrite.md#settings; templated).
    :param ttl_seconds: how long each table's lease lives unless renewed (templated), as
        :class:`~airflow_lake_provider.operators.lease.IcebergAcquireLeaseOperator` names it.
    :param holder: who this Airflow deployment is, the first part of the lease holder's name
        (templated); default: the worker's host name.
    :param release_leases: give each compacted table's lease back when the task ends (default);
        ``False`` hands them on in the results, and then something downstream must release them
        (templated).
    """

    template_fields: Sequence[str] = (*LakeSparkOperator.template_fields, "work", "rewrite_settings",
                                      "ttl_seconds", "holder", "release_leases")
    template_fields_renderers = {**LakeSparkOperator.template_fields_renderers, "work": "json",
                                 "rewrite_settings": "json"}

    def __init__(self, *, work: Sequence[dict[str, Any]] | str, rewrite_settings: dict[str, Any] | None = None,
                 ttl_seconds: Seconds = DEFAULT_TTL_SECONDS, holder: str | None = None,
                 release_leases: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.work = work
        self.rewrite_settings = rewrite_settings
        if isinstance(rewrite_settings, Mapping):  # the plan comes with each table's work
            RewriteStep.check(rewrite_settings, where=f"{self.task_id}: rewrite_settings")
        self.ttl_seconds = ttl_seconds
        self.holder = holder
        self.release_leases = release_leases
        # table, before, after, result
        self._changed: list[tuple[str, dict[str, Any], dict[str, Any], dict[str, Any]]] = []
        self.outlets = [*self.outlets, maintenance_alias()]

    @cached_property
    def leases(self) -> HeldLeases:
        return HeldLeases(TableLeaseHook(self.lake_hook), self.log)

    def held_leases(self) -> list[Lease]:
        return self.leases.held()

    def keep_lease(self, lease: Lease) -> None:
        self.leases.keep(lease)

    def execute(self, context: Context) -> list[dict[str, Any]]:
        self.coerce_rendered_fields()
        settings = LeaseSettings.checked(self.ttl_seconds, "skip")
        ti = context["ti"]
        run = task_run(context)
        holder = run.lease_holder(self.holder or socket.gethostname())
        results: dict[str, dict[str, Any]] = {}
        failures: dict[str, str] = {}
        busy: dict[str, str] = {}
        ready: list[tuple[RewriteStep, Prepared]] = []
        items = cast("Sequence[dict[str, Any]]", self.work)  # a list once coerce_rendered_fields read the rendered text
        plans = [item.get("plan", item) for item in items]  # {"table", "plan"} items, or plain plans
        work = [(item.get("table") or plan.get("table"), plan) for item, plan in zip(items, plans, strict=True)]
        try:
            for table, plan in work:
                if not plan.get("groups"):
                    continue
                try:
                    busy_with = self.leases.take(table, holder, settings)
                    if busy_with is not None:
                        self.log.info("%s Left for the next run.", busy_with.sentence)
                        busy[table] = busy_with.sentence
                        continue
                    step = RewriteStep.build(table=table, log=self.log, **(self.rewrite_settings or {}))
                    step = dataclasses.replace(step, plan=plan, require_plan=True)
                    prepared = step.prepare(self.lake_table(table), run)
                except Exception as error:  # noqa: BLE001 - refused before Spark; the others go on
                    failures[table] = f"{type(error).__name__}: {error}"
                    self.leases.release(table)
                    continue
                if prepared.done is not None:
                    results[table] = self._keep(complete(step, self.lake_table(table), prepared))
                else:
                    ready.append((step, prepared))
            if ready:
                self._run_batch(ready, results, failures)
        except BaseException:
            self.leases.release_all()  # the run stops here: nothing downstream will release them
            raise
        ti.xcom_push(key=BUSY_XCOM_KEY, value=busy)
        if failures or self.release_leases:  # failing below, no expiry or release of this run follows
            self.leases.release_all()
        compacted = [{**results[table], "lease": lease.to_json() if (lease := self.leases.of(table)) else None}
                     for table, _ in work if table in results]
        return self.end(context, compacted, failures)

    def _run_batch(self, ready: list[tuple[RewriteStep, Prepared]], results: dict[str, dict[str, Any]],
                   failures: dict[str, str]) -> None:
        """The tables' rewrite jobs in one ``batch`` application; each outcome finished by its table's step."""
        # Every prepared step here has its job's args (a prepared step has either args or an outcome).
        batch = batch_of([prepared.args for _, prepared in ready if prepared.args is not None])
        self.log.info("Compacting %d tables in one Spark application: %s.", len(ready),
                      ", ".join(step.dotted for step, _ in ready))
        outcomes = self.run_job(batch).outcomes
        for (step, prepared), outcome in zip(ready, outcomes, strict=True):
            try:
                if outcome.failed:
                    raise LakeJobError(f"{outcome.error_class}: {outcome.message}", job=names.REWRITE)
                ran = complete(step, self.lake_table(step.table), prepared, RewriteResult.from_json(outcome.result))
                results[step.table] = self._keep(ran)
            except LakeJobError as error:  # failed in Spark, or file groups left uncommitted
                failures[step.table] = str(error)
                self.leases.release(step.table)

    def _keep(self, ran: StepRun) -> dict[str, Any]:
        """The table's result, its before -> after kept for its asset event."""
        data = ran.result.to_json()
        assert ran.after is not None, "a rewrite always has a summary"
        self._changed.append((data["table"], ran.before, ran.after, data))
        return data

    def post_execute(self, context: Context, result: Any = None) -> None:
        """An asset event for each table the run changed, as the single-table rewrite emits."""
        super().post_execute(context, result)
        for table, before, after, data in self._changed:
            announce_table_change(context, self.lake_hook, names.REWRITE, table, before, after, data, self.log)
