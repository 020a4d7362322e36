"""The plan step: which data files of a table a compaction should rewrite, the way Iceberg plans it."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Annotated, Any, ClassVar

from airflow_lake_provider.core import step_names as names
from airflow_lake_provider.core.coercion import OneOf
from airflow_lake_provider.core.contracts import (
    AirflowRun,
    PartitionPredicates,
    PlanResult,
    PlanScope,
    SparkPlanJobArgs,
    SparkPlanJobResult,
)
from airflow_lake_provider.core.engines import ENGINES, Engine
from airflow_lake_provider.core.partition_sql import spark_partition_predicates
from airflow_lake_provider.core.planning import (
    RewriteOptions,
    equality_deletes_refusal,
    parse_partition_filter,
    plan_table,
)
from airflow_lake_provider.core.scoping import combine_filters, interval_filter, partition_fields_of
from airflow_lake_provider.core.settings import setting
from airflow_lake_provider.core.snapshots import has_equality_deletes, summary_int, table_state
from airflow_lake_provider.exceptions import LakeConfigError, LakePlanRefused
from airflow_lake_provider.steps.base import Outcome, Prepared, Step, TableReader

if TYPE_CHECKING:
    from pyiceberg.table import Table

SCOPES = ("auto", "interval", "table")
Scope = Annotated[str, OneOf(SCOPES)]
#: ``engine="auto"`` plans in Spark from this many live data files (snapshot summary) on. Basis:
#: docs/benchmarks.md, 2 cores: PyIceberg needs about 0.065-0.08 s and 3.3 MB per 1,000 files
#: (6.5-8 s and ~340 MB of planning at 100k; 19.5-21.7 s and ~1 GB at 300k), a Spark plan a
#: spark-submit plus a slow-growing part (12-30 s at 100k, 15-16 s at 300k: noisy). The two
#: took the same time near 200k files; there PyIceberg's planning needs ~0.65 GB of the worker.
AUTO_SPARK_MIN_DATA_FILES = 200_000
#: The same decision by manifest count (PyIceberg opens every manifest). Not measured: a guard
#: for tables with very many small manifests, left well above anything the benchmark built.
AUTO_SPARK_MIN_MANIFESTS = 20_000


def choose_engine(engine: str, *, data_files: int, manifests: int) -> str:
    """The engine that plans: ``auto`` takes Spark only where PyIceberg's time or memory would hurt.

    A spark-submit costs a fixed 5-14 s; PyIceberg costs about 0.1 s and 3-4 MB per 1,000 files,
    all in the Airflow worker. Below the thresholds PyIceberg is faster and its memory is modest.
    """
    if engine not in ENGINES:
        raise LakeConfigError(f"engine must be one of {', '.join(ENGINES)}; got {engine!r}.")
    if engine != "auto":
        return engine
    large = data_files >= AUTO_SPARK_MIN_DATA_FILES or manifests >= AUTO_SPARK_MIN_MANIFESTS
    return "spark" if large else "pyiceberg"


@dataclasses.dataclass(frozen=True)
class _Planning:
    """What prepare read, for finish: the plan falls back to PyIceberg when Spark cannot plan the filter."""

    table: Table
    options: RewriteOptions
    row_filter: str | None
    interval_filter: str | None


@dataclasses.dataclass(kw_only=True)
class PlanStep(Step[SparkPlanJobArgs, PlanResult]):
    """Plan which data files of a table a compaction should rewrite, the way Iceberg plans it.

    Groups candidate files by partition, bin-packs them and keeps the groups worth rewriting, in
    the worker with PyIceberg or in the ``plan`` Spark job for very large tables and tables with
    equality deletes; both give the same plan. Returns
    :class:`~airflow_lake_provider.core.contracts.PlanResult` (docs/operators/plan.md). A plan
    that cannot be made because of what the table holds raises
    :class:`~airflow_lake_provider.exceptions.LakePlanRefused`.
    """

    name: ClassVar[str] = names.PLAN

    target_file_size_bytes: int | None = setting(None, doc="Default: the table's ``write.target-file-size-bytes``.")
    min_file_size_bytes: int | None = setting(None, doc="Files below are candidates (default 75% of the target).")
    max_file_size_bytes: int | None = setting(None, doc="Files above are candidates (default 180% of the target).")
    min_input_files: int | None = setting(None, doc="A group needs this many files to be rewritten (default 5).")
    max_file_group_size_bytes: int | None = setting(None, doc="Largest group (default 100 GiB).")
    max_file_group_input_files: int | None = setting(None, doc=(
        "Most files in one group (default: no cap; Iceberg 1.12's ``max-file-group-input-files``). Caps what one "
        "group's task reads and commits in a partition of very many small files, at the price of more, smaller "
        "output files."))
    delete_file_threshold: int | None = setting(None, doc=(
        "Files with at least this many delete files (position and equality) are candidates."))
    delete_ratio_threshold: float | None = setting(None, doc=(
        "Files whose deleted-row ratio is at least this are candidates (Iceberg's default 0.3); only file-scoped "
        "position deletes and deletion vectors count, as in Iceberg: equality deletes do not, since their rows "
        "cannot be known from metadata."))
    rewrite_all: bool = setting(False, doc="Plan every file.")
    partition_filter: str | None = setting(None, doc=(
        "PyIceberg row filter limiting the plan, e.g. ``day = '2026-01-01'`` (applied on top of ``scope``)."))
    max_files: int | None = setting(None, doc="Budget: at most this many input files per run (the rest next run).")
    max_bytes: int | None = setting(None, doc="Budget: at most this many input bytes per run.")
    include_file_paths: bool = setting(False, doc=(
        "Put every planned file's path in the result (off by default: the rewrite needs only the partitions, "
        "and XCom is no place for a million paths)."))
    scope: Scope = setting("auto", doc=(
        "``auto``: a run with a data interval (scheduled, backfill, or manual for a logical date on a scheduled "
        "DAG) plans only the partitions of that interval (the table's time partition: hour/day/month/year "
        "transform, or identity on a date column); a run without one plans the whole table. ``interval``: "
        "always the interval (a run without one fails). ``table``: never scope."))
    engine: Engine = setting("auto", doc=(
        "``pyiceberg`` plans in the Airflow worker (no JVM: fast for small and medium tables, but every file of "
        "the snapshot passes through the worker's memory); ``spark`` submits the ``plan`` job, which plans "
        "partitions on the executors (a JVM start, worker memory stays flat); ``auto`` takes Spark from "
        f"{AUTO_SPARK_MIN_DATA_FILES:,} data files or {AUTO_SPARK_MIN_MANIFESTS:,} manifests, and for a snapshot "
        "with equality delete files (which ``pyiceberg`` refuses). Both engines give the same plan. A "
        "``partition_filter`` that cuts through partitions needs column metrics: ``spark`` then fails and "
        "``auto`` falls back to PyIceberg."))
    #: The run's data interval (start, end), which ``scope`` may plan alone; ``None``: the run has none.
    data_interval: tuple[Any, Any] | None = None

    def rewrite_options(self, table_properties: dict[str, str]) -> RewriteOptions:
        overrides = {
            "target_file_size_bytes": self.target_file_size_bytes,
            "min_file_size_bytes": self.min_file_size_bytes,
            "max_file_size_bytes": self.max_file_size_bytes,
            "min_input_files": self.min_input_files,
            "max_file_group_size_bytes": self.max_file_group_size_bytes,
            "max_file_group_input_files": self.max_file_group_input_files,
            "delete_file_threshold": self.delete_file_threshold,
            "delete_ratio_threshold": self.delete_ratio_threshold,
            "rewrite_all": self.rewrite_all,
            "max_files": self.max_files,
            "max_bytes": self.max_bytes,
        }
        options = RewriteOptions.from_table_properties(
            table_properties, **{k: v for k, v in overrides.items() if v is not None}
        )
        options.validate()
        return options

    def interval_scope(self, table: Table) -> str | None:
        """The data interval's partition filter, when this run should be scoped to it.

        The rule (``scope="auto"``) is the run's data interval: a run that has one (scheduled,
        backfill, or manual for a chosen logical date on an interval timetable) plans those
        partitions, as the user asked for that interval; a run that has none (manual without a
        logical date, or any run of a DAG without a schedule, whose interval is empty) plans the
        whole table. The run type plays no part: a manual run of a day is that day.
        """
        if self.scope == "table":
            return None
        start, end = self.data_interval or (None, None)
        if start is None or end is None or end <= start:
            if self.scope == "interval":
                raise LakeConfigError("scope='interval' needs a run with a data interval (a scheduled or backfill run, "
                                      "or a manual run triggered for a logical date on a scheduled DAG).")
            return None
        scoped = interval_filter(partition_fields_of(table), start, end)
        if scoped is None:
            self.log.info("%s has no time partition: planning the whole table.", self.dotted)
        return scoped

    def resolve_engine(self, table: Table) -> str:
        """The engine for this run (``auto`` decided from the current snapshot's metadata)."""
        snapshot = table.current_snapshot()
        if snapshot is None:
            return "pyiceberg"  # nothing to read: no reason to start a JVM
        if has_equality_deletes(table, snapshot):
            if self.engine == "pyiceberg":
                raise equality_deletes_refusal(self.dotted, snapshot.snapshot_id)
            self.log.info("%s has equality delete files: planning with Iceberg's planner in Spark.", self.dotted)
            return "spark"
        if self.engine != "auto":
            return self.engine
        data_files = summary_int(snapshot, "total-data-files")
        manifests = len(snapshot.manifests(table.io))  # the manifest list only: one small read
        engine = choose_engine("auto", data_files=data_files, manifests=manifests)
        self.log.info("engine=auto: %s data files, %s manifests -> %s.", data_files, manifests, engine)
        return engine

    def prepare(self, reader: TableReader, run: AirflowRun | None) -> Prepared[SparkPlanJobArgs, PlanResult]:
        table = reader.load_table()
        engine = self.resolve_engine(table)
        options = self.rewrite_options(dict(table.properties))
        scoped = self.interval_scope(table)
        row_filter = combine_filters(scoped, self.partition_filter)
        if scoped:
            self.log.info("Scoped to the data interval: %s", scoped)
        planning = _Planning(table, options, row_filter, scoped)
        before = table_state(table)
        if engine == "spark":
            predicates = spark_partition_predicates(table, parse_partition_filter(table, row_filter))
            snapshot = table.current_snapshot()
            assert snapshot is not None, "resolve_engine plans a table without snapshots with PyIceberg"
            args = SparkPlanJobArgs(
                table=self.dotted,
                snapshot_id=snapshot.snapshot_id,
                options=options.to_iceberg_options(),
                max_files=options.max_files,
                max_bytes=options.max_bytes,
                include_files=self.include_file_paths,
                predicates=PartitionPredicates(**predicates) if predicates else None,
            ).validate()
            return Prepared(before, args=args, state=planning)
        return Prepared(before, done=self._planned(planning, self._pyiceberg_plan(planning), "pyiceberg"))

    def finish(
        self, prepared: Prepared[SparkPlanJobArgs, PlanResult], result: SparkPlanJobResult
    ) -> Outcome[PlanResult]:
        """The Spark job's plan; where the filter needs PyIceberg's column metrics, PyIceberg's."""
        planning: _Planning = prepared.state
        if result.plan is not None:
            return self._planned(planning, result.plan, "spark")
        table, row_filter = planning.table, planning.row_filter
        message = (f"partition_filter {row_filter!r} selects only part of the partitions of "
                   f"{result.unaligned_files} files: which of them it keeps depends on column metrics")
        if self.engine == "spark":
            raise LakeConfigError(f"{message}, which only engine='pyiceberg' reads. Use it, or a filter on "
                                  "partition boundaries.")
        if has_equality_deletes(table):
            raise LakePlanRefused(f"{message}, which only PyIceberg reads, and the table has equality delete files, "
                                  "which only Spark plans. Give a filter on partition boundaries "
                                  "(e.g. day = '2026-01-01'), or none.")
        self.log.warning("%s: planning with PyIceberg instead.", message)
        return self._planned(planning, self._pyiceberg_plan(planning), "pyiceberg")

    def _pyiceberg_plan(self, planning: _Planning) -> PlanResult:
        return plan_table(planning.table, planning.options, partition_filter=planning.row_filter,
                          table_name=self.dotted, include_files=self.include_file_paths)

    def _planned(self, planning: _Planning, plan: PlanResult, engine: str) -> Outcome[PlanResult]:
        plan = plan.replace(
            engine=engine, scope=PlanScope(interval_filter=planning.interval_filter,
                                           partition_filter=self.partition_filter)
        )
        totals = plan.totals
        self.say(
            "Plan (%s) for %s at snapshot %s: %s groups, %s files, %s bytes -> about %s files.",
            engine, plan.table, plan.snapshot_id, totals.groups, totals.files, totals.bytes, plan.expected_output_files,
        )
        return Outcome(plan, None, changed=False)
