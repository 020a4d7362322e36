"""Repair a format v3 table's deletion vectors in Spark: merge each data file's DVs into one, drop dangling ones.

For every live data file with more than one live DV, each DV's blob is read from its Puffin file
(``PositionDeleteIndex.deserialize``, which checks the blob against the DV's metadata), the deleted
positions are united, and one new DV holding all of them is written (``BaseDVFileWriter``). DVs
whose data file is not live delete nothing and are dropped. One ``RowDelta``, validated from the
snapshot that was read, removes the old DVs and adds the merged ones: a concurrent writer's DV for
a repaired file, or the file's removal, fails the commit, which is planned again (bounded retries).
No data file is touched and no row changes but those already deleted stay deleted; the job then
reads the repaired snapshot's DVs again and counts the rows they delete.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from airflow_lake_provider.core.contracts import RepairDeletionVectorsJobArgs, RepairDeletionVectorsResult
from airflow_lake_provider.core.deletion_vectors import DeletionVectorProblems
from airflow_lake_provider.jobs import iceberg
from airflow_lake_provider.jobs.commit_retry import CommitConflict, CommitRetries, Finished
from airflow_lake_provider.jobs.deletion_vectors import check_after, read_problems

#: The snapshot property that marks this job's commit (a retried task finds it).
REPAIR_ID_PROPERTY = "lake.repair-deletion-vectors-id"


class RepairConflict(CommitConflict):
    """Every attempt of the repair's commit conflicted with another writer's commit."""


class RepairMismatch(RuntimeError):
    """The repaired snapshot does not delete the rows the old DVs deleted."""


@dataclass
class _Plan:
    snapshot_id: int
    problems: DeletionVectorProblems
    merges: list[tuple[list[Any], Any]] = field(default_factory=list)  # (old DVs, merged index) per data file
    dangling: list[Any] = field(default_factory=list)  # Java DeleteFiles
    deleted_rows: int = 0


def _live_deletion_vectors(spark, jtable, snapshot) -> dict[tuple[str, int], Any]:
    """``(puffin path, offset) -> DeleteFile`` of the snapshot's live DVs, from its delete manifests."""
    is_dv = spark.sparkContext._jvm.org.apache.iceberg.util.ContentFileUtil.isDV
    return {(str(f.location()), int(f.contentOffset())): f
            for f in iceberg.live_delete_files(jtable, snapshot) if is_dv(f)}


def _read_index(spark, jtable, dv):
    """The positions one DV deletes, read from its blob (checked against the DV's own metadata).

    The blob goes through a ``ByteBuffer``: py4j hands a Java ``byte[]`` to Python as a copy, so a
    ``byte[]`` filled in Java would arrive empty; the buffer's bytes come back once, whole."""
    jvm = spark.sparkContext._jvm
    length = int(dv.contentSizeInBytes())
    buffer = jvm.java.nio.ByteBuffer.allocate(length)
    stream = jtable.io().newInputFile(dv.location()).newStream()
    try:
        stream.seek(int(dv.contentOffset()))
        channel = jvm.java.nio.channels.Channels.newChannel(stream)
        while buffer.hasRemaining():
            if channel.read(buffer) < 0:
                raise EOFError(f"{dv.location()} ends inside the deletion vector at offset {dv.contentOffset()}")
    finally:
        stream.close()
    return jvm.org.apache.iceberg.deletes.PositionDeleteIndex.deserialize(buffer.array(), dv)


def _plan(spark, catalog: str, table: str, jtable) -> _Plan | None:
    snapshot = jtable.currentSnapshot()
    if snapshot is None:
        return None
    snapshot_id = int(snapshot.snapshotId())
    problems = read_problems(spark, catalog, table, snapshot_id)
    if not problems:
        return _Plan(snapshot_id, problems)
    live = _live_deletion_vectors(spark, jtable, snapshot)
    plan = _Plan(snapshot_id, problems)
    dangling = {(dv.path, dv.offset) for dv in problems.dangling}
    plan.dangling = [live[key] for key in sorted(dangling)]
    for _, dvs in sorted(problems.duplicates.items()):
        if (dvs[0].path, dvs[0].offset) in dangling:
            continue  # the data file is gone: its DVs are dropped, not merged
        old = [live[(dv.path, dv.offset)] for dv in dvs]
        merged = _read_index(spark, jtable, old[0])
        for dv in old[1:]:
            merged.merge(_read_index(spark, jtable, dv))  # the union: every row any of them deleted
        plan.merges.append((old, merged))
        plan.deleted_rows += int(merged.cardinality())
    return plan


