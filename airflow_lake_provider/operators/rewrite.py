"""Rewrite (compact) the planned data files in one Spark application."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow_lake_provider.exceptions import LakeConfigError
from airflow_lake_provider.jobs.rewrite import parse_sort_order
from airflow_lake_provider.operators.base import LakeMaintenanceOperator, commit_retry_settings, run_properties
from airflow_lake_provider.core.planning import RewriteOptions
from airflow_lake_provider.core.snapshots import (
    commits_tagged, has_equality_deletes, require_in_lineage, summary_int, table_state,
)

STRATEGIES = ("binpack", "sort", "zorder")


class IcebergRewriteDataFilesOperator(LakeMaintenanceOperator):
    """Compact the planned partitions of a table with Iceberg's ``RewriteDataFiles`` in Spark.

    Before it writes anything it checks, without a JVM, that the planned snapshot is still the
    current snapshot or one of its ancestors. Every commit carries snapshot summary properties
    naming the DAG run and task (``airflow.dag-id``, ``airflow.run-id``, ``airflow.task-id``,
    ``airflow.map-index``); a retried task that finds its own commit returns that result instead
    of rewriting again.

    Returns ``{table, snapshot_id_before, committed_snapshot_ids, snapshot_id_after,
    rewritten_data_files, added_data_files, rewritten_bytes, removed_delete_files, failed_groups, ...}``.
    A group whose commit Iceberg dropped under partial progress is listed in ``failed_groups``
    and fails the task (``fail_on_dropped_groups``), so success never covers lost work.

    :param plan: the planning task's result (templated, typically ``plan_task.output``). Without
        one, the whole table is rewritten with the options given here.
    :param strategy: ``binpack``, ``sort`` (``sort_order``, default the table's) or ``zorder`` (``zorder_columns``).
    :param partial_progress: commit file groups in several commits (``partial-progress.enabled``).
    :param max_commits: ``partial-progress.max-commits``.
    :param use_starting_sequence_number: ``use-starting-sequence-number``; default false, not
        Iceberg's true: with true, an equality delete committed during the rewrite (Flink upserts)
        can be dropped by the rewrite's commit and its rows come back (apache/iceberg#10962). With
        false that delete is a commit conflict, retried. Set true only if no writer commits
        equality deletes to the table.
    :param max_concurrent_file_group_rewrites: ``max-concurrent-file-group-rewrites``.
    :param rewrite_position_deletes: also rewrite the position delete files of the planned
        partitions (``rewrite-all``; the whole table when the rewrite is not limited to partitions)
        in the same application: drops deletes made dangling by the rewrite, merges small ones.
    :param rewrite_manifests: also rewrite manifests in the same application.
    :param options: further Iceberg rewrite options, passed as they are.
    :param require_plan: fail when no plan arrives instead of rewriting the whole table (the
        maintenance DAG sets it: its rewrite also runs after a failed plan, to skip itself).
    :param plan_refusal: the refused plan's message (templated, the plan task's XCom key
        ``refused``): when set, the rewrite skips itself, so expiry and clean still run.
    :param max_commit_attempts: attempts when a commit conflicts with another writer (default 3);
        each retry plans the same partitions again from the current snapshot. After the last one
        the task fails with a message naming the conflict and what to do.
    :param commit_retry_backoff_seconds: wait before the first retry, doubled for each further one
        (capped at 30 s).
    """

    template_fields: Sequence[str] = (
        *LakeMaintenanceOperator.template_fields,
        "plan", "strategy", "sort_order", "zorder_columns", "target_file_size_bytes", "min_file_size_bytes",
        "max_file_size_bytes", "min_input_files", "partial_progress", "max_commits",
        "use_starting_sequence_number", "max_concurrent_file_group_rewrites", "rewrite_position_deletes",
        "rewrite_manifests", "options", "dry_run", "max_commit_attempts", "commit_retry_backoff_seconds",
        "plan_refusal",
    )

    def __init__(
        self,
        *,
        plan: dict[str, Any] | None = None,
        strategy: str = "binpack",
        sort_order: str | None = None,
        zorder_columns: list[str] | None = None,
        target_file_size_bytes: int | None = None,
        min_file_size_bytes: int | None = None,
        max_file_size_bytes: int | None = None,
        min_input_files: int | None = None,
        partial_progress: bool = False,
        max_commits: int | None = None,
        use_starting_sequence_number: bool | None = None,
        max_concurrent_file_group_rewrites: int | None = None,
        rewrite_position_deletes: bool = True,
        rewrite_manifests: bool = False,
        options: dict[str, Any] | None = None,
        fail_on_dropped_groups: bool = True,
        dry_run: bool = False,
        max_commit_attempts: int = 3,
        commit_retry_backoff_seconds: float = 2.0,
        require_plan: bool = False,
        plan_refusal: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.plan = plan
        self.strategy = strategy
        self.sort_order = sort_order
        self.zorder_columns = zorder_columns
        self.target_file_size_bytes = target_file_size_bytes
        self.min_file_size_bytes = min_file_size_bytes
        self.max_file_size_bytes = max_file_size_bytes
        self.min_input_files = min_input_files
        self.partial_progress = partial_progress
        self.max_commits = max_commits
        self.use_starting_sequence_number = use_starting_sequence_number
        self.max_concurrent_file_group_rewrites = max_concurrent_file_group_rewrites
        self.rewrite_position_deletes = rewrite_position_deletes
        self.rewrite_manifests = rewrite_manifests
        self.options = options
        self.fail_on_dropped_groups = fail_on_dropped_groups
        self.dry_run = dry_run
        self.max_commit_attempts = max_commit_attempts
        self.commit_retry_backoff_seconds = commit_retry_backoff_seconds
        self.require_plan = require_plan
        self.plan_refusal = plan_refusal

    # -- validation (no JVM) ------------------------------------------------------------------
    def _plan(self) -> dict[str, Any] | None:
        if self.plan_refusal not in (None, "", "None"):
            from airflow.sdk.exceptions import AirflowSkipException

            raise AirflowSkipException(f"Not rewriting: the plan was refused. {self.plan_refusal}")
        plan = self.plan
        if plan in (None, "", "None"):
            if self.require_plan:
                raise LakeConfigError(
                    "No plan arrived from the planning task (it failed, or its result was cleared): not rewriting "
                    "the whole table without one. The plan task's log says why."
                )
            return None
        if not isinstance(plan, dict) or "snapshot_id" not in plan or "groups" not in plan:
            raise LakeConfigError(
                "plan must be the planning task's result (a dict with 'snapshot_id' and 'groups'); "
                f"got {type(plan).__name__}. Pass plan_task.output."
            )
        if plan.get("table") and plan["table"] != self.table_identifier.dotted:
            raise LakeConfigError(f"The plan is for table {plan['table']!r}, not {self.table_identifier.dotted!r}.")
        return plan

    def iceberg_options(
        self, table_properties: dict[str, str], plan: dict[str, Any] | None, table_columns: Sequence[str]
    ) -> dict[str, str]:
        if self.strategy not in STRATEGIES:
            raise LakeConfigError(f"strategy must be one of {', '.join(STRATEGIES)}; got {self.strategy!r}.")
        if isinstance(self.zorder_columns, str):  # a rendered template, or "a, b" typed by hand
            self.zorder_columns = [c.strip() for c in self.zorder_columns.strip("[]").replace("'", "").split(",") if c.strip()]
        if self.strategy == "zorder" and not self.zorder_columns:
            raise LakeConfigError("strategy 'zorder' needs zorder_columns, e.g. ['event_id', 'amount'].")
        if self.strategy == "sort":
            try:
                terms = parse_sort_order(self.sort_order)
            except ValueError as error:
                raise LakeConfigError(f"sort_order {self.sort_order!r}: {error}") from None
            unknown = [column for column, _, _ in terms if column not in table_columns]
            if unknown:
                raise LakeConfigError(f"sort_order names columns the table does not have: {', '.join(unknown)}.")
        if self.strategy == "zorder":
            unknown = [column for column in self.zorder_columns if column not in table_columns]
            if unknown:
                raise LakeConfigError(f"zorder_columns names columns the table does not have: {', '.join(unknown)}.")
        sizes = {
            "target_file_size_bytes": self.target_file_size_bytes,
            "min_file_size_bytes": self.min_file_size_bytes,
            "max_file_size_bytes": self.max_file_size_bytes,
            "min_input_files": self.min_input_files,
        }
        sizes = {k: v for k, v in sizes.items() if v is not None}
        if plan:
            options = dict(plan.get("options") or {})
            if sizes:
                options.update(RewriteOptions.from_table_properties(table_properties, **sizes).to_iceberg_options())
        else:
            rewrite_options = RewriteOptions.from_table_properties(table_properties, **sizes)
            rewrite_options.validate()
            options = rewrite_options.to_iceberg_options()
        for name, value in (("max_commits", self.max_commits),
                            ("max_concurrent_file_group_rewrites", self.max_concurrent_file_group_rewrites)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise LakeConfigError(f"{name} must be a whole number >= 1; got {value!r}.")
        options["partial-progress.enabled"] = str(bool(self.partial_progress)).lower()
        if self.max_commits is not None:
            options["partial-progress.max-commits"] = str(self.max_commits)
        if self.use_starting_sequence_number is not None:
            options["use-starting-sequence-number"] = str(bool(self.use_starting_sequence_number)).lower()
        if self.max_concurrent_file_group_rewrites is not None:
            options["max-concurrent-file-group-rewrites"] = str(self.max_concurrent_file_group_rewrites)
        options.update({str(k): str(v) for k, v in (self.options or {}).items()})
        return options

    def with_output_spec(self, table, options: dict[str, str]) -> dict[str, str]:
        """``options`` with ``output-spec-id`` made explicit: the current spec unless one is given.

        Iceberg 1.10 writes onto the current spec by default too (files of older specs are
        regrouped onto it); naming the ID read here makes that visible in the XCom and keeps a
        spec evolved while the task runs from changing where the rows land. A spec the table
        does not have is refused before any JVM starts.
        """
        value = options.get("output-spec-id", table.spec().spec_id)
        specs = sorted(table.specs())
        try:
            spec_id = int(value)
        except (TypeError, ValueError):
            spec_id = None
        if spec_id not in specs:
            raise LakeConfigError(
                f"output-spec-id {value} is not a partition spec of {self.table_identifier.dotted}: its specs are "
                f"{specs} (current: {table.spec().spec_id}). Leave it out to compact onto the current spec."
            )
        return {**options, "output-spec-id": str(spec_id)}

    def retry_settings(self) -> dict[str, Any]:
        return commit_retry_settings(self.max_commit_attempts, self.commit_retry_backoff_seconds)

    # -- running ------------------------------------------------------------------------------
    def execute(self, context: Any) -> dict[str, Any]:
        plan = self._plan()
        table = self.load_table()
        name = self.table_identifier.dotted
        options = self.iceberg_options(dict(table.properties), plan, [f.name for f in table.schema().fields])
        options = self.with_output_spec(table, options)
        if options.get("remove-dangling-deletes", "false").lower() == "true" and has_equality_deletes(table):
            # Reproduced with Iceberg 1.10.2 (docs/safety.md): rows deleted by a global equality delete came back.
            raise LakeConfigError(
                "remove-dangling-deletes=true on a table with equality delete files would bring deleted rows back: "
                "Iceberg's dangling-delete check drops a global equality delete (one written under an unpartitioned "
                "spec) once no data file is left under that spec, although it still deletes rows of files under the "
                "partitioned spec. Leave the option off: the rewrite's own commit already drops delete files older "
                "than every live data file."
            )
        retry = self.retry_settings()
        before = table_state(table)
        planned_snapshot = plan["snapshot_id"] if plan else None
        if planned_snapshot is not None:
            require_in_lineage(table, int(planned_snapshot), table_name=name)
        if self.dry_run or (plan is not None and not plan["groups"]):
            self.log.info("Dry run: nothing rewritten." if self.dry_run else "The plan has no file groups: nothing to rewrite.")
            current = table.current_snapshot()
            self.log_summary(before, "dry run, nothing rewritten" if self.dry_run else "nothing to rewrite",
                             changed=False)
            return self._result(name, current, [], current, {"dry_run": bool(self.dry_run), "options": options})

        tags = run_properties(context)
        earlier = commits_tagged(table, tags, after=planned_snapshot)
        if earlier:
            self.log.info("Found this task's own commits from an earlier try (%s): not rewriting again.",
                          [s.snapshot_id for s in earlier])
            recovered = self._recovered(name, table, planned_snapshot, earlier)
            self.log_summary(before, f"an earlier try already committed {recovered['committed_snapshot_ids']}",
                             changed=False)
            return recovered

        partitions = None
        if plan is not None:
            unique = {(g["spec_id"], repr(sorted(g["partition"].items()))): g for g in plan["groups"]}
            partitions = [{"spec_id": g["spec_id"], "partition": g["partition"]} for g in unique.values()]
            if len(table.specs()) > 1 and any(all(v is None for v in p["partition"].values()) for p in partitions):
                # Iceberg groups files of older partition specs under the current spec's all-null
                # partition; no partition predicate selects them, so this rewrite covers the table.
                self.log.info("The plan holds files of an older partition spec: rewriting without a partition filter.")
                partitions = None
        result = self.run_job(
            "rewrite",
            {
                "table": name,
                "planned_snapshot_id": planned_snapshot,
                "partitions": partitions,
                "strategy": self.strategy,
                "sort_order": self.sort_order,
                "zorder_columns": list(self.zorder_columns or []),
                "options": options,
                "rewrite_position_deletes": bool(self.rewrite_position_deletes),
                "rewrite_manifests": bool(self.rewrite_manifests),
                "snapshot_properties": tags,
                **retry,
            },
        )
        result["planned_snapshot_id"] = planned_snapshot
        result["output_spec_id"] = int(options["output-spec-id"])
        self.log.info(
            "Rewrote %s data files (%s bytes) into %s; removed %s delete files; commits %s; snapshot %s -> %s.",
            result["rewritten_data_files"], result["rewritten_bytes"], result["added_data_files"],
            result["removed_delete_files"], result["committed_snapshot_ids"], result["snapshot_id_before"],
            result["snapshot_id_after"],
        )
        conflicts = [a for a in result.get("attempts") or [] if a["outcome"] == "conflict" or a["detail"]]
        if conflicts:
            self.log.warning("The rewrite met concurrent commits and tried again: %s", conflicts)
        if result["failed_groups"]:
            detail = "; ".join(f"{g.get('partition') or '(unpartitioned)'}: {g['reason']}" for g in result["failed_groups"])
            message = (
                f"{len(result['failed_groups'])} file groups of {name} were not committed ({detail}). "
                "Another writer changed the same files; the committed groups are kept. Re-run to plan the rest, "
                "narrow partition_filter, or schedule compaction away from the writer."
            )
            if self.fail_on_dropped_groups:
                from airflow_lake_provider.exceptions import LakeJobError

                context["ti"].xcom_push(key="partial_result", value=result)
                raise LakeJobError(message, job="rewrite")
            self.log.warning("%s", message)
        self.log_summary(before, (
            f"rewrote {result['rewritten_data_files']:,} data files ({result['rewritten_bytes']:,} bytes) into "
            f"{result['added_data_files']:,}, removed {result['removed_delete_files']:,} delete files, "
            f"{len(result['committed_snapshot_ids'])} commits"))
        return result

    @staticmethod
    def _result(name, before, commits, after, extra: dict[str, Any]) -> dict[str, Any]:
        return {
            "table": name,
            "snapshot_id_before": before.snapshot_id if before else None,
            "committed_snapshot_ids": [s.snapshot_id for s in commits],
            "snapshot_id_after": after.snapshot_id if after else None,
            "rewritten_data_files": 0,
            "added_data_files": 0,
            "rewritten_bytes": 0,
            "removed_delete_files": 0,
            "failed_groups": [],
            **extra,
        }

    def _recovered(self, name: str, table, planned: int | None, commits: list[Any]) -> dict[str, Any]:
        replaces = [s for s in commits if s.summary and s.summary.operation.value == "replace"]
        before = table.snapshot_by_id(commits[0].parent_snapshot_id) if commits[0].parent_snapshot_id else None
        return self._result(
            name, before, commits, commits[-1],
            {
                "rewritten_data_files": sum(summary_int(s, "deleted-data-files") for s in replaces),
                "added_data_files": sum(summary_int(s, "added-data-files") for s in replaces),
                "rewritten_bytes": sum(summary_int(s, "removed-files-size") for s in replaces
                                       if summary_int(s, "deleted-data-files")),
                "removed_delete_files": sum(summary_int(s, "removed-delete-files") - summary_int(s, "added-delete-files")
                                            for s in replaces),
                "planned_snapshot_id": planned,
                "recovered_from_earlier_try": True,
            },
        )
