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

After the data rewrite, in this order: the delete files no live data file needs any more are
removed from metadata (``drop_dangling_deletes``, :mod:`~airflow_lake_provider.jobs.dangling_deletes`),
then the remaining position deletes are rewritten (``rewrite_position_deletes``), except where
Iceberg 1.10.x cannot (a list or map column, :mod:`~airflow_lake_provider.core.delete_files`):
then ``position_deletes`` says ``skipped`` and why, and the step still succeeds.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Sequence
from typing import Any

from airflow_lake_provider.core.arrow_rewrite import arrow_refusal, cluster_reason
from airflow_lake_provider.core.contracts import (
    PlannedPartition,
    RewriteJobArgs,
    RewriteResult,
    parse_sort_order,
)
from airflow_lake_provider.core.delete_files import (
    dangling_delete_removal_refused,
    dangling_delete_removal_unsafe,
    position_delete_rewrite_blocked,
    position_delete_rewrite_bug,
)
from airflow_lake_provider.core.snapshots import counts_no_delete_files
from airflow_lake_provider.jobs import arrow_rewrite, dangling_deletes, iceberg
from airflow_lake_provider.jobs.commit_retry import CommitConflict, conflict_reason, retrying
from airflow_lake_provider.jobs.session import spark_master

_TRANSFORM = re.compile(r"^(bucket|truncate)\[(\d+)\]$")


REWRITE_ID_PROPERTY = "lake.rewrite-id"
_DROPPED = arrow_rewrite.DROPPED
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


def _sort_order(spark, jtable, text: str | None):
    terms = parse_sort_order(text)
    if not terms:
        return None
    builder = spark._jvm.org.apache.iceberg.SortOrder.builderFor(jtable.schema())
    null_order = spark._jvm.org.apache.iceberg.NullOrder
    for column, direction, nulls in terms:
        order = null_order.NULLS_FIRST if nulls == "FIRST" else null_order.NULLS_LAST
        builder = builder.asc(column, order) if direction == "ASC" else builder.desc(column, order)
    return builder.build()


def _removed_by_partition(spark, jtable, snapshots) -> dict[str, int]:
    """Data files the snapshots removed, counted by the rewrite group they belong to.

    Named by :func:`iceberg.rewrite_group_namer`, like the groups they are checked against (files
    of older specs belong to the current spec's all-null group). About four py4j round trips per
    removed file, so :func:`_backed_groups` reads files only when the summaries fall short.
    """
    name = iceberg.rewrite_group_namer(spark, jtable)
    counts: dict[str, int] = {}
    for snapshot in snapshots:
        for data_file in snapshot.removedDataFiles(jtable.io()):
            key = name(data_file.specId(), data_file.partition())
            counts[key] = counts.get(key, 0) + 1
    return counts


def _backed_groups(spark, jtable, groups: list[dict[str, Any]], commits) -> tuple[list, list]:
    """Split one attempt's reported groups into those its own commits back and those they do not.

    In bulk first, from metadata: each commit's summary counts the data files it removed
    (``deleted-data-files``). A commit of this attempt removes exactly the files of the groups it
    committed, and a committed group is always reported, so when the commits removed as many
    files as the reported groups hold, every reported group was committed: one round trip per
    commit, whatever the number of files. Only when they fall short (Iceberg dropped a group's
    commit under partial progress) are the removed files read one by one and matched to groups
    by partition, to say which groups went missing.
    """
    reported = sum(group["rewritten_data_files"] for group in groups)
    # Iceberg leaves the property out of a commit that removed no data file.
    if sum(int(iceberg.summary(commit).get("deleted-data-files", "0")) for commit in commits) == reported:
        return list(groups), []
    removed = _removed_by_partition(spark, jtable, commits)
    backed, dropped = [], []
    for group in groups:
        available = removed.get(group["partition"], 0)
        if available >= group["rewritten_data_files"]:
            removed[group["partition"]] = available - group["rewritten_data_files"]
            backed.append(group)
        else:
            dropped.append({**group, "reason": _DROPPED})
    return backed, dropped


