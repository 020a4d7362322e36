"""Maintain many tables with one task per step: plan them all in the worker, compact the ones
that need it in one Spark application.

A fleet of small tables pays per table for what does not depend on the table: an Airflow task
(a process, its imports, its database rows) and, for the heavy steps, a JVM start (5-7 s on 2
cores) that can cost more than the compaction itself. These operators keep every table's checks
exactly as the single-table operators make them and share what is shared: one task, and one
``batch`` application (:mod:`airflow_lake_provider.steps.fleet` runs the tables' steps).

A table that fails does not stop the others: each operator finishes the fleet, returns (pushes)
the results of the tables that succeeded, then fails naming the ones that did not, so the run
is not green while every other table was still maintained.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from airflow_lake_provider.assets import announce_table_change, maintenance_alias
from airflow_lake_provider.core import step_names as names
from airflow_lake_provider.core.lease import LeaseSettings
from airflow_lake_provider.core.settings import read_settings, takes_settings, with_params
from airflow_lake_provider.operators.base import LakeSparkOperator, airflow_run, task_run
from airflow_lake_provider.steps.fleet import FLEET_LEASE_SETTINGS, FleetRun, TableChange, plan_fleet, rewrite_fleet
from airflow_lake_provider.steps.plan import PlanStep
from airflow_lake_provider.steps.rewrite import RewriteStep

if TYPE_CHECKING:
    from airflow.sdk import Context

#: The XCom key where a fleet step lists the tables it could not maintain, with why.
FAILURES_XCOM_KEY = "failures"
#: The XCom key where the fleet rewrite lists the tables it left because another run held their lease.
BUSY_XCOM_KEY = "busy"


class _FleetStep(LakeSparkOperator):
    """What both fleet steps share: one step per table, failures collected."""

    def end(self, context: Context, fleet: FleetRun) -> list[dict[str, Any]]:
        """Return the results; with failures, push them (the downstream still gets the rest) and fail."""
        context["ti"].xcom_push(key=FAILURES_XCOM_KEY, value=fleet.failures)
        if (failed := fleet.failed(self.task_id)) is None:
            return fleet.results
        context["ti"].xcom_push(key="return_value", value=fleet.results)
        raise failed


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
        interval = (context.get("data_interval_start"), context.get("data_interval_end"))
        planned = plan_fleet(self.tables, self.plan_settings, data_interval=interval, run=airflow_run(context),
                             reader_of=self.lake_hook.table_reader, run_job=self.run_job, log=self.log)
        return self.end(context, planned)


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
    :param release_leases: give each compacted table's lease back when the task ends (default);
        ``False`` hands them on in the results, and then something downstream must release them
        (templated).

    The lease settings ``ttl_seconds`` and ``holder`` (templated) are
    :class:`~airflow_lake_provider.core.lease.LeaseSettings`' (the acquire operator's):
    """

    template_fields: Sequence[str] = (*LakeSparkOperator.template_fields, "work", "rewrite_settings",
                                      *(s.name for s in FLEET_LEASE_SETTINGS), "release_leases")
    template_fields_renderers = {**LakeSparkOperator.template_fields_renderers, "work": "json",
                                 "rewrite_settings": "json"}

    @takes_settings(FLEET_LEASE_SETTINGS)
    def __init__(self, *, work: Sequence[dict[str, Any]] | str, rewrite_settings: dict[str, Any] | None = None,
                 release_leases: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.work = work
        self.rewrite_settings = rewrite_settings
        if isinstance(rewrite_settings, Mapping):  # the plan comes with each table's work
            RewriteStep.check(rewrite_settings, where=f"{self.task_id}: rewrite_settings")
        self.release_leases = release_leases
        self._changed: list[TableChange] = []
        self.outlets = [*self.outlets, maintenance_alias()]

    def execute(self, context: Context) -> list[dict[str, Any]]:
        self.coerce_rendered_fields()
        lease = read_settings(LeaseSettings, self, on_busy="skip")
        work = cast("Sequence[dict[str, Any]]", self.work)  # a list once coerce_rendered_fields read the rendered text
        fleet = rewrite_fleet(work, self.rewrite_settings, lease=lease, leases=self.leases,
                              release_leases=self.release_leases, reader_of=self.lake_hook.table_reader,
                              run=task_run(context), run_job=self.run_job, log=self.log)
        self._changed = fleet.changed
        context["ti"].xcom_push(key=BUSY_XCOM_KEY, value=fleet.busy)
        return self.end(context, fleet)

    def post_execute(self, context: Context, result: Any = None) -> None:
        """An asset event for each table the run changed, as the single-table rewrite emits."""
        super().post_execute(context, result)
        for change in self._changed:
            announce_table_change(context, self.lake_hook, names.REWRITE, change.table, change.before, change.after,
                                  change.result, self.log)


IcebergFleetRewriteOperator.__doc__ = with_params(IcebergFleetRewriteOperator.__doc__, FLEET_LEASE_SETTINGS)
