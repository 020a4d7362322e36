"""Format v3 tables brought on purpose into the states that break them, found, refused and repaired.

A writer that adds a deletion vector (DV) for a data file without merging the file's DV leaves two;
Iceberg 1.12 accepts the commit when the writer validates from the snapshot it read, and then every
Spark scan fails ("Can't index multiple DVs", apache/iceberg#17206). Here the second DV is written
with Iceberg's own ``BaseDVFileWriter`` and committed exactly so, with a dangling DV beside it (a DV
for a data file that is not in the table, which Iceberg also accepts).

Then, as a user meets it: the shipped DAG's rewrite refuses the table with the data file named and
the repair step as the way out, the table untouched; the repair step's dry run lists what it would
do and commits nothing; the repair merges the two DVs into one (the union of their positions) and
drops the dangling one; Spark and PyIceberg read the rows the two DVs together leave, no deleted row
back; and the shipped DAG then compacts the table with the same rows.
"""

from __future__ import annotations

import importlib
import logging
import uuid

import pytest

from airflow_lake_provider.core.job_registry import job_for
from airflow_lake_provider.jobs.deletion_vectors import _in_driver, read_problems
from airflow_lake_provider.jobs import iceberg
from airflow_lake_provider.steps.repair_deletion_vectors import RepairDeletionVectorsStep
from airflow_lake_provider.steps.runner import CatalogTable, run_step
from conftest import load_dag
from lake_checks import live_files, table_fingerprint
from test_format_v3 import _write_v3_table

pytestmark = [pytest.mark.spark_submit]
LOG = logging.getLogger("repair-script")


def _jtable(spark, name: str):
    return spark.sparkContext._jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(
        spark._jsparkSession, f"lake.{name}")


def _commit_dv(spark, name: str, data_file, positions: list[int]) -> None:
    """A DV for ``data_file`` (a Java DataFile, or a stand-in path) committed the way a writer that does not
    merge the file's existing DV commits it: validated from the snapshot it read."""
    jtable = _jtable(spark, name)
    writer = iceberg.deletion_vector_writer(spark, jtable, uuid.uuid4().hex)
    try:
        for position in positions:
            writer.delete(data_file.location(), position, jtable.specs().get(data_file.specId()), data_file.partition())
    finally:
        writer.close()
    delta = jtable.newRowDelta().validateFromSnapshot(jtable.currentSnapshot().snapshotId())
    for dv in writer.result().deleteFiles():
        delta = delta.addDeletes(dv)
    delta.commit()


def _data_files(spark, name: str) -> list:
    jvm = spark.sparkContext._jvm
    jtable = _jtable(spark, name)
    found = []
    for manifest in jtable.currentSnapshot().dataManifests(jtable.io()):
        reader = jvm.org.apache.iceberg.ManifestFiles.read(manifest, jtable.io(), jtable.specs())
        entries = reader.iterator()
        while entries.hasNext():
            found.append(entries.next().copy())
        reader.close()
    return found


def _broken_table(spark, name: str) -> tuple[str, list[int]]:
    """A v3 table with a second DV for one data file and a dangling DV; its path and the event_ids left."""
    _write_v3_table(spark, f"lake.{name}")
    with_dv = {r[0] for r in spark.sql(f"SELECT data_file.referenced_data_file FROM lake.{name}.entries "
                                       "WHERE status < 2 AND data_file.content = 1").collect()}
    target = sorted((f for f in _data_files(spark, name) if str(f.location()) in with_dv), key=lambda f: str(f.location()))[0]
    path = str(target.location())
    doomed = spark.sql(f"SELECT _pos, event_id FROM lake.{name} WHERE _file = '{path}' AND event_id % 10 IN (5, 6)"
                       ).collect()
    assert doomed, "the target file has rows to delete"
    expected = sorted({r.event_id for r in spark.sql(f"SELECT event_id FROM lake.{name}").collect()}
                      - {r.event_id for r in doomed})
    _commit_dv(spark, name, target, [int(r._pos) for r in doomed])  # a second DV: the table breaks
    ghost = spark.sparkContext._jvm.org.apache.iceberg.DataFiles.builder(_jtable(spark, name).specs().get(
        target.specId())).copy(target).withPath(path.replace(".parquet", "-never-written.parquet")).build()
    _commit_dv(spark, name, ghost, [0])  # a DV of a file that is not in the table: it deletes nothing
    return path, expected


