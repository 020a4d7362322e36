"""Rewrite data files (compaction) of exactly the planned partitions, and report honestly.

Takes :class:`~airflow_lake_provider.core.contracts.RewriteJobArgs` and returns
:class:`~airflow_lake_provider.core.contracts.RewriteResult`; their fields and defaults are
there. ``use-starting-sequence-number`` defaults to false here, see :data:`SAFE_OPTION_DEFAULTS`.

Concurrent writers: a commit that conflicts (Iceberg's ``ValidationException`` or
``CommitFailedException``) is retried with bounded backoff, each attempt planning the same
partitions again from the table's current snapshot; after the last attempt the job fails with
:class:`RewriteConflict`, saying what happened and what to do. Under partial progress Iceberg
only logs a file group whose commit it dropped: this job plans the groups itself before the
rewrite, compares them with what was committed, retries the shortfall, and reports what is
still missing in ``failed_groups``. Its own commits are recognised by a ``lake.rewrite-id``
property unique to this run, so another writer's snapshot is never reported as its own.

The data rewrite itself is :mod:`~airflow_lake_provider.jobs.rewriters` (Iceberg's planner, Iceberg's
Spark action or the Arrow rewriter behind one seam, one commit manager; the rewriter chosen in one
function). After it, in this order: the delete files no live data file needs any more are removed
from metadata (``drop_dangling_deletes``, :mod:`~airflow_lake_provider.jobs.dangling_deletes`),
then the remaining position deletes are rewritten (``rewrite_position_deletes``), except where
Iceberg 1.10.x cannot (a list or map column, :mod:`~airflow_lake_provider.core.delete_files`):
then ``position_deletes`` says ``skipped`` and why, and the step still succeeds; then the manifests
(``rewrite_manifests``). Every stage runs under the same commit retries (``jobs/commit_retry.py``).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from airflow_lake_provider.core.contracts import PlannedPartition, RewriteJobArgs, RewriteResult, removed_delete_files
from airflow_lake_provider.core.delete_files import (
    dangling_delete_removal_refused,
    dangling_delete_removal_unsafe,
    position_delete_rewrite_blocked,
    position_delete_rewrite_bug,
)
from airflow_lake_provider.core.snapshots import counts_no_delete_files
from airflow_lake_provider.jobs import dangling_deletes, iceberg
from airflow_lake_provider.jobs.commit_retry import (
    AttemptRecord,
    CommitConflict,
    CommitRetries,
    Finished,
    conflict_reason,
)
from airflow_lake_provider.jobs.deletion_vectors import check_after, check_before
from airflow_lake_provider.jobs.rewriters import DataFileRewrite, RewriteScope

_TRANSFORM = re.compile(r"^(bucket|truncate)\[(\d+)\]$")


REWRITE_ID_PROPERTY = "lake.rewrite-id"
# Options this job sets unless the caller does. Iceberg's default use-starting-sequence-number=true
# gives the new files the starting snapshot's data sequence number and skips the check for
# equality deletes committed meanwhile; Iceberg 1.10's commit may then drop such a delete as
# "older than every data file" although it still applies to the new files, and the deleted rows
# come back (apache/iceberg#10962; tests/test_concurrency_matrix.py race e). With false that
# delete is a conflict, retried from the current snapshot, where the rewrite applies it.
SAFE_OPTION_DEFAULTS = {"use-starting-sequence-number": "false"}


class PlannedSnapshotGone(Exception):
    """The planned snapshot is no longer the current snapshot or one of its ancestors."""


class RewriteConflict(CommitConflict):
    """Every attempt of the rewrite conflicted with another writer's commit."""


def _partition_expression(spark, jtable, partitions: Sequence[PlannedPartition]):
    """OR over planned partitions of AND over their fields: ``term(field) == value``."""
    exprs = spark._jvm.org.apache.iceberg.expressions.Expressions
    schema = jtable.schema()
    any_partition = exprs.alwaysFalse()
    for item in partitions:
        spec = jtable.specs().get(item.spec_id)
        values = item.partition
        clause = exprs.alwaysTrue()
        for field in spec.fields():
            name = str(field.name())
            if name not in values:
                continue
            source = str(schema.findColumnName(field.sourceId()))
            transform = str(field.transform())
            if transform == "identity":
                term = exprs.ref(source)
            elif transform in ("year", "month", "day", "hour"):
                term = getattr(exprs, transform)(source)
            elif match := _TRANSFORM.match(transform):
                kind, width = match.groups()
                term = getattr(exprs, kind)(source, int(width))
            else:
                raise ValueError(f"Cannot filter on partition field {name!r} with transform {transform}")
            value = values[name]
            predicate = exprs.isNull(term) if value is None else exprs.equal(term, value)
            clause = getattr(exprs, "and")(clause, predicate)  # `and`/`or` are Python keywords
        any_partition = getattr(exprs, "or")(any_partition, clause)
    return any_partition


