"""Turn a snapshot's equality deletes into position deletes (v2) or deletion vectors (v3).

No data file is rewritten, and no row changes: the same rows are deleted afterwards, but a
reader finds them by position instead of comparing every row with every deleted key. That is
what makes reads of tables written by Flink upsert/CDC pipelines cheaper, and what lets
PyIceberg (which cannot apply equality deletes) read them again.

Args: :class:`~airflow_lake_provider.core.contracts.ConvertEqualityDeletesJobArgs` (the snapshot
properties go on the commit, so a retried task finds it; the commit retry is
:class:`~airflow_lake_provider.core.contracts.CommitRetry`); result:
:class:`~airflow_lake_provider.core.contracts.ConvertEqualityDeletesResult`.

One attempt, on the current snapshot S:

1. The equality delete files live in S, read from its delete manifests.
2. The data files they apply to: Iceberg's own planner (``newScan().useSnapshot(S).planFiles()``)
   attaches to each data file the delete files that apply to it (sequence numbers, partition,
   global deletes of unpartitioned specs); every data file with an equality delete attached is
   affected. Equality matching itself is never re-implemented here.
3. The positions deleted in each affected file: all its positions (``0 .. record_count-1``)
   minus those still visible at S, read by Spark with the ``_file``/``_pos`` metadata columns
   (Iceberg applies every delete with its own semantics: nulls, types, sequence numbers). This
   set also holds what the file's existing position deletes or deletion vector delete, so the
   new file replaces a file-scoped one instead of adding a second (v3 allows one DV per file).
4. One file-scoped position delete file per affected data file (v2, Parquet, Iceberg's own
   writer) or one deletion vector per affected data file (v3, one Puffin file).
5. One ``RowDelta`` based on S: add them, remove the equality delete files and the replaced
   file-scoped deletes, and validate from S that the affected data files still exist (not
   compacted or deleted since), that the removed delete files are still live, and that no
   other writer added delete files since (a concurrent DELETE on those files). A concurrent
   append commits fine. A validation failure is retried from the new current snapshot
   (:mod:`~airflow_lake_provider.jobs.commit_retry`); the files the failed attempt wrote are
   deleted.
6. Verify: the rows visible in the affected files at the new snapshot, counted by Spark, are
   exactly those visible at S.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from airflow_lake_provider.core.contracts import (
    ConvertEqualityDeletesJobArgs,
    ConvertEqualityDeletesResult,
)
from airflow_lake_provider.jobs import iceberg
from airflow_lake_provider.jobs.commit_retry import AttemptRecord, CommitConflict, CommitRetries, Finished

CONVERT_ID_PROPERTY = "lake.convert-id"
EQUALITY_DELETES = "EQUALITY_DELETES"
POSITION_DELETES = "POSITION_DELETES"


class ConversionConflict(CommitConflict):
    """Every attempt of the conversion conflicted with another writer's commit."""


class ConversionMismatch(Exception):
    """The committed snapshot shows other rows than the snapshot it converted (never expected)."""


@dataclass
class AffectedDataFile:
    """A data file some equality delete applies to, and the file-scoped deletes it already has."""

    path: str
    record_count: int
    spec: Any  # Java PartitionSpec
    partition: Any  # Java StructLike
    file_scoped_deletes: list[Any] = field(default_factory=list)  # Java DeleteFiles replaced by ours


@dataclass
class ConversionPlan:
    snapshot_id: int
    equality_delete_files: list[Any]  # Java DeleteFiles
    equality_delete_records: int
    affected: dict[str, AffectedDataFile]
    deleted_positions: dict[str, list[int]]

    @property
    def replaced_delete_files(self) -> list[Any]:
        return [d for path in self.deleted_positions for d in self.affected[path].file_scoped_deletes]

    @property
    def deleted_rows(self) -> int:
        return sum(len(positions) for positions in self.deleted_positions.values())


def _content(content_file) -> str:
    return str(content_file.content().toString())


def live_equality_delete_files(jtable, snapshot) -> list[Any]:
    """Every live equality delete file of ``snapshot``, from its delete manifests.

    Read from the manifests rather than from scan tasks so that an equality delete that applies
    to no data file any more is found (and removed) too.
    """
    return [f for f in iceberg.live_delete_files(jtable, snapshot) if _content(f) == EQUALITY_DELETES]


