"""Plan a compaction from metadata in the Airflow worker: no JVM."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk.bases.skipmixin import SkipMixin

from airflow_lake_provider.exceptions import LakeConfigError
from airflow_lake_provider.operators.base import LakeMaintenanceOperator
from airflow_lake_provider.planning import RewriteOptions, plan_table
from airflow_lake_provider.scoping import combine_filters, interval_filter, partition_fields_of

SCOPES = ("auto", "interval", "table")


class IcebergRewritePlanOperator(LakeMaintenanceOperator, SkipMixin):
    """Plan which data files of a table a compaction should rewrite, the way Iceberg plans it.

    Reads the table's current snapshot through PyIceberg, groups candidate files by partition,
    bin-packs them and keeps the groups worth rewriting. Returns the plan as the XCom
    ``return_value``: ``{table, snapshot_id, groups, totals, expected_output_files, options}``.
    When there is nothing to do, the downstream rewrite tasks are skipped.

    :param target_file_size_bytes: default: the table's ``write.target-file-size-bytes``.
    :param min_file_size_bytes: files below are candidates (default 75% of target).
    :param max_file_size_bytes: files above are candidates (default 180% of target).
    :param min_input_files: a group needs this many files to be rewritten (default 5).
    :param max_file_group_size_bytes: largest group (default 100 GiB).
    :param delete_file_threshold: files with at least this many deletes are candidates.
    :param rewrite_all: plan every file.
    :param partition_filter: PyIceberg row filter limiting the plan, e.g. ``day = '2026-01-01'``.
    :param max_files: budget: at most this many input files per run (the rest next run).
    :param max_bytes: budget: at most this many input bytes per run.
    :param skip_rewrite_when_empty: skip the downstream rewrite tasks when the plan is empty.
    :param scope: ``auto`` (default): scheduled and backfill runs plan only the partitions of
        their data interval (the table's time partition: hour/day/month/year transform, or
        identity on a date column); manual runs plan the whole table. ``interval``: always the
        interval. ``table``: never scope. ``partition_filter`` is applied on top.
    :param include_file_paths: put every planned file's path in the XCom (off by default: the
        rewrite needs only the partitions, and XCom is no place for a million paths).
    """

    template_fields: Sequence[str] = (
        *LakeMaintenanceOperator.template_fields,
        "target_file_size_bytes", "min_file_size_bytes", "max_file_size_bytes", "min_input_files",
        "max_file_group_size_bytes", "delete_file_threshold", "rewrite_all", "partition_filter",
        "max_files", "max_bytes", "scope",
    )

    def __init__(
        self,
        *,
        target_file_size_bytes: int | None = None,
        min_file_size_bytes: int | None = None,
        max_file_size_bytes: int | None = None,
        min_input_files: int | None = None,
        max_file_group_size_bytes: int | None = None,
        delete_file_threshold: int | None = None,
        rewrite_all: bool = False,
        partition_filter: str | None = None,
        max_files: int | None = None,
        max_bytes: int | None = None,
        skip_rewrite_when_empty: bool = True,
        include_file_paths: bool = False,
        scope: str = "auto",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.target_file_size_bytes = target_file_size_bytes
        self.min_file_size_bytes = min_file_size_bytes
        self.max_file_size_bytes = max_file_size_bytes
        self.min_input_files = min_input_files
        self.max_file_group_size_bytes = max_file_group_size_bytes
        self.delete_file_threshold = delete_file_threshold
        self.rewrite_all = rewrite_all
        self.partition_filter = partition_filter
        self.max_files = max_files
        self.max_bytes = max_bytes
        self.skip_rewrite_when_empty = skip_rewrite_when_empty
        self.include_file_paths = include_file_paths
        self.scope = scope

    def rewrite_options(self, table_properties: dict[str, str]) -> RewriteOptions:
        overrides = {
            "target_file_size_bytes": self.target_file_size_bytes,
            "min_file_size_bytes": self.min_file_size_bytes,
            "max_file_size_bytes": self.max_file_size_bytes,
            "min_input_files": self.min_input_files,
            "max_file_group_size_bytes": self.max_file_group_size_bytes,
            "delete_file_threshold": self.delete_file_threshold,
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
        """The data interval's partition filter, when this run should be scoped to it."""
        if self.scope not in SCOPES:
            raise LakeConfigError(f"scope must be one of {', '.join(SCOPES)}; got {self.scope!r}.")
        if self.scope == "table":
            return None
        start, end = context.get("data_interval_start"), context.get("data_interval_end")
        run_type = str(getattr(context.get("dag_run"), "run_type", "") or "").lower()
        has_interval = start is not None and end is not None and end > start
        if self.scope == "auto" and not (has_interval and run_type.endswith(("scheduled", "backfill"))):
            return None
        if not has_interval:
            raise LakeConfigError("scope='interval' needs a run with a data interval (a scheduled or backfill run).")
        scoped = interval_filter(partition_fields_of(table), start, end)
        if scoped is None:
            self.log.info("%s has no time partition: planning the whole table.", self.table_identifier.dotted)
        return scoped

    def execute(self, context: Any) -> dict[str, Any]:
        table = self.load_table()
        options = self.rewrite_options(dict(table.properties))
        scoped = self.interval_scope(table, context)
        row_filter = combine_filters(scoped, self.partition_filter)
        if scoped:
            self.log.info("Scoped to the data interval: %s", scoped)
        plan = plan_table(
            table, options, partition_filter=row_filter, table_name=self.table_identifier.dotted
        ).to_dict(include_files=self.include_file_paths)
        plan["scope"] = {"interval_filter": scoped, "partition_filter": self.partition_filter or None}
        totals = plan["totals"]
        self.log.info(
            "Plan for %s at snapshot %s: %s groups, %s files, %s bytes -> about %s files.",
            plan["table"], plan["snapshot_id"], totals["groups"], totals["files"], totals["bytes"],
            plan["expected_output_files"],
        )
        if totals["groups"] == 0 and self.skip_rewrite_when_empty:
            from airflow_lake_provider.operators.rewrite import IcebergRewriteDataFilesOperator

            rewrites = [t for t in self.get_direct_relatives(upstream=False)
                        if isinstance(t, IcebergRewriteDataFilesOperator)]
            if rewrites:
                self.log.info("Nothing to compact: skipping %s.", ", ".join(t.task_id for t in rewrites))
                context["ti"].xcom_push(key="return_value", value=plan)
                self.skip(ti=context["ti"], tasks=rewrites)
        return plan