def _conflict_message(table_name: str, attempts: Sequence[AttemptRecord], committed: list[int]) -> str:
    kept = (f"The commits it did make ({committed}) are kept, and a retried task finds them."
            if committed else "This run changed nothing in the table.")
    return (
        f"Compaction of {table_name} conflicted with another writer's commit on all {len(attempts)} attempts "
        f"(last: {attempts[-1].detail}). Another job changed the same data files while they were being "
        f"rewritten: a merge-on-read DELETE, UPDATE or MERGE, or a second compaction. {kept} What to do: run "
        "the task again later (it plans from the current snapshot), schedule compaction away from that writer, "
        "narrow partition_filter to partitions it does not touch, or enable partial progress "
        "(options={'partial-progress.enabled': 'true'}) so that the groups that do not conflict are committed."
    )


def _refuse_unsafe_dangling_delete_removal(spark, jtable, options: dict[str, str]) -> None:
    """Refuse Iceberg's ``remove-dangling-deletes`` on a table with equality deletes when the runtime's
    release may bring their rows back (before 1.12, ``core/delete_files.py``). Decided here, in the
    driver: only the runtime on the class path knows its version (a cluster's image may bring its own)."""
    if str(options.get("remove-dangling-deletes", "false")).strip().lower() != "true":
        return
    version = str(spark._jvm.org.apache.iceberg.IcebergBuild.version())
    if not dangling_delete_removal_unsafe(version):
        return
    snapshot = jtable.currentSnapshot()
    equality_deletes = iceberg.summary(snapshot).get("total-equality-deletes") if snapshot is not None else "0"
    if equality_deletes != "0":  # a writer that keeps no totals may have written some: refused too
        raise ValueError(dangling_delete_removal_refused(version))


def _holds_deletion_vectors(jtable) -> bool:
    """Format v3 with delete files in the current snapshot (a v2 table's deletes are never DVs)."""
    snapshot = jtable.currentSnapshot()
    return iceberg.format_version(jtable) >= 3 and snapshot is not None \
        and not counts_no_delete_files(iceberg.summary(snapshot))


@dataclasses.dataclass(frozen=True)
class _Run:
    """What every stage of one run shares: the arguments, the table and its snapshot before the run, what the
    data rewrite rewrites with (``scope``), the commit retries, which record every attempt, and this run's
    own commits (``own_commits()``: those carrying its ``lake.rewrite-id``, oldest first)."""

    args: RewriteJobArgs
    catalog: str
    scope: RewriteScope
    before: int | None
    retries: CommitRetries
    own_commits: Callable[[], list[Any]]

    @classmethod
    def open(cls, spark, catalog: str, args: RewriteJobArgs) -> _Run:
        """The run on the table as it is now, refused when the plan's snapshot left its history."""
        jtable = iceberg.load_table(spark, catalog, args.table)
        before = iceberg.current_snapshot_id(jtable)
        planned = args.planned_snapshot_id
        if planned is not None and not iceberg.is_ancestor(spark, jtable, planned):
            raise PlannedSnapshotGone(
                f"Planned snapshot {planned} of {args.table} is no longer the current snapshot ({before}) "
                "or one of its ancestors: the table was rolled back or the snapshot expired. Plan again."
            )
        if _holds_deletion_vectors(jtable):
            # Two DVs for a file: no engine reads it.
            check_before(spark, catalog, args.table, before, doing="rewrite", jtable=jtable)
        expression = _partition_expression(spark, jtable, args.partitions) if args.partitions is not None else None
        _refuse_unsafe_dangling_delete_removal(spark, jtable, args.options)
        props = {**args.snapshot_properties, REWRITE_ID_PROPERTY: uuid.uuid4().hex}
        own = functools.partial(iceberg.commits_tagged, jtable, before, REWRITE_ID_PROPERTY, props[REWRITE_ID_PROPERTY])
        retries = CommitRetries(
            jtable, max_attempts=args.max_attempts, backoff=float(args.retry_backoff_seconds), error=RewriteConflict,
            give_up=lambda attempts: _conflict_message(args.table, attempts, [int(s.snapshotId()) for s in own()]))
        scope = RewriteScope(spark, jtable, expression, {**SAFE_OPTION_DEFAULTS, **args.options}, props)
        return cls(args, catalog, scope, before, retries, own)


def _drop_dangling_deletes(run: _Run) -> dict[str, Any]:
    """Delete files no live data file needs, removed from metadata (before the position-delete rewrite:
    what applies to nothing goes without being read)."""
    return run.retries.run("drop dangling deletes", functools.partial(_dangling_attempt, run))


def _dangling_attempt(run: _Run) -> Finished[dict[str, Any]]:
    scope = run.scope
    report, moved_on = dangling_deletes.drop(scope.spark, run.catalog, run.args.table, scope.jtable, scope.props)
    return Finished("committed" if report["snapshot_id"] else "nothing to remove", report, moved_on)


