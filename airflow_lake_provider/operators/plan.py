"""Plan a compaction from metadata: in the Airflow worker (PyIceberg, no JVM) or, for very large
tables, in a Spark application that never holds every file in one place."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk.bases.skipmixin import SkipMixin

from airflow_lake_provider.core.contracts import (
    PartitionPredicates,
    PlanResult,
    PlanScope,
    SparkPlanJobArgs,
    SparkPlanJobResult,
)
from airflow_lake_provider.core.partition_sql import spark_partition_predicates
from airflow_lake_provider.core.planning import (
    RewriteOptions,
    equality_deletes_refusal,
    parse_partition_filter,
    plan_table,
)
from airflow_lake_provider.core.scoping import (
    combine_filters,
    interval_filter,
    partition_fields_of,
)
from airflow_lake_provider.core.snapshots import has_equality_deletes, summary_int
from airflow_lake_provider.exceptions import LakeConfigError, LakePlanRefused
from airflow_lake_provider.operators.base import LakeMaintenanceOperator

#: XCom key under which a refused plan leaves its message, for alerts and people reading the run.
#: Every plan that runs pushes it: ``""`` when not refused (a stored ``None`` reads as never pushed).
REFUSED_XCOM_KEY = "refused"
NOT_REFUSED = ""

SCOPES = ("auto", "interval", "table")
ENGINES = ("auto", "pyiceberg", "spark")
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


class IcebergRewritePlanOperator(LakeMaintenanceOperator, SkipMixin):
    """Plan which data files of a table a compaction should rewrite, the way Iceberg plans it.

    Reads the table's current snapshot through PyIceberg, groups candidate files by partition,
    bin-packs them and keeps the groups worth rewriting. Returns the plan as the XCom
    ``return_value``: :class:`~airflow_lake_provider.core.contracts.PlanResult` as JSON
    (``{table, snapshot_id, groups, totals, expected_output_files, options, budget,
    skipped_by_budget, engine, scope}``, docs/operators/plan.md). When there is nothing to do,
    the downstream tasks that consume the plan (``consumes_plan``, e.g. the rewrite) are skipped.

    :param target_file_size_bytes: default: the table's ``write.target-file-size-bytes``.
    :param min_file_size_bytes: files below are candidates (default 75% of target).
    :param max_file_size_bytes: files above are candidates (default 180% of target).
    :param min_input_files: a group needs this many files to be rewritten (default 5).
    :param max_file_group_size_bytes: largest group (default 100 GiB).
    :param max_file_group_input_files: most files in one group (default: no cap; Iceberg 1.12's
        ``max-file-group-input-files``). Caps what one group's task reads and commits in a partition of
        very many small files, at the price of more, smaller output files.
    :param delete_file_threshold: files with at least this many delete files (position and
        equality) are candidates.
    :param delete_ratio_threshold: files whose deleted-row ratio is at least this are candidates
        (Iceberg's default 0.3); only file-scoped position deletes and deletion vectors count, as
        in Iceberg: equality deletes do not, since their rows cannot be known from metadata.
    :param rewrite_all: plan every file.
    :param partition_filter: PyIceberg row filter limiting the plan, e.g. ``day = '2026-01-01'``.
    :param max_files: budget: at most this many input files per run (the rest next run).
    :param max_bytes: budget: at most this many input bytes per run.
    :param skip_rewrite_when_empty: skip the downstream rewrite tasks when the plan is empty.
    :param scope: ``auto`` (default): a run with a data interval (scheduled, backfill, or manual
        for a logical date on a scheduled DAG) plans only the partitions of that interval (the
        table's time partition: hour/day/month/year transform, or identity on a date column); a
        run without one plans the whole table (see :meth:`interval_scope`). ``interval``: always
        the interval (a run without one fails). ``table``: never scope. ``partition_filter`` is
        applied on top.
    :param include_file_paths: put every planned file's path in the XCom (off by default: the
        rewrite needs only the partitions, and XCom is no place for a million paths).
    :param engine: ``pyiceberg`` plans in the Airflow worker (no JVM: fast for small and medium
        tables, but every file of the snapshot passes through the worker's memory); ``spark``
        submits the ``plan`` job, which reads the metadata as a distributed DataFrame and plans
        partitions on the executors (a JVM start, but worker memory stays flat); ``auto``
        (default) reads the snapshot summary and the manifest list and takes Spark from
        ``AUTO_SPARK_MIN_DATA_FILES`` data files or ``AUTO_SPARK_MIN_MANIFESTS`` manifests. Both
        engines give the same plan. A ``partition_filter`` that cuts through partitions (a
        bound inside a day of a day-partitioned table) needs column metrics: ``spark`` then
        fails and ``auto`` falls back to PyIceberg. A snapshot with equality delete files
        (Flink upserts, CDC) is planned in Spark by ``auto``; ``pyiceberg`` refuses it.

    A plan that cannot be made because of what the table holds raises
    :class:`~airflow_lake_provider.exceptions.LakePlanRefused` and leaves its message in the XCom
    key ``refused`` (for alerts and people; in the maintenance group the steps after it do not run
    and the run fails).
    """

    emits_table_events = False  # it only reads the table
    template_fields: Sequence[str] = (
        *LakeMaintenanceOperator.template_fields,
        "target_file_size_bytes", "min_file_size_bytes", "max_file_size_bytes", "min_input_files",
        "max_file_group_size_bytes", "max_file_group_input_files", "delete_file_threshold", "delete_ratio_threshold",
        "rewrite_all", "partition_filter", "max_files", "max_bytes", "scope", "engine",
    )

    def __init__(
        self,
        *,
        target_file_size_bytes: int | None = None,
        min_file_size_bytes: int | None = None,
        max_file_size_bytes: int | None = None,
        min_input_files: int | None = None,
        max_file_group_size_bytes: int | None = None,
        max_file_group_input_files: int | None = None,
        delete_file_threshold: int | None = None,
        delete_ratio_threshold: float | None = None,
        rewrite_all: bool = False,
        partition_filter: str | None = None,
        max_files: int | None = None,
        max_bytes: int | None = None,
        skip_rewrite_when_empty: bool = True,
        include_file_paths: bool = False,
        scope: str = "auto",
        engine: str = "auto",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.target_file_size_bytes = target_file_size_bytes
        self.min_file_size_bytes = min_file_size_bytes
        self.max_file_size_bytes = max_file_size_bytes
        self.min_input_files = min_input_files
        self.max_file_group_size_bytes = max_file_group_size_bytes
        self.max_file_group_input_files = max_file_group_input_files
        self.delete_file_threshold = delete_file_threshold
        self.delete_ratio_threshold = delete_ratio_threshold
        self.rewrite_all = rewrite_all
        self.partition_filter = partition_filter
        self.max_files = max_files
        self.max_bytes = max_bytes
        self.skip_rewrite_when_empty = skip_rewrite_when_empty
        self.include_file_paths = include_file_paths
        self.scope = scope
        self.engine = engine

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

    def interval_scope(self, table, context: Any) -> str | None:
        """The data interval's partition filter, when this run should be scoped to it.

        The rule (``scope="auto"``) is the run's data interval: a run that has one (scheduled,
        backfill, or manual for a chosen logical date on an interval timetable) plans those
        partitions, as the user asked for that interval; a run that has none (manual without a
        logical date, or any run of a DAG without a schedule, whose interval is empty) plans the
        whole table. The run type plays no part: a manual run of a day is that day.
        """
        if self.scope not in SCOPES:
            raise LakeConfigError(f"scope must be one of {', '.join(SCOPES)}; got {self.scope!r}.")
        if self.scope == "table":
            return None
        start, end = context.get("data_interval_start"), context.get("data_interval_end")
        if start is None or end is None or end <= start:
            if self.scope == "interval":
                raise LakeConfigError("scope='interval' needs a run with a data interval (a scheduled or backfill run, "
                                      "or a manual run triggered for a logical date on a scheduled DAG).")
            return None
        scoped = interval_filter(partition_fields_of(table), start, end)
        if scoped is None:
            self.log.info("%s has no time partition: planning the whole table.", self.table_identifier.dotted)
        return scoped

    def resolve_engine(self, table) -> str:
        """The engine for this run (``auto`` decided from the current snapshot's metadata)."""
        if self.engine not in ENGINES:  # checked before anything is read
            return choose_engine(self.engine, data_files=0, manifests=0)
        snapshot = table.current_snapshot()
        if snapshot is None:
            return "pyiceberg"  # nothing to read: no reason to start a JVM
        if has_equality_deletes(table, snapshot):
            if self.engine == "pyiceberg":
                raise equality_deletes_refusal(self.table_identifier.dotted, snapshot.snapshot_id)
            self.log.info("%s has equality delete files: planning with Iceberg's planner in Spark.",
                          self.table_identifier.dotted)
            return "spark"
        if self.engine != "auto":
            return self.engine
        data_files = summary_int(snapshot, "total-data-files")
        manifests = len(snapshot.manifests(table.io))  # the manifest list only: one small read
        engine = choose_engine("auto", data_files=data_files, manifests=manifests)
        self.log.info("engine=auto: %s data files, %s manifests -> %s.", data_files, manifests, engine)
        return engine

    def plan_with_spark(self, table, options: RewriteOptions, row_filter: str | None) -> PlanResult | None:
        """The plan from the ``plan`` Spark job; ``None`` when the filter needs PyIceberg's metrics."""
        predicates = spark_partition_predicates(table, parse_partition_filter(table, row_filter))
        args = SparkPlanJobArgs(
            table=self.table_identifier.dotted,
            snapshot_id=table.current_snapshot().snapshot_id,
            options=options.to_iceberg_options(),
            max_files=options.max_files,
            max_bytes=options.max_bytes,
            include_files=self.include_file_paths,
            predicates=PartitionPredicates(**predicates) if predicates else None,
        ).validate()
        result = SparkPlanJobResult.from_json(self.run_job("plan", args.to_json()))
        if result.plan is not None:
            return result.plan
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
        return None

    def execute(self, context: Any) -> dict[str, Any]:
        self.coerce_rendered_fields()
        context["ti"].xcom_push(key=REFUSED_XCOM_KEY, value=NOT_REFUSED)
        try:
            return self.make_plan(context).to_json()
        except LakePlanRefused as refusal:
            context["ti"].xcom_push(key=REFUSED_XCOM_KEY, value=str(refusal))
            raise

    def make_plan(self, context: Any) -> PlanResult:
        table = self.load_table()
        engine = self.resolve_engine(table)
        options = self.rewrite_options(dict(table.properties))
        scoped = self.interval_scope(table, context)
        row_filter = combine_filters(scoped, self.partition_filter)
        if scoped:
            self.log.info("Scoped to the data interval: %s", scoped)
        plan = self.plan_with_spark(table, options, row_filter) if engine == "spark" else None
        if plan is None:
            engine = "pyiceberg"
            plan = plan_table(
                table, options, partition_filter=row_filter, table_name=self.table_identifier.dotted
            ).to_result(include_files=self.include_file_paths)
        plan = plan.replace(engine=engine, scope=PlanScope(interval_filter=scoped, partition_filter=self.partition_filter))
        totals = plan.totals
        self.log.info(
            "Plan (%s) for %s at snapshot %s: %s groups, %s files, %s bytes -> about %s files.",
            engine, plan.table, plan.snapshot_id, totals.groups, totals.files, totals.bytes, plan.expected_output_files,
        )
        if plan.is_empty and self.skip_rewrite_when_empty and self.has_dag():  # outside a DAG: nothing to skip
            consumers = [t for t in self.get_direct_relatives(upstream=False) if getattr(t, "consumes_plan", False)]
            if consumers:
                self.log.info("Nothing to compact: skipping %s.", ", ".join(t.task_id for t in consumers))
                context["ti"].xcom_push(key="return_value", value=plan.to_json())
                self.skip(ti=context["ti"], tasks=consumers)
        return plan
