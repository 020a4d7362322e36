"""Plan a compaction from metadata: in the Airflow worker (PyIceberg, no JVM) or, for very large
tables, in a Spark application that never holds every file in one place."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk.bases.skipmixin import SkipMixin

from airflow_lake_provider.exceptions import LakePlanRefused
from airflow_lake_provider.operators.base import LakeMaintenanceOperator
from airflow_lake_provider.steps.plan import PlanStep

if TYPE_CHECKING:
    from airflow.sdk import Context

#: XCom key under which a refused plan leaves its message, for alerts and people reading the run.
#: Every plan that runs pushes it: ``""`` when not refused (a stored ``None`` reads as never pushed).
REFUSED_XCOM_KEY = "refused"
NOT_REFUSED = ""


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
        run without one plans the whole table (see
        :meth:`~airflow_lake_provider.steps.plan.PlanStep.interval_scope`). ``interval``: always
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

    def step(self, context: Context) -> PlanStep:
        start, end = context.get("data_interval_start"), context.get("data_interval_end")
        return dataclasses.replace(PlanStep.of(self, table=self.table, log=self.log), data_interval=(start, end))

    def execute(self, context: Context) -> dict[str, Any]:
        self.coerce_rendered_fields()
        context["ti"].xcom_push(key=REFUSED_XCOM_KEY, value=NOT_REFUSED)
        try:
            plan = self.run_step(self.step(context), context)
        except LakePlanRefused as refusal:
            context["ti"].xcom_push(key=REFUSED_XCOM_KEY, value=str(refusal))
            raise
        if not plan["groups"] and self.skip_rewrite_when_empty and self.has_dag():  # outside a DAG: nothing to skip
            consumers = [t for t in self.get_direct_relatives(upstream=False) if getattr(t, "consumes_plan", False)]
            if consumers:
                self.log.info("Nothing to compact: skipping %s.", ", ".join(t.task_id for t in consumers))
                context["ti"].xcom_push(key="return_value", value=plan)
                self.skip(ti=context["ti"], tasks=consumers)
        return plan