def _event_ids(spark, lake_hook, name: str) -> tuple[list[int], list[int]]:
    spark.sql(f"REFRESH TABLE lake.{name}")
    by_spark = sorted(r.event_id for r in spark.sql(f"SELECT event_id FROM lake.{name}").collect())
    by_pyiceberg = sorted(lake_hook.load_table(name).scan().to_arrow().column("event_id").to_pylist())
    return by_spark, by_pyiceberg


@pytest.mark.slow
@pytest.mark.both_tracks  # the repair's Java calls (a py4j callback, the DV classes) on both Spark lines
def test_a_table_with_two_dvs_for_a_file_is_refused_then_repaired_and_maintained(
        airflow_db, spark, lake_hook, namespace, capfd):
    name = f"{namespace}.events"
    path, expected = _broken_table(spark, name)
    with pytest.raises(Exception, match="Can't index multiple DVs"):
        spark.sql(f"SELECT count(*) FROM lake.{name}").collect()  # what every reader meets
    table = lake_hook.load_table(name)
    snapshot = table.current_snapshot().snapshot_id
    problems = read_problems(spark, "lake", name, snapshot)
    assert list(problems.duplicates) == [path] and len(problems.duplicates[path]) == 2
    assert [dv.referenced_data_file for dv in problems.dangling] == [path.replace(".parquet", "-never-written.parquet")]
    # The same read in a driver without Spark (the Arrow rewriter's), through Iceberg's manifests: Avro's JSON of
    # each manifest in one round trip, the same values as the DeleteFiles Iceberg's reader gives one by one.
    jtable = iceberg.load_table(spark, "lake", name)
    assert _in_driver(jtable, snapshot) == problems
    keys = ("file_path", "file_format", "referenced_data_file", "content_offset", "record_count")
    as_read = [{k: r.get(k) for k in keys} for r in iceberg.delete_file_records(jtable, jtable.snapshot(snapshot))]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(iceberg, "_delete_manifest_texts", lambda *_: None)
        one_by_one = iceberg.delete_file_records(jtable, jtable.snapshot(snapshot))
    assert len(as_read) >= 3 and sorted(as_read, key=str) == sorted(one_by_one, key=str)

    # The shipped DAG: the rewrite refuses the snapshot, naming the file and the repair; nothing is committed.
    capfd.readouterr()
    run = load_dag("lake_maintenance.py", "lake_maintenance").test(run_conf={"table": name, "min_input_files": 2})
    assert run.state == "failed"
    assert run.get_task_instance("rewrite").state == "failed"
    said = capfd.readouterr()
    message = said.out + said.err
    assert "data files with more than one deletion vector, which every engine refuses" in message, message[-3000:]
    assert f": 1, {path} (2 DVs). A writer added a DV" in message
    assert "IcebergRepairDeletionVectorsOperator(table=" in message
    assert lake_hook.load_table(name).current_snapshot().snapshot_id == snapshot

    # The repair step, as a script runs it (the job in the shared session): a dry run first.
    reader = CatalogTable(lake_hook.catalog, name)

    def run_job(args):
        job = job_for(args)
        return job.result.from_json(importlib.import_module(job.module).run(spark, "lake", args.to_json()))

    dry = run_step(RepairDeletionVectorsStep(table=name, dry_run=True, log=LOG), reader, None, run_job).result
    assert dry.found["duplicated_data_files"].keys() == {path} and len(dry.found["dangling_deletion_vectors"]) == 1
    assert (dry.repaired_data_files, dry.merged_deletion_vectors, dry.dropped_dangling_deletion_vectors) == (1, 2, 1)
    assert dry.committed_snapshot_ids == [] and lake_hook.load_table(name).current_snapshot().snapshot_id == snapshot

    step = RepairDeletionVectorsStep(table=name, log=LOG)
    repaired = run_step(step, reader, None, run_job).result
    assert len(repaired.committed_snapshot_ids) == 1 and repaired.snapshot_id_before == snapshot
    assert (repaired.added_deletion_vectors, repaired.dropped_dangling_deletion_vectors) == (1, 1)
    assert step.said[0].startswith(f"Deletion vectors of {name} at snapshot {snapshot}: data files with more than "
                                   f"one: 1 ({path}); DVs whose data file is not live: 1 (")
    assert step.said[-1].startswith(f"Summary for {name}: merged 2 deletion vectors of 1 data files into 1")
    # Readable again, by both readers, with every row either DV deleted still deleted.
    assert _event_ids(spark, lake_hook, name) == (expected, expected)
    assert not read_problems(spark, "lake", name, repaired.snapshot_id_after)
    # Run again: nothing left to repair, no commit.
    again = run_step(RepairDeletionVectorsStep(table=name, log=LOG), reader, None, run_job).result
    assert again.committed_snapshot_ids == [] and not again.found["duplicated_data_files"]

    # The shipped DAG now maintains it: compacted, the same rows.
    fingerprint = table_fingerprint(lake_hook.load_table(name))
    files_before = live_files(lake_hook.load_table(name))["DATA"]
    run = load_dag("lake_maintenance.py", "lake_maintenance").test(run_conf={"table": name, "min_input_files": 2})
    assert run.state == "success"
    table = lake_hook.load_table(name)
    assert table_fingerprint(table) == fingerprint and live_files(table)["DATA"] < files_before
    assert _event_ids(spark, lake_hook, name) == (expected, expected)