def _planned_files_by_partition(spark, jtable, start: int, expression, options: dict[str, str]) -> dict[str, int]:
    """Data files Iceberg's planner selects from ``start``: what the rewrite is expected to commit."""
    counts: dict[str, int] = {}
    for group in iceberg.bin_pack_groups(spark, jtable, expression, start, options):
        key = _group_path(spark, jtable, group.info())
        counts[key] = counts.get(key, 0) + int(group.inputFileNum())
    return counts


def _group_path(spark, jtable, info) -> str:
    """A file group's partition (always of the current spec), named like its files."""
    return iceberg.rewrite_group_namer(spark, jtable)(jtable.spec().specId(), info.partition())


def _rewrite_once(spark, jtable, args: RewriteJobArgs, props: dict[str, str], expression,
                  chosen: dict[str, Any]) -> dict[str, Any]:
    """One attempt, planned from the table state ``jtable`` holds; returns its groups and shortfall.

    ``chosen`` holds the rewriter (``rewriter``, ``note``). Arrow is checked on every attempt (a retry
    plans from the current snapshot, which may hold another writer's delete files by then); a table
    it cannot rewrite, or a file it cannot read by field ID (what it wrote is deleted first), hands
    this and later attempts to Iceberg's Spark action.
    """
    options = {**SAFE_OPTION_DEFAULTS, **args.options}
    if chosen["rewriter"] == "arrow":
        try:
            reason = (cluster_reason(spark_master(spark)) if args.rewriter == "auto" else None) \
                or arrow_rewrite.ineligibility(spark, jtable, args.strategy, options)
            if reason is None:
                return arrow_rewrite.rewrite_once(spark, jtable, options, props, expression)
        except arrow_rewrite.NotArrowRewritable as unreadable:
            reason = str(unreadable)
        if args.rewriter == "arrow":
            raise ValueError(arrow_refusal(args.table, reason))
        chosen.update(rewriter="iceberg", note=reason)
        print(f"rewrite: {args.table} goes to Iceberg's Spark rewriter: {reason}", flush=True)
    start = jtable.currentSnapshot()
    strategy = args.strategy
    partial = options.get("partial-progress.enabled", "false").lower() == "true"
    # The planner of sort and zorder is Spark's own (package-private); binpack's is public.
    expected = (
        _planned_files_by_partition(spark, jtable, int(start.snapshotId()), expression, options)
        if partial and start is not None and strategy == "binpack"
        else None
    )
    action = iceberg.with_properties(iceberg.actions(spark).rewriteDataFiles(jtable), props)
    for key, value in options.items():
        action = action.option(key, value)
    if strategy == "sort":
        order = _sort_order(spark, jtable, args.sort_order)
        action = action.sort(order) if order is not None else action.sort()
    elif strategy == "zorder":
        action = action.zOrder(iceberg.java_array(spark, "java.lang.String", list(args.zorder_columns)))
    if expression is not None:
        action = action.filter(expression)
    result = action.execute()
    groups: list[dict[str, Any]] = [
        {
            "partition": _group_path(spark, jtable, group.info()),
            "global_index": int(group.info().globalIndex()),
            "rewritten_data_files": int(group.rewrittenDataFilesCount()),
            "added_data_files": int(group.addedDataFilesCount()),
            "rewritten_bytes": int(group.rewrittenBytesCount()),
        }
        for group in result.rewriteResults()
    ]
    failed: list[dict[str, Any]] = [
        {"partition": _group_path(spark, jtable, f.info()), "global_index": int(f.info().globalIndex()),
         "data_files": int(f.dataFilesCount()),
         "reason": "rewrite failed (writing the new files failed; see the Spark log)"}
        for f in result.rewriteFailures()
    ]
    if expected is not None:
        # Under partial progress a conflicting group's commit is only logged: find it by its shortfall.
        accounted: dict[str, int] = {}
        for item in [*groups, *failed]:
            files = item.get("rewritten_data_files", item.get("data_files", 0))
            accounted[item["partition"]] = accounted.get(item["partition"], 0) + files
        for partition, files in sorted(expected.items()):
            missing = files - accounted.get(partition, 0)
            if missing > 0:
                failed.append({"partition": partition, "data_files": missing, "reason": _DROPPED})
    return {
        "starting_snapshot_id": int(start.snapshotId()) if start is not None else None,
        "groups": groups,
        "failed_groups": failed,
        "removed_delete_files": int(result.removedDeleteFilesCount()),
    }