def _write_merged(spark, jtable, plan: _Plan, operation_id: str) -> list[Any]:
    """One new DV per repaired data file (in one Puffin file), in the data file's partition."""
    writer = iceberg.deletion_vector_writer(spark, jtable, operation_id)
    try:
        for old, merged in plan.merges:
            first = old[0]  # a DV sits in its data file's spec and partition
            writer.delete(first.referencedDataFile(), merged, jtable.specs().get(first.specId()), first.partition())
    finally:
        writer.close()
    return list(writer.result().deleteFiles())


def _commit(spark, jtable, plan: _Plan, added: list[Any], properties: dict[str, str]) -> None:
    jvm = spark.sparkContext._jvm
    delta = jtable.newRowDelta()
    for old, _ in plan.merges:
        for dv in old:
            delta = delta.removeDeletes(dv)  # matched by path and offset: other DVs of the Puffin file stay
    for dv in plan.dangling:
        delta = delta.removeDeletes(dv)
    for dv in added:
        delta = delta.addDeletes(dv)
    repaired = jvm.java.util.ArrayList()
    for old, _ in plan.merges:
        repaired.add(old[0].referencedDataFile())
    delta = (delta.validateFromSnapshot(plan.snapshot_id)
             .validateDataFilesExist(repaired)  # not compacted or removed since
             .validateDeletedFiles())  # a concurrent DV for a repaired file fails Iceberg's own DV check
    for key, value in properties.items():
        delta = delta.set(key, value)
    delta.commit()


def run(spark, catalog: str, raw_args: dict[str, Any]) -> dict[str, Any]:
    args = RepairDeletionVectorsJobArgs.from_json(raw_args).validate()
    table, dry_run = args.table, args.dry_run
    properties = {str(k): str(v) for k, v in args.snapshot_properties.items()}
    properties[REPAIR_ID_PROPERTY] = uuid.uuid4().hex
    jtable = iceberg.load_table(spark, catalog, table)
    before = iceberg.current_snapshot_id(jtable)
    version = iceberg.format_version(jtable)
    if version < 3:
        return RepairDeletionVectorsResult.unchanged(table, version, before, dry_run=dry_run).to_json()
    outcome: dict[str, Any] = {}

    def repair_once() -> Finished[None]:
        plan = outcome["plan"] = _plan(spark, catalog, table, jtable)
        outcome["added"] = []
        if plan is None or not plan.problems:
            return Finished("nothing to repair", None)
        if dry_run:
            return Finished("dry run", None)
        added = _write_merged(spark, jtable, plan, properties[REPAIR_ID_PROPERTY]) if plan.merges else []
        try:
            _commit(spark, jtable, plan, added, properties)
        except Exception:
            iceberg.delete_quietly(jtable, added)
            raise
        outcome["added"] = added
        return Finished("committed", None)

    def give_up(attempts) -> str:
        return (f"Repairing the deletion vectors of {table} conflicted with another writer's commit on all "
                f"{len(attempts)} attempts (last: {attempts[-1].detail}). This run changed nothing in the table. "
                "What to do: pause the writer that adds deletion vectors, then run the repair again.")

    retries = CommitRetries(jtable, max_attempts=args.max_attempts, backoff=args.retry_backoff_seconds,
                            give_up=give_up, error=RepairConflict)
    retries.run("repair deletion vectors", repair_once)
    plan: _Plan | None = outcome["plan"]
    committed = [int(s.snapshotId())
                 for s in iceberg.commits_tagged(jtable, before, REPAIR_ID_PROPERTY, properties[REPAIR_ID_PROPERTY])]
    if committed and plan is not None:
        check_after(spark, catalog, table, committed[-1], doing="repair")
        repaired = {str(dv.referencedDataFile()): int(dv.recordCount()) for dv in outcome["added"]}
        expected = {str(old[0].referencedDataFile()): int(merged.cardinality()) for old, merged in plan.merges}
        if repaired != expected:
            raise RepairMismatch(f"The merged deletion vectors of {table} (snapshot {committed[-1]}) delete "
                                 f"{repaired} rows per data file where the old ones deleted {expected}. Roll the "
                                 "table back to the snapshot before this commit and report this.")
    merges = plan.merges if plan else []
    return RepairDeletionVectorsResult(
        table=table, format_version=version, dry_run=dry_run, snapshot_id_before=before,
        repaired_snapshot_id=plan.snapshot_id if plan else before, committed_snapshot_ids=committed,
        snapshot_id_after=iceberg.current_snapshot_id(jtable),
        found=plan.problems.to_json() if plan else {},
        repaired_data_files=len(merges), merged_deletion_vectors=sum(len(old) for old, _ in merges),
        added_deletion_vectors=len(merges) if dry_run else len(outcome["added"]),
        dropped_dangling_deletion_vectors=len(plan.dangling) if plan else 0,
        deleted_rows=plan.deleted_rows if plan else 0,
        attempts=retries.to_json(),
    ).to_json()