def affected_data_files(spark, jtable, snapshot_id: int) -> dict[str, AffectedDataFile]:
    """Data files of the snapshot with at least one equality delete attached by Iceberg's planner.

    A position delete file counts as file-scoped when Iceberg's ``ContentFileUtil`` says so: it
    names one referenced data file, or its ``file_path`` bounds are one path (v2 writers).
    """
    file_util = spark.sparkContext._jvm.org.apache.iceberg.util.ContentFileUtil
    affected: dict[str, AffectedDataFile] = {}
    specs: dict[int, Any] = {}
    tasks = jtable.newScan().useSnapshot(snapshot_id).planFiles()
    try:
        iterator = tasks.iterator()
        while iterator.hasNext():
            task = iterator.next()
            deletes = list(task.deletes())
            contents = [_content(d) for d in deletes]
            if EQUALITY_DELETES not in contents:
                continue
            data_file = task.file()
            path = str(data_file.location())
            spec_id = int(data_file.specId())
            if spec_id not in specs:
                specs[spec_id] = jtable.specs().get(spec_id)
            scoped = [d for d, kind in zip(deletes, contents, strict=True)
                      if kind == POSITION_DELETES and str(file_util.referencedDataFileLocation(d) or "") == path]
            affected[path] = AffectedDataFile(path, int(data_file.recordCount()), specs[spec_id],
                                              data_file.partition(), scoped)
    finally:
        tasks.close()
    return affected


def _read_snapshot(spark, catalog: str, table_name: str, snapshot_id: int):
    return spark.read.format("iceberg").option("versionAsOf", str(snapshot_id)).load(f"{catalog}.{table_name}")


