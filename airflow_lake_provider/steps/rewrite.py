"""The rewrite step: compact the planned partitions of a table with Iceberg's ``RewriteDataFiles``."""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, cast

from airflow_lake_provider.core import step_names as names
from airflow_lake_provider.core.arrow_rewrite import REWRITERS, arrow_ineligibility, arrow_refusal
from airflow_lake_provider.core.coercion import OneOf, Seconds, whole_number
from airflow_lake_provider.core.contracts import (
    DEFAULT_COMMIT_RETRY,
    STRATEGIES,
    AirflowRun,
    PlannedPartition,
    PlanResult,
    RewriteJobArgs,
    RewriteResult,
)
from airflow_lake_provider.core.partitions import partition_id
from airflow_lake_provider.core.planning import RewriteOptions
from airflow_lake_provider.core.settings import default_of, setting
from airflow_lake_provider.core.snapshots import commits_tagged, parent_of, require_in_lineage, table_state
from airflow_lake_provider.exceptions import LakeConfigError
from airflow_lake_provider.steps.base import Outcome, Prepared, Step, StepFailed, TableReader

if TYPE_CHECKING:
    from pyiceberg.table import Table

#: Iceberg's size options a plan carries too: given in ``options``, each replaces only itself on top
#: of the plan's (a new target also moves the min/max sizes that followed the old one).
PLANNED_SIZE_OPTIONS = {
    "target-file-size-bytes": "target_file_size_bytes", "min-file-size-bytes": "min_file_size_bytes",
    "max-file-size-bytes": "max_file_size_bytes", "min-input-files": "min_input_files",
}
#: What the provider sets unless ``options`` does: one commit for the whole rewrite (Iceberg's
#: default too, made explicit in the XCom). ``use-starting-sequence-number`` is false unless given,
#: in the job itself (jobs/rewrite.py's SAFE_OPTION_DEFAULTS).
PROVIDER_OPTION_DEFAULTS = {"partial-progress.enabled": "false"}


def _job(name: str) -> Any:
    """The default of a setting the step hands to its job as it is: the job's own."""
    return default_of(RewriteJobArgs, name)