@dataclasses.dataclass(frozen=True)
class _PositionDeletes:
    """What the position-delete rewrite did, or why it was ``skipped`` (then it did nothing)."""

    scope: str
    rewritten_delete_files: int = 0
    added_delete_files: int = 0
    rewritten_bytes: int = 0
    skipped: str | None = None

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        if self.skipped is None:
            del data["skipped"]
        return data


def _rewrite_position_deletes(run: _Run) -> _PositionDeletes:
    """The remaining position deletes rewritten, unless Iceberg's release cannot (``core/delete_files.py``)."""
    spark, jtable = run.scope.spark, run.scope.jtable
    where = "planned partitions" if run.scope.expression is not None else "whole table"
    version = str(spark._jvm.org.apache.iceberg.IcebergBuild.version())
    schema = json.loads(str(spark._jvm.org.apache.iceberg.SchemaParser.toJson(jtable.schema())))
    blocked = position_delete_rewrite_blocked(version, schema)
    done = _PositionDeletes(where, skipped=blocked) if blocked is not None else run.retries.run(
        "rewrite position deletes", functools.partial(_position_delete_attempt, run, where, version))
    if done.skipped is not None:
        print(f"rewrite: position deletes of {run.args.table} {done.skipped}", flush=True)
    return done


def _position_delete_attempt(run: _Run, where: str, version: str) -> Finished[_PositionDeletes]:
    spark, jtable, expression = run.scope.spark, run.scope.jtable, run.scope.expression
    snapshot = jtable.currentSnapshot()
    if snapshot is None or counts_no_delete_files(iceberg.summary(snapshot)):
        # What Iceberg's action reports with nothing to rewrite, without starting Spark for it.
        return Finished("nothing to do", _PositionDeletes(where))
    action = iceberg.with_properties(iceberg.actions(spark).rewritePositionDeletes(jtable), run.scope.props)
    for key, value in run.args.position_delete_options.items():
        action = action.option(str(key), str(value))
    if expression is not None:
        # The data rewrite's partitions only: a backfill of one day leaves the other days'
        # delete files as they are (rewrite-all alone would rewrite every one of them).
        action = action.filter(expression)
    try:
        done = action.execute()
    except Exception as failure:  # only Iceberg's list/map bug is excused
        # A ValidationException, but no conflict: trying again would fail the same way.
        reason = position_delete_rewrite_bug(version, conflict_reason(failure))
        if reason is None:
            raise
        return Finished("skipped", _PositionDeletes(where, skipped=reason))
    return Finished("committed", _PositionDeletes(where, int(done.rewrittenDeleteFilesCount()),
                                                  int(done.addedDeleteFilesCount()), int(done.rewrittenBytesCount())))


def _rewrite_manifests(run: _Run) -> dict[str, int]:
    done = run.retries.run("rewrite manifests", functools.partial(_manifests_attempt, run))
    return {"rewritten_manifests": len(list(done.rewrittenManifests())),
            "added_manifests": len(list(done.addedManifests()))}


def _manifests_attempt(run: _Run) -> Finished[Any]:
    action = iceberg.actions(run.scope.spark).rewriteManifests(run.scope.jtable)
    return Finished("committed", iceberg.with_properties(action, run.scope.props).execute())


def run(spark, catalog: str, raw_args: dict[str, Any]) -> dict[str, Any]:
    args = RewriteJobArgs.from_json(raw_args).validate()
    job = _Run.open(spark, catalog, args)
    data = job.retries.run("rewrite data files", DataFileRewrite(args, job.scope, job.own_commits).attempt)
    dangling = _drop_dangling_deletes(job) if args.drop_dangling_deletes else None
    position_deletes = _rewrite_position_deletes(job) if args.rewrite_position_deletes else None
    manifests = _rewrite_manifests(job) if args.rewrite_manifests else None
    commits = job.own_commits()
    if commits and _holds_deletion_vectors(job.scope.jtable):
        check_after(spark, catalog, args.table, int(commits[-1].snapshotId()), doing="rewrite", jtable=job.scope.jtable)
    return RewriteResult.of(
        args,
        snapshot_id_before=job.before,
        # Only snapshots carrying this run's lake.rewrite-id: never another writer's commit.
        committed_snapshot_ids=tuple(int(s.snapshotId()) for s in commits),
        snapshot_id_after=iceberg.current_snapshot_id(job.scope.jtable),
        rewritten_data_files=data.rewritten_data_files,
        added_data_files=data.added_data_files,
        rewritten_bytes=data.rewritten_bytes,
        **removed_delete_files([{**iceberg.summary(s), "operation": str(s.operation())} for s in commits]),
        groups=tuple(group.to_json() for group in data.groups),
        failed_groups=tuple(group.to_json() for group in data.failed_groups),
        attempts=tuple(job.retries.to_json()),
        position_deletes=position_deletes.to_json() if position_deletes is not None else None,
        dangling_deletes=dangling,
        manifests=manifests,
        rewriter=data.rewriter,
        rewritten_by=data.rewritten_by,
        rewriter_note=data.note,
    ).to_json()
