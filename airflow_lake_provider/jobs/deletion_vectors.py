"""Reading a snapshot's deletion vectors, and the check that keeps a rewrite off a broken table.

The DVs and the data files they name come from the ``entries`` metadata table, which reads the
manifests without building Iceberg's delete index, so it reads a table whose duplicated DVs fail
every scan; a driver that has not started Spark (the Arrow rewriter's) reads the same manifests
through Iceberg's Java API instead (``ManifestFiles``), with no Spark application for it.
:func:`check_before` refuses a rewrite of such a snapshot with the files named; :func:`check_after`
fails a job whose own commit left one (it never should).
"""

from __future__ import annotations

from airflow_lake_provider.core.deletion_vectors import (
    DeletionVector,
    DeletionVectorProblems,
    find_problems,
    refusal,
)
from airflow_lake_provider.exceptions import LakeConfigError
from airflow_lake_provider.jobs import iceberg
from airflow_lake_provider.jobs.session import spark_started

_LIVE = "status < 2"  # EXISTING and ADDED entries
_DATA, _POSITION_DELETES = 0, 1


class BrokenDeletionVectors(LakeConfigError):
    """A snapshot has data files with more than one deletion vector: no engine reads it."""


def read_problems(spark, catalog: str, table: str, snapshot_id: int, jtable=None) -> DeletionVectorProblems:
    """The duplicated and dangling DVs of ``snapshot_id``: the DVs, and which of their data files are live,
    from the snapshot's manifests (two queries of the ``entries`` table; only DVs reach the driver). Given
    the table (``jtable``) in a driver that has not started Spark: read in the driver (:func:`_in_driver`)."""
    if jtable is not None and not spark_started(spark):
        return _in_driver(jtable, snapshot_id)
    entries = spark.read.option("versionAsOf", snapshot_id).table(f"{catalog}.{table}.entries").where(_LIVE)
    dvs = entries.where(f"data_file.content = {_POSITION_DELETES} AND data_file.referenced_data_file IS NOT NULL "
                        "AND upper(data_file.file_format) = 'PUFFIN'").selectExpr(
        "data_file.referenced_data_file AS referenced", "data_file.file_path AS path",
        "data_file.content_offset AS offset", "data_file.record_count AS deleted_rows")
    found = [DeletionVector(str(row.referenced), str(row.path), int(row.offset or 0), int(row.deleted_rows or 0))
             for row in dvs.collect()]
    if not found:
        return DeletionVectorProblems()
    live = entries.where(f"data_file.content = {_DATA}").selectExpr("data_file.file_path AS referenced")
    named = {str(row.referenced) for row in live.join(dvs.select("referenced").distinct(), "referenced").collect()}
    return find_problems(found, named)


def _in_driver(jtable, snapshot_id: int) -> DeletionVectorProblems:
    """:func:`read_problems` through Iceberg's Java API: the snapshot's live DVs from its delete manifests, and
    which of the data files they name are live, from its data manifests' live paths (``ManifestFiles``, which,
    like the ``entries`` table, builds no delete index)."""
    snapshot = jtable.snapshot(snapshot_id)
    found = [DeletionVector(str(r["referenced_data_file"]), str(r["file_path"]), int(r.get("content_offset") or 0),
                            int(r["record_count"]))
             for r in iceberg.delete_file_records(jtable, snapshot)
             if r.get("referenced_data_file") is not None and str(r.get("file_format")).upper() == "PUFFIN"]
    if not found:
        return DeletionVectorProblems()
    _, files = iceberg.manifest_contents(jtable, snapshot.dataManifests(jtable.io()), by_content=False)
    live = set(files.get("live", ()))  # live entries only
    return find_problems(found, {dv.referenced_data_file for dv in found if dv.referenced_data_file in live})


def check_before(spark, catalog: str, table: str, snapshot_id: int | None, *, doing: str,
                 jtable=None) -> DeletionVectorProblems:
    """Refuse ``doing`` on a snapshot whose duplicated DVs break every read (nothing changed yet)."""
    if snapshot_id is None:
        return DeletionVectorProblems()
    problems = read_problems(spark, catalog, table, snapshot_id, jtable)
    if problems.breaks_reads:
        raise BrokenDeletionVectors(refusal(table, snapshot_id, problems, doing=doing))
    return problems


def check_after(spark, catalog: str, table: str, snapshot_id: int, *, doing: str, jtable=None) -> None:
    """Fail loudly if ``doing``'s own commit left a data file with two DVs."""
    problems = read_problems(spark, catalog, table, snapshot_id, jtable)
    if problems.breaks_reads:
        raise BrokenDeletionVectors(
            f"After the {doing}, snapshot {snapshot_id} of {table} has data files with more than one deletion "
            f"vector: {problems.to_json()['duplicated_data_files']}. Roll the table back to the snapshot before "
            "the commit, and report this.")
