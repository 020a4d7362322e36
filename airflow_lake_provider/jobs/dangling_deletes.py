"""Drop the delete files no live data file needs, from metadata alone: no delete file is read.

After a compaction the delete files of the replaced data files apply to nothing. Iceberg's own
commit drops only those older than *every* live data file of the table, so on a table where any
partition was left alone an equality delete per compacted partition stays. Iceberg's
``remove-dangling-deletes`` drops a global equality delete that still applies (rows come back,
docs/operators/rewrite.md), and ``rewrite_position_delete_files`` reads every delete file it keeps
(and fails on tables with a list or map column in Iceberg 1.10.x, ``core/delete_files.py``).

This finds them in Spark SQL over the snapshot's ``entries`` metadata table, by Iceberg 1.10's
rules (``DeleteFileIndex``) for when a delete file applies to a live data file:

* a position delete file naming one data file (``referenced_data_file``, or equal ``file_path``
  bounds; every deletion vector) applies while that data file is live;
* any other position delete file applies to the live data files of its spec and partition whose
  data sequence number is <= its own and whose path lies within its ``file_path`` bounds;
* an equality delete file applies to the live data files whose data sequence number is strictly
  lower than its own, of its spec and partition, or of every spec when its spec is unpartitioned
  (a global delete), unless the column metrics of its equality fields rule the file out: the
  Spark planning job's matching (:func:`plan._equality_matches`), which the tests compare with
  Iceberg's own planner.

A driver that has not started Spark (the Arrow rewriter's) asks Iceberg's own planner instead, on
tables of up to :data:`PLANNER_FILE_LIMIT` data files: the delete files it attaches to no live data
file (``newScan().planFiles()``, the tests' judge of the SQL rules).

A delete file that applies to no live data file is dangling; the rest (and any file the rules
do not cover) stay. The dangling ones are removed in one ``RewriteFiles`` commit (operation
``replace``: no reader and no incremental consumer sees a data change), based on the snapshot they
were found in: when the table moved on before the commit the attempt is planned again, and a
commit that landed on a history without that snapshot (a rollback in between) fails the job
loudly. Removing a delete file that applies to no live data file changes no visible row.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from airflow_lake_provider.core.snapshots import counts_no_delete_files
from airflow_lake_provider.jobs import iceberg
from airflow_lake_provider.jobs import plan as plan_job
from airflow_lake_provider.jobs.session import spark_started

#: Set on the commit: how many delete files it removed (finds it among the run's commits).
DANGLING_PROPERTY = "lake.dangling-delete-files-removed"
#: Up to this many live data files, a driver without Spark asks Iceberg's planner (seconds) instead of
#: starting Spark for the SQL finder.
PLANNER_FILE_LIMIT = 20_000
_POSITION, _EQUALITY = 1, 2


class DanglingDeleteRace(Exception):
    """The removal was committed onto a history that no longer holds the snapshot it was planned on."""


@dataclass
class Dangling:
    """What one snapshot holds: the dangling delete files (Java ``DeleteFile``s) and how many stay."""

    snapshot_id: int | None
    files: list[Any] = field(default_factory=list)
    position: int = 0
    equality: int = 0
    kept: int = 0

    def add(self, delete_file) -> None:
        self.files.append(delete_file)
        if str(delete_file.content()) == "EQUALITY_DELETES":
            self.equality += 1
        else:
            self.position += 1


def _delete_rows(spark, catalog: str, table_name: str, jtable, snapshot) -> list[dict[str, Any]]:
    """Every live delete file of ``snapshot`` with ``needed``: whether a live data file needs it.

    The delete files are few and broadcast; the data files are only scanned and joined against
    them, and just the (delete file, needed) keys come back to the driver.
    """
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    snapshot_id = int(snapshot.snapshotId())
    summary = iceberg.summary(snapshot)
    # Summary totals may be missing (writers that do not keep them): then assume there are some.
    with_equality = summary.get("total-equality-deletes", "1") != "0"
    metric_fields = plan_job._equality_metric_fields(jtable) if with_equality else {}
    global_spec_ids = sorted(int(k) for k, spec in dict(jtable.specs()).items() if spec.isUnpartitioned())
    rows = plan_job._file_rows(spark, catalog, table_name, snapshot_id, None, None, metric_fields)
    rows = rows.persist(StorageLevel.MEMORY_AND_DISK)  # read the manifests once, not once per join
    try:
        deletes = rows.where("content != 0").selectExpr(
            "path AS d_path", "content_offset AS d_offset", "content AS d_content", "spec_id AS d_spec",
            "to_json(part) AS d_pkey", "seq AS d_seq", "lower", "upper", "manifest",
            # The one data file it names (Iceberg's ContentFileUtil.referencedDataFileLocation).
            "coalesce(referenced, IF(lower IS NOT NULL AND lower = upper AND length(lower) > 0, lower, NULL))"
            " AS target",
        )
        found = [row.asDict()
                 for row in deletes.select("d_path", "d_offset", "d_content", "d_seq", "manifest").collect()]
        if not found:
            return []
        data = rows.where("content = 0").selectExpr(
            "path", "spec_id", "to_json(part) AS pkey", "seq", "has_bounds",
            *[plan_job._metric_column(field_id) for field_id in metric_fields])
        positions = deletes.where(f"d_content = {_POSITION}")
        by_target = data.join(F.broadcast(positions.where("target IS NOT NULL")), F.col("path") == F.col("target"))
        in_partition = data.join(
            F.broadcast(positions.where("target IS NULL")),
            (F.col("spec_id") == F.col("d_spec")) & (F.col("pkey") == F.col("d_pkey"))
            & (F.col("seq") <= F.col("d_seq"))
            & (F.col("lower").isNull() | F.col("upper").isNull()
               | F.col("path").between(F.col("lower"), F.col("upper"))),
        )
        needed = by_target.select("d_path", "d_offset").unionByName(in_partition.select("d_path", "d_offset"))
        if with_equality:
            # Equality deletes are whole files (no offset): keyed by path alone.
            # The equality delete files are few: broadcast, so the data files are never shuffled.
            equality = F.broadcast(rows.where(f"content = {_EQUALITY}"))
            matched = plan_job._equality_matches(data, equality, metric_fields, global_spec_ids)
            needed = needed.unionByName(matched.selectExpr("d_path", "CAST(NULL AS BIGINT) AS d_offset"))
        keys = {(r["d_path"], r["d_offset"]) for r in needed.distinct().collect()}
    finally:
        rows.unpersist()
    return [{**row, "needed": (row["d_path"], row["d_offset"]) in keys} for row in found]


def find(spark, catalog: str, table_name: str, jtable, snapshot) -> Dangling:
    """The dangling delete files of ``snapshot``, as the Java objects a commit removes."""
    if snapshot is None:
        return Dangling(None)
    snapshot_id = int(snapshot.snapshotId())
    summary = iceberg.summary(snapshot)
    if counts_no_delete_files(summary):
        return Dangling(snapshot_id)
    if not spark_started(spark) and int(summary.get("total-data-files", PLANNER_FILE_LIMIT + 1)) <= PLANNER_FILE_LIMIT:
        return _find_by_icebergs_planner(jtable, snapshot)
    rows = _delete_rows(spark, catalog, table_name, jtable, snapshot)
    # A delete file without a data sequence number (never expected in v2+) is never called dangling.
    dangling = [r for r in rows if not r["needed"] and r["d_content"] in (_POSITION, _EQUALITY) and r["d_seq"] > 0]
    found = Dangling(snapshot_id, kept=len(rows) - len(dangling))
    if not dangling:
        return found
    wanted = {(r["d_path"], r["d_offset"]) for r in dangling}
    for delete_file in iceberg.live_delete_files(jtable, snapshot, {r["manifest"] for r in dangling}):
        key = (str(delete_file.location()), _offset(delete_file))
        if key in wanted:
            wanted.discard(key)
            found.add(delete_file)
    found.kept += len(wanted)  # not found in the manifests (never expected): they stay
    return found


def _find_by_icebergs_planner(jtable, snapshot) -> Dangling:
    """What :func:`find` finds, from Iceberg's own planner: the delete files it attaches to no live data
    file. For a driver that has not started Spark (the Arrow rewriter's), on tables of up to
    :data:`PLANNER_FILE_LIMIT` data files, where a Spark application would cost more than the plan."""
    snapshot_id = int(snapshot.snapshotId())
    applied = iceberg.applied_delete_files(jtable, snapshot_id)
    found = Dangling(snapshot_id)
    for delete_file in iceberg.live_delete_files(jtable, snapshot):
        sequence = delete_file.dataSequenceNumber()
        if (str(delete_file.location()), _offset(delete_file)) in applied or sequence is None or int(sequence) <= 0:
            found.kept += 1
        else:
            found.add(delete_file)
    return found


def _offset(delete_file) -> int | None:
    offset = delete_file.contentOffset()
    return int(offset) if offset is not None else None


def drop(spark, catalog: str, table_name: str, jtable, properties: dict[str, str]) -> tuple[dict[str, Any], str | None]:
    """One attempt: find the dangling delete files of the current snapshot and remove them in one commit.

    Returns the report and ``None``, or ``(report, why)`` when the table moved on before the commit
    (the attempt is then planned again). Iceberg's conflicts (another writer removed one of them
    first) propagate as they are, for :mod:`~airflow_lake_provider.jobs.commit_retry` to retry.
    """
    started = time.perf_counter()
    jtable.refresh()
    snapshot = jtable.currentSnapshot()
    found = find(spark, catalog, table_name, jtable, snapshot)
    report = {
        "scope": "whole table", "removed_delete_files": 0, "removed_position_delete_files": 0,
        "removed_equality_delete_files": 0, "kept_delete_files": found.kept, "snapshot_id": None,
        "seconds": round(time.perf_counter() - started, 3),
    }
    if not found.files or found.snapshot_id is None:  # files need a snapshot: the two go together
        return report, None
    rewrite = jtable.newRewrite().validateFromSnapshot(found.snapshot_id)
    for delete_file in found.files:
        rewrite = rewrite.deleteFile(delete_file)
    for key, value in {**properties, DANGLING_PROPERTY: str(len(found.files))}.items():
        rewrite = rewrite.set(key, str(value))
    if iceberg.current_snapshot_id(jtable) != found.snapshot_id:
        return report, f"the table moved on from snapshot {found.snapshot_id} while its dangling deletes were found"
    rewrite.commit()
    committed = _committed_snapshot(jtable, found.snapshot_id, properties)
    util = spark._jvm.org.apache.iceberg.util.SnapshotUtil
    if committed is None or not util.isAncestorOf(jtable, committed, found.snapshot_id):
        raise DanglingDeleteRace(
            f"The removal of {len(found.files)} dangling delete files of {table_name} was planned on snapshot "
            f"{found.snapshot_id} but committed as {committed}, on a history without it: the table was rolled "
            "back at the same moment. Rows those delete files deleted in the restored data files may be visible "
            f"again: roll {table_name} back to the parent of snapshot {committed} and run the rewrite again."
        )
    return {
        **report, "removed_delete_files": len(found.files), "removed_position_delete_files": found.position,
        "removed_equality_delete_files": found.equality, "snapshot_id": committed,
        "seconds": round(time.perf_counter() - started, 3),
    }, None


def _committed_snapshot(jtable, since: int, properties: dict[str, str]) -> int | None:
    """The snapshot this removal committed: the newest carrying its properties (unique to the run)."""
    jtable.refresh()
    for snapshot in reversed(iceberg.snapshots_after(jtable, since)):
        summary = iceberg.summary(snapshot)
        if DANGLING_PROPERTY in summary and all(summary.get(k) == str(v) for k, v in properties.items()):
            return int(snapshot.snapshotId())
    return None