def test_a_format_v2_table_has_nothing_to_repair_and_starts_no_job(lake_hook, namespace):
    from demo_data import create_events_table

    name = f"{namespace}.events"
    create_events_table(lake_hook.catalog, name, days=1, commits_per_day=2, rows_per_commit=5)

    def no_job(args):
        raise AssertionError(f"no Spark job expected, got {args}")

    ran = run_step(RepairDeletionVectorsStep(table=name, log=LOG), CatalogTable(lake_hook.catalog, name), None, no_job)
    assert ran.result.committed_snapshot_ids == [] and ran.result.format_version == 2


def test_problems_are_found_by_data_file_and_the_refusal_names_them_and_the_way_out():
    from airflow_lake_provider.core.deletion_vectors import DeletionVector, find_problems, refusal

    dvs = [DeletionVector("s3://t/data/a.parquet", "s3://t/data/x.puffin", 4),
           DeletionVector("s3://t/data/a.parquet", "s3://t/data/y.puffin", 4),
           DeletionVector("s3://t/data/b.parquet", "s3://t/data/x.puffin", 60),
           DeletionVector("s3://t/data/gone.parquet", "s3://t/data/x.puffin", 116)]
    problems = find_problems(dvs, ["s3://t/data/a.parquet", "s3://t/data/b.parquet", "s3://t/data/c.parquet"])
    assert list(problems.duplicates) == ["s3://t/data/a.parquet"] and problems.breaks_reads
    assert [dv.referenced_data_file for dv in problems.dangling] == ["s3://t/data/gone.parquet"]
    message = refusal("db.events", 42, problems, doing="rewrite")
    assert "db.events cannot be read at snapshot 42" in message and "s3://t/data/a.parquet (2 DVs)" in message
    assert "The rewrite changed nothing" in message and "IcebergRepairDeletionVectorsOperator(table='db.events')" in message
    assert not find_problems(dvs[2:3], ["s3://t/data/b.parquet"])  # one DV of a live file: nothing to repair