def _conflict_message(table_name: str, attempts: list[dict[str, Any]], committed: list[int]) -> str:
    kept = (f"The commits it did make ({committed}) are kept, and a retried task finds them."
            if committed else "This run changed nothing in the table.")
    return (
        f"Compaction of {table_name} conflicted with another writer's commit on all {len(attempts)} attempts "
        f"(last: {attempts[-1]['detail']}). Another job changed the same data files while they were being "
        f"rewritten: a merge-on-read DELETE, UPDATE or MERGE, or a second compaction. {kept} What to do: run "
        "the task again later (it plans from the current snapshot), schedule compaction away from that writer, "
        "narrow partition_filter to partitions it does not touch, or enable partial progress "
        "(options={'partial-progress.enabled': 'true'}) so that the groups that do not conflict are committed."
    )


def _retrying(stage, **retry):
    """:func:`commit_retry.retrying`, giving up with :class:`RewriteConflict`."""
    return retrying(stage, error=RewriteConflict, **retry)


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


def run(spark, catalog: str, raw_args: dict[str, Any]) -> dict[str, Any]:
    args = RewriteJobArgs.from_json(raw_args).validate()
    table_name = args.table
    props = {**args.snapshot_properties, REWRITE_ID_PROPERTY: uuid.uuid4().hex}
    jtable = iceberg.load_table(spark, catalog, table_name)
    before = iceberg.current_snapshot_id(jtable)
    planned = args.planned_snapshot_id
    if planned is not None and not iceberg.is_ancestor(spark, jtable, planned):
        raise PlannedSnapshotGone(
            f"Planned snapshot {planned} of {table_name} is no longer the current snapshot ({before}) "
            "or one of its ancestors: the table was rolled back or the snapshot expired. Plan again."
        )
    expression = _partition_expression(spark, jtable, args.partitions) if args.partitions is not None else None
    _refuse_unsafe_dangling_delete_removal(spark, jtable, args.options)

    def ours() -> list[Any]:
        return [s for s in iceberg.snapshots_after(jtable, before)
                if iceberg.summary(s).get(REWRITE_ID_PROPERTY) == props[REWRITE_ID_PROPERTY]]

    attempts: list[dict[str, Any]] = []
    retry = {
        "jtable": jtable, "attempts": attempts, "max_attempts": args.max_attempts,
        "backoff": float(args.retry_backoff_seconds),
        "give_up": lambda: _conflict_message(table_name, attempts, [int(s.snapshotId()) for s in ours()]),
    }
    confirmed: list[dict[str, Any]] = []
    unbacked: list[dict[str, Any]] = []
    last: dict[str, Any] = {"failed_groups": []}
    removed_delete_files = 0

    chosen: dict[str, Any] = {"rewriter": "iceberg" if args.rewriter == "iceberg" else "arrow", "note": None}

    def rewrite_data_files():
        nonlocal removed_delete_files
        earlier = {int(s.snapshotId()) for s in ours()}
        outcome = _rewrite_once(spark, jtable, args, props, expression, chosen)
        # Every reported group must be backed by files this attempt's own commits removed.
        commits = [s for s in ours() if int(s.snapshotId()) not in earlier and str(s.operation()) == "replace"]
        backed, not_backed = _backed_groups(spark, jtable, outcome["groups"], commits)
        confirmed.extend(backed)
        unbacked.extend(not_backed)
        last["failed_groups"] = outcome["failed_groups"]
        removed_delete_files += outcome["removed_delete_files"]
        dropped = [g for g in outcome["failed_groups"] if g["reason"] == _DROPPED]
        unfinished = f"Iceberg dropped the commit of {len(dropped)} file groups (partial progress)" if dropped else None
        return None, ("committed" if outcome["groups"] else "nothing to commit"), unfinished

    _retrying(rewrite_data_files, label="rewrite data files", **retry)
    failed_groups = [*last["failed_groups"], *unbacked]
    kept = confirmed

    dangling: dict[str, Any] | None = None
    if args.drop_dangling_deletes:
        # Before the position-delete rewrite: what applies to nothing goes without being read.
        def drop_dangling_deletes():
            report, moved_on = dangling_deletes.drop(spark, catalog, table_name, jtable, props)
            return report, ("committed" if report["snapshot_id"] else "nothing to remove"), moved_on

        dangling = _retrying(drop_dangling_deletes, label="drop dangling deletes", **retry)
        removed_delete_files += dangling["removed_delete_files"]

    position_deletes: dict[str, Any] | None = None
    if args.rewrite_position_deletes:
        scope = "planned partitions" if expression is not None else "whole table"
        version = str(spark._jvm.org.apache.iceberg.IcebergBuild.version())
        schema = json.loads(str(spark._jvm.org.apache.iceberg.SchemaParser.toJson(jtable.schema())))
        skipped = position_delete_rewrite_blocked(version, schema)

        def rewrite_position_deletes():
            snapshot = jtable.currentSnapshot()
            if snapshot is None or counts_no_delete_files(iceberg.summary(snapshot)):
                # What Iceberg's action reports with nothing to rewrite, without starting Spark for it.
                nothing = {"rewritten_delete_files": 0, "added_delete_files": 0, "rewritten_bytes": 0}
                return nothing, "nothing to do", None
            pd_action = iceberg.with_properties(iceberg.actions(spark).rewritePositionDeletes(jtable), props)
            for key, value in args.position_delete_options.items():
                pd_action = pd_action.option(str(key), str(value))
            if expression is not None:
                # The data rewrite's partitions only: a backfill of one day leaves the other days'
                # delete files as they are (rewrite-all alone would rewrite every one of them).
                pd_action = pd_action.filter(expression)
            try:
                done = pd_action.execute()
                return {"rewritten_delete_files": int(done.rewrittenDeleteFilesCount()),
                        "added_delete_files": int(done.addedDeleteFilesCount()),
                        "rewritten_bytes": int(done.rewrittenBytesCount())}, "committed", None
            except Exception as failure:  # only Iceberg's list/map bug is excused
                # A ValidationException, but no conflict: trying again would fail the same way.
                reason = position_delete_rewrite_bug(version, conflict_reason(failure))
                if reason is None:
                    raise
                return reason, "skipped", None

        pd = skipped if skipped is not None else _retrying(
            rewrite_position_deletes, label="rewrite position deletes", **retry)
        if isinstance(pd, str):
            position_deletes = {"scope": scope, "rewritten_delete_files": 0, "added_delete_files": 0,
                                "rewritten_bytes": 0, "skipped": pd}
            print(f"rewrite: position deletes of {table_name} {pd}", flush=True)
        else:
            position_deletes = {"scope": scope, **pd}
        removed_delete_files += position_deletes["rewritten_delete_files"] - position_deletes["added_delete_files"]
    manifests: dict[str, int] | None = None
    if args.rewrite_manifests:
        rm = _retrying(
            lambda: (iceberg.with_properties(iceberg.actions(spark).rewriteManifests(jtable), props).execute(),
                     "committed", None),
            label="rewrite manifests", **retry)
        manifests = {
            "rewritten_manifests": len(list(rm.rewrittenManifests())),
            "added_manifests": len(list(rm.addedManifests())),
        }

    commits = ours()
    return RewriteResult.of(
        args,
        snapshot_id_before=before,
        # Only snapshots carrying this run's lake.rewrite-id: never another writer's commit.
        committed_snapshot_ids=tuple(int(s.snapshotId()) for s in commits),
        snapshot_id_after=iceberg.current_snapshot_id(jtable),
        rewritten_data_files=sum(g["rewritten_data_files"] for g in kept),
        added_data_files=sum(g["added_data_files"] for g in kept),
        rewritten_bytes=sum(g["rewritten_bytes"] for g in kept),
        removed_delete_files=removed_delete_files,
        removed_equality_delete_files=sum(
            int(iceberg.summary(s).get("removed-equality-delete-files", "0")) for s in commits),
        groups=tuple(kept),
        failed_groups=tuple(failed_groups),
        attempts=tuple(attempts),
        position_deletes=position_deletes,
        dangling_deletes=dangling,
        manifests=manifests,
        rewriter=chosen["rewriter"],
        rewriter_note=chosen["note"],
    ).to_json()