@dataclasses.dataclass(kw_only=True)
class RewriteStep(Step[RewriteJobArgs, RewriteResult]):
    """Compact a table's planned partitions with Iceberg's ``RewriteDataFiles`` in Spark.

    Before Spark, without a JVM: the plan is checked against the table's lineage (the planned
    snapshot must still be the current one or an ancestor), the job's arguments against the
    table, and a retried task that finds its own commits returns them instead of rewriting again
    (every commit carries snapshot summary properties naming the DAG run and task:
    ``airflow.dag-id``, ``airflow.run-id``, ``airflow.task-id``, ``airflow.map-index``). After: file
    groups Iceberg dropped under partial progress fail the step (``fail_on_dropped_groups``), so
    success never covers lost work.

    Returns :class:`~airflow_lake_provider.core.contracts.RewriteResult` (docs/operators/rewrite.md).
    """

    name: ClassVar[str] = names.REWRITE

    plan: dict[str, Any] | None = setting(None, wired=True, doc=(
        "The planning task's result (typically ``plan_task.output``). Without one, the whole table is "
        "rewritten with the table's sizes and ``options``. With one, the rewrite runs with the plan's options, "
        "and sizes given in ``options`` replace only themselves."))
    strategy: Annotated[str, OneOf(STRATEGIES)] = setting(_job("strategy"), doc=(
        "``binpack``, ``sort`` (by ``sort_order``, default the table's) or ``zorder`` (by ``zorder_columns``)."))
    sort_order: str | None = setting(_job("sort_order"), doc=(
        "With ``strategy='sort'``: e.g. ``event_ts DESC NULLS LAST, customer_id``; ``None``: the table's sort order."))
    zorder_columns: list[str] | None = setting(None, doc=(
        "With ``strategy='zorder'``: the columns to cluster by together."))
    rewrite_position_deletes: bool = setting(_job("rewrite_position_deletes"), doc=(
        "Also rewrite the position delete files of the planned partitions (``rewrite-all``; the whole table when "
        "the rewrite is not limited to partitions) in the same application: drops deletes made dangling by the "
        "rewrite, merges small ones."))
    drop_dangling_deletes: bool = setting(_job("drop_dangling_deletes"), doc=(
        "After the data rewrite, remove every delete file of the table that no live data file needs any more "
        "(position and equality deletes, deletion vectors), from metadata alone: nothing is read, no row changes "
        "(``dangling_deletes`` in the result)."))
    rewrite_manifests: bool = setting(_job("rewrite_manifests"), doc="Also rewrite manifests in the same application.")
    options: dict[str, Any] | None = setting(None, doc=(
        "Iceberg's own ``rewrite_data_files`` options, by Iceberg's keys: ``target-file-size-bytes``, "
        "``min-input-files``, ``partial-progress.enabled``, ``partial-progress.max-commits``, "
        "``max-concurrent-file-group-rewrites``... Set unless given here: ``partial-progress.enabled=false`` and "
        "``use-starting-sequence-number=false`` (Iceberg's true lets an equality delete committed during the "
        "rewrite, as Flink upserts do, be dropped by the rewrite's commit and its rows come back, "
        "apache/iceberg#10962; with false that delete is a commit conflict, retried)."))
    fail_on_dropped_groups: bool = setting(True, doc=(
        "Fail when file groups were left uncommitted (another writer changed their files under partial "
        "progress); the committed groups are kept and listed with the error. ``False``: a warning."))
    dry_run: bool = setting(False, doc="Check the plan and the table, report, rewrite nothing.")
    max_commit_attempts: int = setting(DEFAULT_COMMIT_RETRY.max_attempts, doc=(
        "Attempts when a commit conflicts with another writer; each retry plans the same partitions again from "
        "the current snapshot. After the last one the step fails naming the conflict and what to do."))
    commit_retry_backoff_seconds: Seconds = setting(DEFAULT_COMMIT_RETRY.retry_backoff_seconds, doc=(
        "Wait before the first retry in seconds, or a duration (``'5s'``), doubled for each further one (capped "
        "at 30 s)."))
    require_plan: bool = setting(False, wired=True, doc=(
        "Fail when no plan arrives instead of rewriting the whole table (the maintenance group sets it)."))
    rewriter: Annotated[str, OneOf(REWRITERS)] = setting(_job("rewriter"), doc=(
        "Who reads and writes the Parquet of a bin-pack rewrite. ``auto``: Arrow, with Iceberg's planner and "
        "Iceberg's validated commit, where the result is provably the same (format v1 to v3 with their deletes "
        "applied, v3 row lineage kept, one partition spec, no sort order, flat columns, local, S3, GCS or ADLS "
        "storage); Iceberg's Spark action "
        "for every other table, the reason in ``rewriter_note``. ``iceberg``: always Iceberg's Spark action. "
        "``arrow``: refuse a table Arrow cannot rewrite."))

    # -- before Spark ---------------------------------------------------------------------------
    def read_plan(self) -> PlanResult | None:
        """The planning task's result, read through :class:`PlanResult`; ``None``: no plan, the whole table."""
        if self.plan is None:
            if self.require_plan:
                raise LakeConfigError(
                    "No plan arrived from the planning task (it failed, or its result was cleared): not rewriting "
                    "the whole table without one. The plan task's log says why."
                )
            return None
        if "snapshot_id" not in self.plan or "groups" not in self.plan:
            raise LakeConfigError(
                "plan must be the planning task's result (a dict with 'snapshot_id' and 'groups'); "
                f"got keys {sorted(self.plan)}. Pass plan_task.output."
            )
        plan = PlanResult.from_json(self.plan)
        if plan.table and plan.table != self.dotted:
            raise LakeConfigError(f"The plan is for table {plan.table!r}, not {self.dotted!r}.")
        return plan

    def iceberg_options(self, table: Table, plan: PlanResult | None) -> dict[str, str]:
        """The Iceberg options the rewrite runs with: the plan's thresholds (the table's without a plan)
        with the sizes given in ``options`` (each replaces only itself: :meth:`RewriteOptions.merged`),
        the provider's defaults, then the rest of ``options`` as given, and ``output-spec-id`` made
        explicit."""
        given = {str(k): str(v) for k, v in (self.options or {}).items()}
        sizes = {field: whole_number(given.pop(key), f"options[{key!r}]")
                 for key, field in PLANNED_SIZE_OPTIONS.items() if key in given}
        planned = (RewriteOptions.from_iceberg_options(plan.options) if plan is not None and plan.options
                   else RewriteOptions.from_table_properties(dict(table.properties)))
        options = {**(plan.options if plan is not None else {}), **planned.merged(**sizes).to_iceberg_options(),
                   **PROVIDER_OPTION_DEFAULTS, **given}
        return self.with_output_spec(table, options)

    def with_output_spec(self, table: Table, options: dict[str, str]) -> dict[str, str]:
        """``options`` with ``output-spec-id`` made explicit: the current spec unless one is given.

        Iceberg writes onto the current spec by default too (files of older specs are regrouped
        onto it); naming the ID read here makes that visible in the XCom and keeps a spec evolved
        while the task runs from changing where the rows land. A spec the table does not have is
        refused before any JVM starts.
        """
        value = options.get("output-spec-id", table.spec().spec_id)
        specs = sorted(table.specs())
        try:
            spec_id = int(value)
        except (TypeError, ValueError):
            spec_id = None
        if spec_id not in specs:
            raise LakeConfigError(
                f"output-spec-id {value} is not a partition spec of {self.dotted}: its specs are "
                f"{specs} (current: {table.spec().spec_id}). Leave it out to compact onto the current spec."
            )
        return {**options, "output-spec-id": str(spec_id)}

    def planned_partitions(self, table: Table, plan: PlanResult | None) -> tuple[PlannedPartition, ...] | None:
        """The partitions of the plan's groups, once each; ``None`` (no plan, or older specs): the whole table."""
        if plan is None:
            return None
        unique = {partition_id(g.spec_id, g.partition): PlannedPartition(g.spec_id, g.partition)
                  for g in plan.groups}
        if len(table.specs()) > 1 and any(all(v is None for v in p.partition.values()) for p in unique.values()):
            # Iceberg groups files of older partition specs under the current spec's all-null
            # partition; no partition predicate selects them, so this rewrite covers the table.
            self.log.info("The plan holds files of an older partition spec: rewriting without a partition filter.")
            return None
        return tuple(unique.values())

    def job_args(self, table: Table, plan: PlanResult | None, snapshot_properties: dict[str, str]) -> RewriteJobArgs:
        """The ``rewrite`` job's arguments, checked against the table (no JVM)."""
        args = RewriteJobArgs(
            table=self.dotted,
            planned_snapshot_id=plan.snapshot_id if plan is not None else None,
            partitions=self.planned_partitions(table, plan),
            strategy=self.strategy,
            sort_order=self.sort_order,
            zorder_columns=tuple(self.zorder_columns or ()),
            options=self.iceberg_options(table, plan),
            rewrite_position_deletes=self.rewrite_position_deletes,
            drop_dangling_deletes=self.drop_dangling_deletes,
            rewrite_manifests=self.rewrite_manifests,
            snapshot_properties=snapshot_properties,
            max_attempts=self.max_commit_attempts,
            retry_backoff_seconds=cast("float", self.commit_retry_backoff_seconds),  # read as seconds
            rewriter=self.rewriter,
        ).validate()
        args.check_columns([f.name for f in table.schema().fields])
        if args.rewriter == "iceberg":
            return args
        reason = arrow_ineligibility_of(table, args)
        if reason is not None and args.rewriter == "arrow":
            raise LakeConfigError(arrow_refusal(self.dotted, reason))
        return dataclasses.replace(args, arrow_expected=reason is None)

    def prepare(self, reader: TableReader, run: AirflowRun | None) -> Prepared[RewriteJobArgs, RewriteResult]:
        """The plan checked against the table, the job's arguments, and the outcome when no job is
        needed (a dry run, an empty plan, or this task's own commits found from an earlier try)."""
        plan = self.read_plan()
        table = reader.load_table()
        if plan is not None and plan.snapshot_id is not None:
            require_in_lineage(table, plan.snapshot_id, table_name=self.dotted)
        args = self.job_args(table, plan, run.snapshot_properties() if run else {})
        before = table_state(table)
        if self.dry_run or (plan is not None and plan.is_empty):
            self.log.info(
                "Dry run: nothing rewritten." if self.dry_run else "The plan has no file groups: nothing to rewrite."
            )
            current = table.current_snapshot()
            return Prepared(before, done=Outcome(
                RewriteResult.nothing_done(args, current.snapshot_id if current else None, dry_run=self.dry_run),
                "dry run, nothing rewritten" if self.dry_run else "nothing to rewrite", changed=False))
        earlier = commits_tagged(table, args.snapshot_properties, after=args.planned_snapshot_id)
        if earlier:
            self.log.info("Found this task's own commits from an earlier try (%s): not rewriting again.",
                          [s.snapshot_id for s in earlier])
            recovered = _recovered(table, args, earlier)
            return Prepared(before, done=Outcome(
                recovered, f"an earlier try already committed {list(recovered.committed_snapshot_ids)}", changed=False))
        return Prepared(before, args=args)

    # -- after Spark ----------------------------------------------------------------------------
    def finish(
        self, prepared: Prepared[RewriteJobArgs, RewriteResult], result: RewriteResult
    ) -> Outcome[RewriteResult]:
        """Say what the job did, and fail when file groups were left uncommitted
        (``fail_on_dropped_groups``; the partial result goes with the error)."""
        self.log.info(
            "Rewrote %s data files (%s bytes) into %s; removed %s delete files; commits %s; snapshot %s -> %s.",
            result.rewritten_data_files, result.rewritten_bytes, result.added_data_files, result.removed_delete_files,
            list(result.committed_snapshot_ids), result.snapshot_id_before, result.snapshot_id_after,
        )
        conflicts = [a for a in result.attempts if a["outcome"] == "conflict" or a["detail"]]
        if conflicts:
            self.log.warning("The rewrite met concurrent commits and tried again: %s", conflicts)
        dangling = result.dangling_deletes
        if dangling and dangling["removed_delete_files"]:
            self.log.info("Removed %s delete files no live data file needed (%s position, %s equality), from "
                          "metadata; %s delete files are still in use.", dangling["removed_delete_files"],
                          dangling["removed_position_delete_files"], dangling["removed_equality_delete_files"],
                          dangling["kept_delete_files"])
        if result.position_deletes and result.position_deletes.get("skipped"):
            self.log.warning("Position deletes of %s %s", self.dotted, result.position_deletes["skipped"])
        if result.failed_groups:
            detail = "; ".join(
                f"{g.get('partition') or '(unpartitioned)'}: {g['reason']}" for g in result.failed_groups
            )
            message = (
                f"{len(result.failed_groups)} file groups of {self.dotted} were not committed ({detail}). "
                "Another writer changed the same files; the committed groups are kept. Re-run to plan the rest, "
                "narrow partition_filter, or schedule compaction away from the writer."
            )
            if self.fail_on_dropped_groups:
                raise StepFailed(message, job=self.name, partial_result=result)
            self.log.warning("%s", message)
        return Outcome(result, (
            f"rewrote {result.rewritten_data_files:,} data files ({result.rewritten_bytes:,} bytes) into "
            f"{result.added_data_files:,}, removed {result.removed_delete_files:,} delete files, "
            f"{len(result.committed_snapshot_ids)} commits"))


def arrow_ineligibility_of(table: Table, args: RewriteJobArgs) -> str | None:
    """:func:`~airflow_lake_provider.core.arrow_rewrite.arrow_ineligibility` from PyIceberg's view of the table."""
    return arrow_ineligibility(
        strategy=args.strategy, schema=json.loads(table.schema().model_dump_json()),
        properties=dict(table.properties), format_version=int(table.metadata.format_version),
        current_spec_id=table.spec().spec_id,
        sort_order_fields=len(table.sort_order().fields),
        location=table.location(), options=args.options, planner_options=None)


def _recovered(table: Table, args: RewriteJobArgs, commits: list[Any]) -> RewriteResult:
    """The result of an earlier try's ``commits`` (PyIceberg snapshots, oldest first), from their summaries."""
    before = parent_of(table, commits[0])
    return RewriteResult.recovered(
        args, before.snapshot_id if before is not None else None,
        [(s.snapshot_id, {"operation": s.summary.operation.value, **s.summary.additional_properties}
          if s.summary is not None else {}) for s in commits],
    )


