"""The data-file stage of the ``rewrite`` job, in the shape of Iceberg's ``RewriteDataFilesSparkAction``.

Iceberg's action plans file groups (``BinPackRewriteFilePlanner``), hands each group to the runner of
its strategy (``rewrite(group) -> Set<DataFile>``) and commits the groups through one commit manager
(``RewriteDataFilesCommitManager``; under partial progress in batches, a batch that fails dropped
alone). Here the same parts, each written once:

- the planner: Iceberg's own (:func:`~airflow_lake_provider.jobs.iceberg.bin_pack_groups`);
- the rewriters, behind one seam (:class:`Rewriter`: ``rewrite(scope) -> AttemptOutcome``, one attempt
  planned from the table's current state): :class:`SparkActionRewriter` is Iceberg's Spark action whole
  (its planner, runners and commit manager run in Spark); :class:`ArrowRewriter` is Iceberg's planner,
  the Arrow runner (``jobs/arrow_rewrite.py``'s ``write_groups``) and :class:`GroupCommitter`;
- :func:`choose_rewriter`, the one place an attempt's rewriter is chosen;
- the accounting of groups: :func:`shortfall` (planned files no reported group accounts for: Iceberg
  only logs a group whose commit it dropped under partial progress) and :func:`backed_groups`
  (reported groups no commit of this attempt backs);
- :class:`DataFileRewrite`, the stage: one attempt at a time under the job's commit retries, the
  attempts' groups adding up to :class:`DataFilesRewritten`.

The outcomes are typed here; their JSON is the rewrite's XCom (``RewriteResult``'s ``groups`` and
``failed_groups``), unchanged.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar, Protocol

from airflow_lake_provider.core.arrow_rewrite import arrow_refusal, on_executors
from airflow_lake_provider.core.contracts import RewriteJobArgs, parse_sort_order
from airflow_lake_provider.jobs import arrow_rewrite, iceberg
from airflow_lake_provider.jobs.commit_retry import Finished
from airflow_lake_provider.jobs.session import spark_master

#: What a group that was not committed under partial progress says (both rewriters).
DROPPED = "commit dropped (conflict with a concurrent commit)"
#: What a group whose new files could not be written says (Iceberg's Spark action).
WRITE_FAILED = "rewrite failed (writing the new files failed; see the Spark log)"


# -- outcomes -------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class CommittedGroup:
    """A file group reported committed: its partition (named by :func:`iceberg.rewrite_group_namer`)."""

    partition: str
    global_index: int
    rewritten_data_files: int
    added_data_files: int
    rewritten_bytes: int

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class FailedGroup:
    """A file group not committed, and why. ``reported``: the group a rewriter reported committed that no
    commit of its attempt backs (its JSON keeps the reported counts, with the reason)."""

    partition: str
    reason: str
    data_files: int = 0
    global_index: int | None = None
    detail: str | None = None
    reported: CommittedGroup | None = None

    @classmethod
    def unbacked(cls, group: CommittedGroup) -> FailedGroup:
        return cls(group.partition, DROPPED, group.rewritten_data_files, group.global_index, reported=group)

    @property
    def files(self) -> int:
        return self.data_files

    def to_json(self) -> dict[str, Any]:
        if self.reported is not None:
            return {**self.reported.to_json(), "reason": self.reason}
        data: dict[str, Any] = {"partition": self.partition}
        if self.global_index is not None:
            data["global_index"] = self.global_index
        data.update(data_files=self.data_files, reason=self.reason)
        if self.detail is not None:
            data["detail"] = self.detail
        return data


@dataclasses.dataclass(frozen=True)
class AttemptOutcome:
    """What a rewriter reports of one attempt. ``planned``: the data files its planner selected, by group
    partition (``None`` where the planner is out of reach: Iceberg's sort and z-order planners)."""

    groups: tuple[CommittedGroup, ...] = ()
    failed: tuple[FailedGroup, ...] = ()
    removed_delete_files: int = 0
    planned: Mapping[str, int] | None = None


@dataclasses.dataclass(frozen=True)
class RewriteScope:
    """What every attempt of one run rewrites with: the table (each attempt plans from its current
    state), the planned partitions' filter (``None``: the whole table), Iceberg's options and this run's
    snapshot properties."""

    spark: Any
    jtable: Any
    expression: Any
    options: dict[str, str]
    props: dict[str, str]

    @property
    def partial_progress(self) -> bool:
        return self.options.get("partial-progress.enabled", "false").lower() == "true"


# -- the rewriters --------------------------------------------------------------------------------
class Rewriter(Protocol):
    """One attempt of the data-file rewrite, planned from the table's current state and committed."""

    name: ClassVar[str]

    @property
    def rewritten_by(self) -> str:
        """Where the Parquet is read and written: ``driver`` (its threads) or ``executors`` (Spark's)."""
        ...

    def rewrite(self, scope: RewriteScope) -> AttemptOutcome: ...


def _files_by_partition(groups: Iterable[tuple[str, int]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for partition, files in groups:
        counts[partition] = counts.get(partition, 0) + files
    return counts


def _partition_of(scope: RewriteScope) -> Callable[[Any], str]:
    """``partition(group)``: a planned or rewritten group's partition (always of the current spec), named
    like its files (:func:`iceberg.rewrite_group_namer`)."""
    name = iceberg.rewrite_group_namer(scope.spark, scope.jtable)
    spec_id = int(scope.jtable.spec().specId())
    return lambda group: name(spec_id, group.info().partition())


class SparkActionRewriter:
    """Iceberg's ``RewriteDataFilesSparkAction`` for the job's strategy (bin-pack, sort or z-order): it
    plans, rewrites and commits in Spark; its per-group results are reported as they are."""

    name: ClassVar[str] = "iceberg"

    def __init__(self, args: RewriteJobArgs) -> None:
        self.rewritten_by = "executors"
        self.strategy, self.sort_order, self.zorder_columns = args.strategy, args.sort_order, args.zorder_columns

    def rewrite(self, scope: RewriteScope) -> AttemptOutcome:
        spark, jtable = scope.spark, scope.jtable
        start = jtable.currentSnapshot()
        # What the commits must account for under partial progress. Iceberg's sort and z-order planners are
        # Spark's own (package-private); binpack's is public.
        planned = (self._planned(scope, int(start.snapshotId()))
                   if scope.partial_progress and start is not None and self.strategy == "binpack" else None)
        action = iceberg.with_properties(iceberg.actions(spark).rewriteDataFiles(jtable), scope.props)
        for key, value in scope.options.items():
            action = action.option(key, value)
        if self.strategy == "sort":
            order = self._sort_order(spark, jtable)
            action = action.sort(order) if order is not None else action.sort()
        elif self.strategy == "zorder":
            action = action.zOrder(iceberg.java_array(spark, "java.lang.String", list(self.zorder_columns)))
        if scope.expression is not None:
            action = action.filter(scope.expression)
        result = action.execute()
        partition = _partition_of(scope)
        groups = tuple(
            CommittedGroup(partition(group), int(group.info().globalIndex()),
                           int(group.rewrittenDataFilesCount()), int(group.addedDataFilesCount()),
                           int(group.rewrittenBytesCount()))
            for group in result.rewriteResults())
        failed = tuple(
            FailedGroup(partition(failure), WRITE_FAILED, int(failure.dataFilesCount()),
                        int(failure.info().globalIndex()))
            for failure in result.rewriteFailures())
        return AttemptOutcome(groups, failed, int(result.removedDeleteFilesCount()), planned)

    @staticmethod
    def _planned(scope: RewriteScope, start: int) -> dict[str, int]:
        """Data files Iceberg's bin-pack planner selects from ``start``, by group partition."""
        partition = _partition_of(scope)
        groups = iceberg.bin_pack_groups(scope.spark, scope.jtable, scope.expression, start, scope.options)
        return _files_by_partition((partition(group), int(group.inputFileNum())) for group in groups)

    def _sort_order(self, spark, jtable):
        terms = parse_sort_order(self.sort_order)
        if not terms:
            return None
        builder = spark._jvm.org.apache.iceberg.SortOrder.builderFor(jtable.schema())
        null_order = spark._jvm.org.apache.iceberg.NullOrder
        for column, direction, nulls in terms:
            order = null_order.NULLS_FIRST if nulls == "FIRST" else null_order.NULLS_LAST
            builder = builder.asc(column, order) if direction == "ASC" else builder.desc(column, order)
        return builder.build()


def commit_manager(spark, jtable, starting_snapshot_id: int, use_starting_sequence_number: bool,
                   props: Mapping[str, str]):
    """Iceberg's ``RewriteDataFilesCommitManager``, the commit the Spark action makes: a ``RewriteFiles``
    validated from the starting snapshot (no new deletes for the replaced files), with ``props``."""
    return iceberg.java_class(jtable, "org.apache.iceberg.actions.RewriteDataFilesCommitManager")(
        jtable, starting_snapshot_id, use_starting_sequence_number, iceberg.java_map(spark, dict(props)))


class GroupCommitter:
    """The commit manager of our runners: all groups in one commit, or under partial progress in
    ``partial-progress.max-commits`` commits of about equal numbers of groups, a batch that fails dropped
    alone (Iceberg's ``RewriteDataFilesCommitManager`` and its partial-progress service)."""

    def __init__(self, scope: RewriteScope, starting_snapshot_id: int) -> None:
        self.scope = scope
        self.manager = commit_manager(
            scope.spark, scope.jtable, starting_snapshot_id,
            scope.options.get("use-starting-sequence-number", "false").lower() == "true", scope.props)

    def _java_set(self, groups: Iterable[Any]):
        result = iceberg.java_class(self.scope.jtable, "java.util.HashSet")()
        for group in groups:
            result.add(group)
        return result

    def commit(self, groups: list[Any], reported: list[CommittedGroup]) -> tuple[list[CommittedGroup],
                                                                                  list[FailedGroup]]:
        """Commit ``groups`` (Iceberg's, their output set), each reported as ``reported`` says when committed."""
        if not self.scope.partial_progress:
            self.manager.commitOrClean(self._java_set(groups))  # on failure Iceberg deletes the new files and raises
            return list(reported), []
        committed: list[CommittedGroup] = []
        failed: list[FailedGroup] = []
        commits = max(1, min(len(groups), int(self.scope.options.get("partial-progress.max-commits", "10"))))
        for index in range(commits):
            batch = list(zip(groups[index::commits], reported[index::commits], strict=True))
            try:
                self.manager.commitFileGroups(self._java_set(group for group, _ in batch))
            except Exception as error:  # noqa: BLE001 - reported per group, the task fails on it by default
                for group, report in batch:
                    self.manager.abortFileGroup(group)
                    failed.append(FailedGroup(report.partition, DROPPED, report.rewritten_data_files,
                                              report.global_index, detail=str(error).splitlines()[0][:300]))
                continue
            committed.extend(report for _, report in batch)
        return committed, failed


class ArrowRewriter:
    """A bin-pack rewrite whose Parquet reading and writing is Arrow's (``jobs/arrow_rewrite.py``): Iceberg's
    planner, the Arrow runner (on the driver's threads or, on a cluster, Spark's executors), and
    :class:`GroupCommitter`. Raises ``arrow_rewrite.NotArrowRewritable`` (having deleted what it wrote) for a
    file it cannot rewrite."""

    name: ClassVar[str] = "arrow"

    def __init__(self, *, executors: bool = False) -> None:
        self.executors = executors

    @property
    def rewritten_by(self) -> str:
        return "executors" if self.executors else "driver"

    def rewrite(self, scope: RewriteScope) -> AttemptOutcome:
        spark, jtable = scope.spark, scope.jtable
        start = jtable.currentSnapshot()
        if start is None:
            return AttemptOutcome()
        groups = iceberg.bin_pack_groups(spark, jtable, scope.expression, start.snapshotId(), scope.options)
        if not groups:
            return AttemptOutcome()
        writers = arrow_rewrite.write_groups(spark, jtable, groups, scope.options, executors=self.executors)
        partition = _partition_of(scope)
        reported = [CommittedGroup(partition(writer.group),
                                   int(writer.group.info().globalIndex()), int(writer.group.inputFileNum()),
                                   len(writer.written), int(writer.group.inputFilesSizeInBytes()))
                    for writer in writers]
        committed, failed = GroupCommitter(scope, start.snapshotId()).commit([w.group for w in writers], reported)
        return AttemptOutcome(tuple(committed), tuple(failed), 0,
                              _files_by_partition((g.partition, g.rewritten_data_files) for g in reported))


# -- the choice -----------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Choice:
    """The rewriter an attempt takes, and why ``auto`` took Iceberg's Spark action (``note``)."""

    rewriter: Rewriter
    note: str | None = None


def choose_rewriter(args: RewriteJobArgs, scope: RewriteScope, earlier: Choice | None = None, *,
                    unreadable: str | None = None) -> Choice:
    """The rewriter of this attempt: the one place it is chosen, on every attempt.

    ``rewriter='iceberg'``: Iceberg's Spark action. Otherwise Arrow, on the driver's threads on a local
    master and on Spark's executors on a cluster (``core/arrow_rewrite.on_executors``), unless it cannot:
    for this table and these options (``arrow_rewrite.ineligibility``, checked again on every attempt: a
    retry plans from the current snapshot, which may hold another writer's delete files by then), or
    ``unreadable``: a file the Arrow runner found it cannot rewrite while reading (what it wrote is deleted
    first). Then ``auto`` hands this and every later attempt to Iceberg's Spark action, with the reason as
    the note, and ``arrow`` refuses. The worker's own expectation (``RewriteJobArgs.arrow_expected``) only
    decides how the driver starts.
    """
    if args.rewriter == "iceberg":
        return Choice(SparkActionRewriter(args))
    if earlier is not None and earlier.rewriter.name == SparkActionRewriter.name:
        return earlier
    spark = scope.spark
    reason = unreadable or arrow_rewrite.ineligibility(spark, scope.jtable, args.strategy, scope.options)
    if reason is None:
        return earlier or Choice(ArrowRewriter(executors=on_executors(spark_master(spark))))
    if args.rewriter == "arrow":
        raise ValueError(arrow_refusal(args.table, reason))
    print(f"rewrite: {args.table} goes to Iceberg's Spark rewriter: {reason}", flush=True)
    return Choice(SparkActionRewriter(args), reason)


# -- the accounting -------------------------------------------------------------------------------
def shortfall(outcome: AttemptOutcome) -> tuple[FailedGroup, ...]:
    """The planned files no reported group accounts for, by partition: groups whose commit Iceberg dropped
    under partial progress (only logged there)."""
    if outcome.planned is None:
        return ()
    accounted = _files_by_partition([*((g.partition, g.rewritten_data_files) for g in outcome.groups),
                                     *((g.partition, g.files) for g in outcome.failed)])
    missing = ((partition, files - accounted.get(partition, 0)) for partition, files in sorted(outcome.planned.items()))
    return tuple(FailedGroup(partition, DROPPED, files) for partition, files in missing if files > 0)


def _removed_by_partition(spark, jtable, snapshots) -> dict[str, int]:
    """Data files the snapshots removed, counted by the rewrite group they belong to.

    Named by :func:`iceberg.rewrite_group_namer`, like the groups they are checked against (files
    of older specs belong to the current spec's all-null group). About four py4j round trips per
    removed file, so :func:`backed_groups` reads files only when the summaries fall short.
    """
    name = iceberg.rewrite_group_namer(spark, jtable)
    return _files_by_partition((name(data_file.specId(), data_file.partition()), 1)
                               for snapshot in snapshots for data_file in snapshot.removedDataFiles(jtable.io()))


def backed_groups(spark, jtable, groups: tuple[CommittedGroup, ...],
                  commits: list[Any]) -> tuple[list[CommittedGroup], list[FailedGroup]]:
    """Split one attempt's reported groups into those its own commits back and those they do not.

    In bulk first, from metadata: each commit's summary counts the data files it removed
    (``deleted-data-files``). A commit of this attempt removes exactly the files of the groups it
    committed, and a committed group is always reported, so when the commits removed as many
    files as the reported groups hold, every reported group was committed: one round trip per
    commit, whatever the number of files. Only when they fall short (Iceberg dropped a group's
    commit under partial progress) are the removed files read one by one and matched to groups
    by partition, to say which groups went missing.
    """
    reported = sum(group.rewritten_data_files for group in groups)
    # Iceberg leaves the property out of a commit that removed no data file.
    if sum(int(iceberg.summary(commit).get("deleted-data-files", "0")) for commit in commits) == reported:
        return list(groups), []
    removed = _removed_by_partition(spark, jtable, commits)
    backed, unbacked = [], []
    for group in groups:
        available = removed.get(group.partition, 0)
        if available >= group.rewritten_data_files:
            removed[group.partition] = available - group.rewritten_data_files
            backed.append(group)
        else:
            unbacked.append(FailedGroup.unbacked(group))
    return backed, unbacked


# -- the stage ------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class DataFilesRewritten:
    """The data-file stage's result: the groups this run's own commits back (every attempt's), the groups
    not committed (the last attempt's, and every attempt's unbacked ones), the delete files the commits
    removed, and the rewriter of the last attempt with its note."""

    groups: tuple[CommittedGroup, ...] = ()
    failed: tuple[FailedGroup, ...] = ()
    unbacked: tuple[FailedGroup, ...] = ()
    removed_delete_files: int = 0
    rewriter: str | None = None
    rewritten_by: str | None = None
    note: str | None = None

    @property
    def failed_groups(self) -> tuple[FailedGroup, ...]:
        return (*self.failed, *self.unbacked)

    @property
    def rewritten_data_files(self) -> int:
        return sum(group.rewritten_data_files for group in self.groups)

    @property
    def added_data_files(self) -> int:
        return sum(group.added_data_files for group in self.groups)

    @property
    def rewritten_bytes(self) -> int:
        return sum(group.rewritten_bytes for group in self.groups)


class DataFileRewrite:
    """The data-file stage of one rewrite run, one :meth:`attempt` at a time (the job's commit retries call
    it): the rewriter chosen (:func:`choose_rewriter`), run, and its groups accounted for."""

    def __init__(self, args: RewriteJobArgs, scope: RewriteScope, own_commits: Callable[[], list[Any]]) -> None:
        self.args, self.scope, self.own_commits = args, scope, own_commits
        self.choice: Choice | None = None
        self.result = DataFilesRewritten()

    def _rewrite(self) -> AttemptOutcome:
        self.choice = choose_rewriter(self.args, self.scope, self.choice)
        try:
            return self.choice.rewriter.rewrite(self.scope)
        except arrow_rewrite.NotArrowRewritable as unreadable:
            self.choice = choose_rewriter(self.args, self.scope, self.choice, unreadable=str(unreadable))
            return self.choice.rewriter.rewrite(self.scope)

    def attempt(self) -> Finished[DataFilesRewritten]:
        earlier = {int(s.snapshotId()) for s in self.own_commits()}
        outcome = self._rewrite()
        failed = (*outcome.failed, *shortfall(outcome))
        # Every reported group must be backed by files this attempt's own commits removed.
        commits = [s for s in self.own_commits()
                   if int(s.snapshotId()) not in earlier and str(s.operation()) == "replace"]
        backed, unbacked = backed_groups(self.scope.spark, self.scope.jtable, outcome.groups, commits)
        assert self.choice is not None
        so_far = self.result
        self.result = DataFilesRewritten(
            (*so_far.groups, *backed), failed, (*so_far.unbacked, *unbacked),
            so_far.removed_delete_files + outcome.removed_delete_files, self.choice.rewriter.name,
            self.choice.rewriter.rewritten_by, self.choice.note)
        dropped = [group for group in failed if group.reason == DROPPED]
        unfinished = f"Iceberg dropped the commit of {len(dropped)} file groups (partial progress)" if dropped else None
        return Finished("committed" if outcome.groups else "nothing to commit", self.result, unfinished)
