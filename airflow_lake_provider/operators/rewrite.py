"""Rewrite (compact) the planned data files in one Spark application."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow_lake_provider.core.contracts import DEFAULT_COMMIT_RETRY
from airflow_lake_provider.operators.base import LakeMaintenanceOperator
from airflow_lake_provider.steps.rewrite import RewriteStep

if TYPE_CHECKING:
    from airflow.sdk import Context

__all__ = ["IcebergRewriteDataFilesOperator"]


class IcebergRewriteDataFilesOperator(LakeMaintenanceOperator):
    """Compact the planned partitions of a table with Iceberg's ``RewriteDataFiles`` in Spark.

    Before it writes anything it checks, without a JVM, that the planned snapshot is still the
    current snapshot or one of its ancestors. Every commit carries snapshot summary properties
    naming the DAG run and task (``airflow.dag-id``, ``airflow.run-id``, ``airflow.task-id``,
    ``airflow.map-index``); a retried task that finds its own commit returns that result instead
    of rewriting again.

    Returns :class:`~airflow_lake_provider.core.contracts.RewriteResult` as JSON: ``{table,
    snapshot_id_before, committed_snapshot_ids, snapshot_id_after, rewritten_data_files,
    added_data_files, rewritten_bytes, removed_delete_files, failed_groups, ...}``
    (docs/operators/rewrite.md).
    A group whose commit Iceberg dropped under partial progress is listed in ``failed_groups``
    and fails the task (``fail_on_dropped_groups``), so success never covers lost work.

    :param plan: the planning task's result (templated, typically ``plan_task.output``). Without
        one, the whole table is rewritten with the table's sizes and ``options``. With one, the
        rewrite runs with the plan's options, and sizes given in ``options`` replace only
        themselves (see :meth:`~airflow_lake_provider.core.planning.RewriteOptions.merged`).
    :param strategy: ``binpack``, ``sort`` (``sort_order``, default the table's) or ``zorder`` (``zorder_columns``).
    :param rewrite_position_deletes: also rewrite the position delete files of the planned
        partitions (``rewrite-all``; the whole table when the rewrite is not limited to partitions)
        in the same application: drops deletes made dangling by the rewrite, merges small ones.
    :param drop_dangling_deletes: after the data rewrite, remove every delete file of the table that
        no live data file needs any more (position and equality deletes, deletion vectors), from
        metadata alone: nothing is read, no row changes (``dangling_deletes`` in the result).
    :param rewrite_manifests: also rewrite manifests in the same application.
    :param options: Iceberg's own ``rewrite_data_files`` options, by Iceberg's keys (templated):
        ``target-file-size-bytes``, ``min-input-files``, ``partial-progress.enabled``,
        ``partial-progress.max-commits``, ``max-concurrent-file-group-rewrites``... Defaults the
        provider sets unless given here: ``partial-progress.enabled=false`` and
        ``use-starting-sequence-number=false`` (Iceberg's true lets an equality delete committed
        during the rewrite, as Flink upserts do, be dropped by the rewrite's commit and its rows
        come back, apache/iceberg#10962; with false that delete is a commit conflict, retried).
    :param rewriter: who reads and writes the Parquet of a bin-pack rewrite. ``auto`` (default):
        Arrow, with Iceberg's planner and Iceberg's validated commit, where the result is provably the
        same (no delete files, format v1/v2, one partition spec, no sort order, flat columns, local
        storage); Iceberg's Spark action for every other table, the reason in ``rewriter_note``.
        ``iceberg``: always Iceberg's Spark action. ``arrow``: refuse a table Arrow cannot rewrite.
    :param require_plan: fail when no plan arrives instead of rewriting the whole table (the
        maintenance group sets it).
    :param max_commit_attempts: attempts when a commit conflicts with another writer (default 3);
        each retry plans the same partitions again from the current snapshot. After the last one
        the task fails with a message naming the conflict and what to do.
    :param commit_retry_backoff_seconds: wait before the first retry, doubled for each further one
        (capped at 30 s).
    """

    consumes_plan = True
    template_fields: Sequence[str] = (
        *LakeMaintenanceOperator.template_fields,
        "plan", "strategy", "sort_order", "zorder_columns", "rewrite_position_deletes",
        "drop_dangling_deletes", "rewrite_manifests", "options", "dry_run", "max_commit_attempts",
        "commit_retry_backoff_seconds", "rewriter",
    )
    template_fields_renderers = {**LakeMaintenanceOperator.template_fields_renderers, "plan": "json", "options": "json"}

    if TYPE_CHECKING:
        # The operator's dry_run parameter shadows BaseOperator.dry_run(), which a maintenance step never uses.
        dry_run: bool  # type: ignore[assignment]

    def __init__(
        self,
        *,
        plan: dict[str, Any] | None = None,
        strategy: str = "binpack",
        sort_order: str | None = None,
        zorder_columns: list[str] | None = None,
        rewrite_position_deletes: bool = True,
        drop_dangling_deletes: bool = True,
        rewrite_manifests: bool = False,
        options: dict[str, Any] | None = None,
        fail_on_dropped_groups: bool = True,
        dry_run: bool = False,
        max_commit_attempts: int = DEFAULT_COMMIT_RETRY.max_attempts,
        commit_retry_backoff_seconds: float = DEFAULT_COMMIT_RETRY.retry_backoff_seconds,
        require_plan: bool = False,
        rewriter: str = "auto",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.plan = plan
        self.strategy = strategy
        self.sort_order = sort_order
        self.zorder_columns = zorder_columns
        self.rewrite_position_deletes = rewrite_position_deletes
        self.drop_dangling_deletes = drop_dangling_deletes
        self.rewrite_manifests = rewrite_manifests
        self.options = options
        self.fail_on_dropped_groups = fail_on_dropped_groups
        self.dry_run = dry_run
        self.max_commit_attempts = max_commit_attempts
        self.commit_retry_backoff_seconds = commit_retry_backoff_seconds
        self.require_plan = require_plan
        self.rewriter = rewriter

    def step(self, context: Context) -> RewriteStep:
        return RewriteStep.of(self, table=self.table, log=self.log)