def deleted_positions(spark, catalog: str, table_name: str, snapshot_id: int,
                      affected: dict[str, AffectedDataFile]) -> dict[str, list[int]]:
    """Per affected data file, the positions no reader of the snapshot sees (sorted).

    All positions of a file are ``0 .. record_count-1``, known from metadata; Spark reads only the
    visible ``(_file, _pos)`` of the snapshot and reports the gaps between consecutive visible
    positions of each affected file (and after its last one), so only the deleted ranges reach
    the driver. A file with no visible row left has lost every position. (One read and one sort:
    an anti-join against every position, tried first, cost 7 full reads in the benchmark.)
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    if not affected:
        return {}
    files = spark.createDataFrame([(p, f.record_count) for p, f in affected.items()],
                                  "file_path string, record_count long")
    by_file = Window.partitionBy("file_path").orderBy("pos")
    edges = (_read_snapshot(spark, catalog, table_name, snapshot_id)
             .select(F.col("_file").alias("file_path"), F.col("_pos").alias("pos"))
             .join(F.broadcast(files), "file_path")
             .withColumn("previous", F.lag("pos").over(by_file))
             .withColumn("following", F.lead("pos").over(by_file))
             .where("pos > coalesce(previous, -1) + 1 OR following IS NULL"))
    deleted: dict[str, list[int]] = {}
    seen: set[str] = set()
    for row in edges.collect():
        path, pos = row["file_path"], row["pos"]
        gap_start = (row["previous"] if row["previous"] is not None else -1) + 1
        if pos > gap_start:  # rows deleted just before this visible one
            deleted.setdefault(path, []).extend(range(gap_start, pos))
        if row["following"] is None:  # the file's last visible row: what follows it is deleted
            seen.add(path)
            deleted.setdefault(path, []).extend(range(pos + 1, row["record_count"]))
    for path, target in affected.items():
        if path not in seen and target.record_count > 0:  # no row of the file is visible any more
            deleted[path] = list(range(target.record_count))
    return {path: sorted(positions) for path, positions in deleted.items() if positions}


def visible_rows_in(spark, catalog: str, table_name: str, snapshot_id: int, paths: list[str]) -> int:
    from pyspark.sql import functions as F

    if not paths:
        return 0
    return (_read_snapshot(spark, catalog, table_name, snapshot_id)
            .where(F.col("_file").isin(paths)).count())


def _untimed(stage: str, fn, *args):
    return fn(*args)


def plan_conversion(spark, catalog: str, table_name: str, jtable, timed=_untimed) -> ConversionPlan | None:
    """What converting the current snapshot means; ``None`` when it has no equality deletes.

    ``timed(stage, fn, *args)`` may measure the two stages: ``metadata`` (which delete files apply
    to which data files, from manifests) and ``positions`` (the Spark read).
    """
    snapshot = jtable.currentSnapshot()
    if snapshot is None:
        return None
    equality = timed("metadata", live_equality_delete_files, jtable, snapshot)
    if not equality:
        return None
    snapshot_id = int(snapshot.snapshotId())
    affected = timed("metadata", affected_data_files, spark, jtable, snapshot_id)
    return ConversionPlan(
        snapshot_id=snapshot_id,
        equality_delete_files=equality,
        equality_delete_records=sum(int(f.recordCount()) for f in equality),
        affected=affected,
        deleted_positions=timed("positions", deleted_positions, spark, catalog, table_name, snapshot_id, affected),
    )


def write_position_delete_files(spark, jtable, plan: ConversionPlan, operation_id: str) -> list[Any]:
    """Format v2: one file-scoped Parquet position delete file per affected data file."""
    jvm = spark.sparkContext._jvm
    factory = iceberg.file_factory(spark, jtable, "PARQUET", operation_id)
    written = []
    for path, positions in plan.deleted_positions.items():
        target = plan.affected[path]
        output_file = factory.newOutputFile(target.spec, target.partition)
        writer = (jvm.org.apache.iceberg.parquet.Parquet.writeDeletes(output_file)
                  .setAll(jtable.properties())  # the table's Parquet settings (compression...)
                  .withSpec(target.spec).withPartition(target.partition).overwrite()
                  .buildPositionWriter())  # no row schema: (file_path, pos) only
        record = jvm.org.apache.iceberg.deletes.PositionDelete.create()
        try:
            for position in positions:  # sorted, as the spec requires
                writer.write(record.set(path, position))
        finally:
            writer.close()
        # Named as the one data file it references: file-scoped deletes are what Iceberg's planner
        # indexes by path and what its delete-ratio compaction counts.
        written.append(jvm.org.apache.iceberg.FileMetadata.deleteFileBuilder(target.spec)
                       .copy(writer.toDeleteFile()).withReferencedDataFile(path).build())
    return written


def write_deletion_vectors(spark, jtable, plan: ConversionPlan, operation_id: str) -> list[Any]:
    """Format v3: one deletion vector per affected data file (Iceberg's DV writer, one Puffin file)."""
    writer = iceberg.deletion_vector_writer(spark, jtable, operation_id)
    try:
        for path, positions in plan.deleted_positions.items():
            target = plan.affected[path]
            for position in positions:
                writer.delete(path, position, target.spec, target.partition)
    finally:
        writer.close()
    return list(writer.result().deleteFiles())


def commit_conversion(spark, jtable, plan: ConversionPlan, added: list[Any], properties: dict[str, str]) -> None:
    """One RowDelta based on the planned snapshot, failing if another writer touched what it relies on."""
    jvm = spark.sparkContext._jvm
    delta = jtable.newRowDelta()
    for delete_file in added:
        delta = delta.addDeletes(delete_file)
    for delete_file in [*plan.equality_delete_files, *plan.replaced_delete_files]:
        delta = delta.removeDeletes(delete_file)
    referenced = jvm.java.util.ArrayList()
    for path in plan.deleted_positions:
        referenced.add(path)
    delta = (delta.validateFromSnapshot(plan.snapshot_id)
             .validateDataFilesExist(referenced)  # not compacted or removed since
             .validateDeletedFiles()  # ... nor removed by a delete; removed delete files still live
             .validateNoConflictingDeleteFiles())  # no delete added since (a concurrent DELETE)
    for key, value in properties.items():
        delta = delta.set(key, value)
    delta.commit()


def run(spark, catalog: str, raw_args: dict[str, Any]) -> dict[str, Any]:
    args = ConvertEqualityDeletesJobArgs.from_json(raw_args).validate()
    table_name, dry_run = args.table, args.dry_run
    props = {str(k): str(v) for k, v in args.snapshot_properties.items()}
    props[CONVERT_ID_PROPERTY] = uuid.uuid4().hex
    jtable = iceberg.load_table(spark, catalog, table_name)
    before = iceberg.current_snapshot_id(jtable)
    version = iceberg.format_version(jtable)
    if version < 2:
        raise ValueError(f"{table_name} is a format v1 table: it has no delete files to convert.")
    writer = write_deletion_vectors if version >= 3 else write_position_delete_files

    def ours() -> list[Any]:
        return iceberg.commits_tagged(jtable, before, CONVERT_ID_PROPERTY, props[CONVERT_ID_PROPERTY])

    outcome: dict[str, Any] = {}

    seconds: dict[str, float] = {}

    def timed(stage: str, fn, *fn_args):
        started = time.perf_counter()
        try:
            return fn(*fn_args)
        finally:
            seconds[stage] = round(seconds.get(stage, 0.0) + time.perf_counter() - started, 3)

    def convert_once():
        plan = plan_conversion(spark, catalog, table_name, jtable, timed)
        outcome["plan"] = plan
        if plan is None:
            outcome["added"] = []
            return Finished("nothing to convert", None)
        if dry_run:
            outcome["added"] = []
            return Finished("dry run", None)
        added = timed("write", writer, spark, jtable, plan, props[CONVERT_ID_PROPERTY])
        try:
            timed("commit", commit_conversion, spark, jtable, plan, added, props)
        except Exception:
            iceberg.delete_quietly(jtable, added)
            raise
        outcome["added"] = added
        return Finished("committed", None)

    def give_up(attempts: Sequence[AttemptRecord]) -> str:
        return (
            f"Converting the equality deletes of {table_name} conflicted with another writer's commit on all "
            f"{len(attempts)} attempts (last: {attempts[-1].detail}). Another job deleted rows from, or "
            "compacted, the same data files meanwhile. This run changed nothing in the table. What to do: run "
            "the task again later, or schedule it away from that writer."
        )

    retries = CommitRetries(jtable, max_attempts=args.max_attempts, backoff=args.retry_backoff_seconds,
                            give_up=give_up, error=ConversionConflict)
    retries.run("convert equality deletes", convert_once)

    plan: ConversionPlan | None = outcome["plan"]
    committed = [int(s.snapshotId()) for s in ours()]
    verified = None
    if plan is not None and committed:
        paths = list(plan.deleted_positions)
        expected = sum(plan.affected[p].record_count for p in paths) - plan.deleted_rows
        after = timed("verify", visible_rows_in, spark, catalog, table_name, committed[-1], paths)
        verified = {"visible_rows_in_affected_files": expected, "after": after}
        if after != expected:
            raise ConversionMismatch(
                f"After converting the equality deletes of {table_name}, snapshot {committed[-1]} shows {after} rows "
                f"in the {len(paths)} affected data files where snapshot {plan.snapshot_id} showed {expected}. "
                "Roll the table back to the snapshot before this commit and report this."
            )
    return ConvertEqualityDeletesResult(
        table=table_name,
        format_version=version,
        dry_run=dry_run,
        snapshot_id_before=before,
        converted_snapshot_id=plan.snapshot_id if plan else before,
        committed_snapshot_ids=committed,
        snapshot_id_after=iceberg.current_snapshot_id(jtable),
        converted_equality_delete_files=len(plan.equality_delete_files) if plan else 0,
        equality_delete_records=plan.equality_delete_records if plan else 0,
        affected_data_files=len(plan.affected) if plan else 0,
        # In a dry run: what the commit would add and replace.
        added_delete_files=len(plan.deleted_positions) if plan and dry_run else len(outcome["added"]),
        replaced_delete_files=len(plan.replaced_delete_files) if plan else 0,
        deleted_rows=plan.deleted_rows if plan else 0,
        verified=verified,
        attempts=retries.to_json(),
        seconds=seconds,  # per stage, summed over attempts: metadata, positions (Spark), write, commit, verify
    ).to_json()
