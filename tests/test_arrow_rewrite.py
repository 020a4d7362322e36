"""Where the Arrow rewriter cannot prove its files are what Iceberg's writer would commit, ``auto``
takes Iceberg's and says why, and nothing Arrow wrote is left behind; the rewrite task starts Spark
only when Arrow hands the work over.

The differential proof that Arrow's files give every reader the same rows as Iceberg's (rows,
metrics, pruning, Parquet properties, on generated tables) is tests/test_rewrite_oracle.py; the
DAG-level proof is tests/test_table_kinds.py (the default chain, ``rewriter='auto'``, on every kind
of table) and the conflict matrix (tests/test_concurrency_matrix.py) runs every race with both.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_lake_provider.jobs import rewrite as rewrite_job
from lake_checks import FakeTaskInstance, files_on_disk, live_files, spark_fingerprint, table_fingerprint

pytestmark = pytest.mark.both_tracks  # Spark 3.5 clusters get the Arrow rewriter too

def test_auto_takes_icebergs_rewriter_where_arrow_cannot_and_leaves_nothing_behind(spark, lake_hook, namespace):
    # A table with a sort order: auto says why Arrow stays out (Iceberg's writer sorts the new files).
    ordered = f"{namespace}.ordered"
    spark.sql(f"CREATE TABLE lake.{ordered} (id BIGINT, day DATE) USING iceberg PARTITIONED BY (day) "
              "TBLPROPERTIES ('format-version'='2')")
    spark.sql(f"ALTER TABLE lake.{ordered} WRITE ORDERED BY id")
    for i in range(3):
        spark.sql(f"INSERT INTO lake.{ordered} VALUES ({i}, DATE '2026-01-01'), ({i + 10}, DATE '2026-01-01')")
    rows = spark_fingerprint(spark, ordered)
    result = rewrite_job.run(spark, "lake", {"table": ordered, "options": {"min-input-files": "2"}})
    assert result["rewriter"] == "iceberg" and "sort order" in result["rewriter_note"]
    assert spark_fingerprint(spark, ordered) == rows and result["rewritten_data_files"] == 3

    # Files added without Iceberg's field IDs (a migrated table): found while reading.
    added = _with_files_without_field_ids(lake_hook, f"{namespace}.added")
    with pytest.raises(ValueError, match=r"rewriter='arrow' cannot rewrite .*without an Iceberg field ID"):
        rewrite_job.run(spark, "lake", {"table": added, "options": {"min-input-files": "2"}, "rewriter": "arrow"})


def test_on_executors_an_unrewritable_file_goes_to_iceberg_and_a_failed_task_fails_with_nothing_left(
        spark, lake_hook, namespace, monkeypatch):
    """The cluster path (each new file a Spark task, here in local mode's Python workers): a file without field
    IDs found by a task hands the attempt to Iceberg's action; a task that fails (a data file gone from storage)
    fails the rewrite, with the table at its snapshot and no file of the attempt left."""
    monkeypatch.setattr("airflow_lake_provider.jobs.rewriters.on_executors", lambda master: True)
    added = _with_files_without_field_ids(lake_hook, f"{namespace}.added_on_executors")
    rows, on_disk = table_fingerprint(lake_hook.load_table(added)), files_on_disk(lake_hook.load_table(added))
    result = rewrite_job.run(spark, "lake", {"table": added, "options": {"min-input-files": "2"}})
    assert (result["rewriter"], result["rewritten_by"]) == ("iceberg", "executors")
    assert "without an Iceberg field ID" in result["rewriter_note"] and result["rewritten_data_files"] == 3
    table = lake_hook.load_table(added)
    assert table_fingerprint(table) == rows
    new_files = files_on_disk(table) - on_disk
    assert {Path(task.file.file_path.removeprefix("file:")).name for task in table.scan().plan_files()} \
        == {Path(f).name for f in new_files if f.endswith(".parquet")}  # Iceberg's new file, none of Arrow's

    broken = f"{namespace}.missing_on_executors"
    spark.sql(f"CREATE TABLE lake.{broken} (id BIGINT, day DATE) USING iceberg PARTITIONED BY (day)")
    for i in range(3):
        spark.sql(f"INSERT INTO lake.{broken} VALUES ({i}, DATE '2026-01-01')")
    table = lake_hook.load_table(broken)
    snapshot = table.current_snapshot().snapshot_id
    gone = next(iter(table.scan().plan_files())).file.file_path.removeprefix("file:")
    Path(gone).unlink()
    on_disk = files_on_disk(table)
    with pytest.raises(Exception, match="FileNotFoundError|No such file"):
        rewrite_job.run(spark, "lake", {"table": broken, "options": {"min-input-files": "2"}})
    table = lake_hook.load_table(broken)
    assert table.current_snapshot().snapshot_id == snapshot and files_on_disk(table) == on_disk


def _with_files_without_field_ids(lake_hook, name: str, *, files: int = 3) -> str:
    """``name``, created if missing, with ``files`` Parquet files added without Iceberg's field IDs."""
    if not lake_hook.catalog.table_exists(name):
        lake_hook.catalog.create_table(name, schema=pa.schema([("id", pa.int64()), ("label", pa.string())]))
    table = lake_hook.load_table(name)
    location = Path(urlsplit(table.location()).path) / "imported"
    location.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(files):
        path = location / f"part-{i}.parquet"
        pq.write_table(pa.table({"id": [i, i + 10], "label": [f"a{i}", None]}), path)
        paths.append(f"file:{path}")
    table.add_files(paths)
    return name


def test_the_rewrite_task_starts_spark_only_when_arrow_hands_the_work_over(spark, lake_hook, namespace):
    """The rewrite task as users run it (spark-submit, the operator's defaults). Where the worker expects
    Arrow, the driver starts no SparkContext, also to apply position deletes and drop them once they
    are dangling; when the job finds files Arrow cannot read by field ID, it deletes what Arrow wrote,
    starts Spark there and then, and Iceberg's rewriter does the work."""
    from airflow_lake_provider.operators.rewrite import IcebergRewriteDataFilesOperator

    name = f"{namespace}.handover"
    table = lake_hook.catalog.create_table(name, schema=pa.schema([("id", pa.int64()), ("label", pa.string())]),
                                           properties={"format-version": "2", "write.delete.mode": "merge-on-read"})
    for i in range(3):
        table.append(pa.table({"id": [i, i + 100], "label": [f"b{i}", None]}))
    spark.sql(f"DELETE FROM lake.{name} WHERE id = 101")  # a position delete file
    assert live_files(lake_hook.load_table(name))["POSITION_DELETES"] == 1

    def rewrite(run: str) -> tuple[dict, str | None]:
        task = IcebergRewriteDataFilesOperator(task_id="rewrite", table=name, options={"min-input-files": "2"})
        result = task.execute({"ti": FakeTaskInstance(task_id="rewrite", run_id=run)})
        return result, task._job_hook.application_id

    rows = table_fingerprint(lake_hook.load_table(name))
    result, application = rewrite("manual__1")
    assert (result["rewriter"], result["rewritten_data_files"], application) == ("arrow", 3, None), result
    assert table_fingerprint(lake_hook.load_table(name)) == rows and rows[0] == 5
    assert live_files(lake_hook.load_table(name)) == {"DATA": 1, "POSITION_DELETES": 0, "EQUALITY_DELETES": 0}
    assert result["dangling_deletes"]["removed_position_delete_files"] == 1

    _with_files_without_field_ids(lake_hook, name)
    rows = table_fingerprint(lake_hook.load_table(name))
    result, application = rewrite("manual__2")
    assert result["rewriter"] == "iceberg" and "without an Iceberg field ID" in result["rewriter_note"], result
    assert application and application.startswith("local-"), application  # Spark started for the handover
    table = lake_hook.load_table(name)
    assert table_fingerprint(table) == rows and live_files(table)["DATA"] == 1
    assert result["committed_snapshot_ids"] == [table.current_snapshot().snapshot_id]
    # On disk: the three PyIceberg files, Spark's position delete file and the first rewrite's file (older
    # snapshots), the three imported files, the one new file; no file of the abandoned Arrow attempt.
    data_on_disk = {p for p in files_on_disk(table) if p.endswith(".parquet")}
    assert len(data_on_disk) == 9, sorted(data_on_disk)


def test_equality_keys_match_as_icebergs_readers_match_them_not_as_sql(spark, lake_hook, namespace):
    """An equality delete of 0.0, NaN and NULL: Iceberg's readers delete the rows of 0.0 (not those of
    -0.0, which SQL calls equal), of NaN (which SQL calls unequal to itself) and of NULL. The Arrow
    rewriter's files keep exactly the rows Spark's Iceberg reader returned before."""
    from equality_deletes import commit_equality_deletes

    name = f"{namespace}.zeros"
    table = lake_hook.catalog.create_table(name, schema=pa.schema([("id", pa.int64()), ("d", pa.float64())]),
                                           properties={"format-version": "2"})
    table.append(pa.table({"id": [1, 2, 3, 4, 5], "d": [0.0, -0.0, float("nan"), None, 1.0]}))
    table.append(pa.table({"id": [6, 7], "d": [-0.0, 0.0]}))
    commit_equality_deletes(spark, name, [{"d": 0.0}, {"d": float("nan")}, {"d": None}])
    assert sorted(r.id for r in spark.table(f"lake.{name}").collect()) == [2, 5, 6]
    result = rewrite_job.run(spark, "lake", {"table": name, "options": {"rewrite-all": "true"}})
    assert result["rewriter"] == "arrow" and result["removed_equality_delete_files"] == 1, result
    assert sorted(r.id for r in spark.table(f"lake.{name}").collect()) == [2, 5, 6]
    assert sorted(lake_hook.load_table(name).scan().to_arrow().column("id").to_pylist()) == [2, 5, 6]


def _deletion_vectors(spark, table: str) -> list:
    return spark.sql(f"SELECT file_path, content_offset, content_size_in_bytes, record_count, referenced_data_file "
                     f"FROM {table}.delete_files WHERE upper(file_format) = 'PUFFIN'").collect()


def _blob(dv) -> bytes:
    with open(urlsplit(dv.file_path).path, "rb") as handle:
        handle.seek(dv.content_offset)
        return handle.read(dv.content_size_in_bytes)


def test_deletion_vectors_are_read_as_iceberg_wrote_them_and_a_corrupt_one_is_refused(spark, lake_hook, namespace):
    """The DVs of format v3 (``core/deletion_vectors.deleted_positions``): one written by Spark's DELETEs
    (array, bitmap and run containers, merged over three DELETEs) gives exactly the ``_pos`` of the rows they
    deleted; one written by Iceberg's ``BaseDVFileWriter`` at positions past 2^32 gives them back. A DV
    whose blob fails Iceberg's checks is never read as some rows: ``rewriter='arrow'`` refuses, naming it,
    and nothing is left written."""
    from airflow_lake_provider.core.deletion_vectors import deleted_positions
    from airflow_lake_provider.jobs import iceberg

    name = f"{namespace}.dvs"
    spark.sql(f"CREATE TABLE lake.{name} (id BIGINT) USING iceberg "
              "TBLPROPERTIES ('format-version'='3', 'write.delete.mode'='merge-on-read')")
    spark.range(0, 140_001).coalesce(1).writeTo(f"lake.{name}").append()
    conditions = ["id % 2 = 0 AND id < 20000", "id BETWEEN 30000 AND 40000 OR id IN (65537, 69999)",
                  "id >= 131072"]
    deleted = sorted(r._pos for c in conditions for r in spark.sql(f"SELECT _pos FROM lake.{name} WHERE {c}").collect())
    for condition in conditions:
        spark.sql(f"DELETE FROM lake.{name} WHERE {condition}")
    [dv] = _deletion_vectors(spark, f"lake.{name}")  # the third DELETE's DV holds the first two's positions
    assert deleted_positions(_blob(dv), cardinality=dv.record_count) == deleted

    jtable = iceberg.load_table(spark, "lake", name)
    writer = iceberg.deletion_vector_writer(spark, jtable, "far")
    far = [3, 2**32 + 5, 3 * 2**32 + 70_000]
    partition = iceberg.java_class(jtable, "org.apache.iceberg.data.GenericRecord").create(jtable.spec().partitionType())
    try:
        for position in far:
            writer.delete(f"{jtable.location()}/data/elsewhere.parquet", position, jtable.spec(), partition)
    finally:
        writer.close()
    [written] = list(writer.result().deleteFiles())
    with open(urlsplit(str(written.location())).path, "rb") as handle:
        handle.seek(int(written.contentOffset()))
        assert deleted_positions(handle.read(int(written.contentSizeInBytes())), cardinality=3) == far

    # One bit of the bitmap flipped in place: the CRC no longer matches.
    path = Path(urlsplit(dv.file_path).path)
    data = bytearray(path.read_bytes())
    data[dv.content_offset + 20] ^= 0x10
    path.write_bytes(bytes(data))
    table = lake_hook.load_table(name)
    before = files_on_disk(table)
    with pytest.raises(ValueError, match=r"rewriter='arrow' cannot rewrite .*deletion vector .*CRC-32"):
        rewrite_job.run(spark, "lake", {"table": name, "options": {"rewrite-all": "true"}, "rewriter": "arrow"})
    assert files_on_disk(lake_hook.load_table(name)) == before
    assert lake_hook.load_table(name).current_snapshot().snapshot_id == table.current_snapshot().snapshot_id


def test_a_v3_table_whose_rows_have_no_row_ids_yet_goes_to_icebergs_rewriter(spark, lake_hook, namespace):
    """Upgraded from v2 and not committed to since, a table's files have no first row ID: Iceberg's readers
    give its rows no lineage, and Iceberg's rewrite lets the commit assign new row IDs in its own row order,
    which Arrow's files would not match. ``auto`` hands such a table to Iceberg's rewriter."""
    name = f"{namespace}.upgraded"
    spark.sql(f"CREATE TABLE lake.{name} (id BIGINT) USING iceberg TBLPROPERTIES ('format-version'='2')")
    for i in range(2):
        spark.sql(f"INSERT INTO lake.{name} VALUES ({i}), ({i + 10})")
    spark.sql(f"ALTER TABLE lake.{name} SET TBLPROPERTIES ('format-version'='3')")
    assert {r._row_id for r in spark.sql(f"SELECT _row_id FROM lake.{name}").collect()} == {None}
    rows, files = spark_fingerprint(spark, name), live_files(lake_hook.load_table(name))["DATA"]
    result = rewrite_job.run(spark, "lake", {"table": name, "options": {"rewrite-all": "true"}})
    assert result["rewriter"] == "iceberg" and "no first_row_id" in result["rewriter_note"], result
    assert spark_fingerprint(spark, name) == rows and result["rewritten_data_files"] == files > 1
