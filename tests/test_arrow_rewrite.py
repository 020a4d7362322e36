"""The Arrow rewriter against Iceberg's Spark rewriter on the same table: the same rows, the same file
groups and the same metrics read back by Iceberg; where Arrow cannot prove that, ``auto`` takes
Iceberg's and says why, and nothing Arrow wrote is left behind.

Both rewriters run as the rewrite job (``jobs.rewrite.run``) on the shared in-process Spark
session, each on its own copy of one table (two catalog entries on the same metadata file).
Both Spark tracks run it. The DAG-level proof is tests/test_table_kinds.py (the default chain, ``rewriter='auto'``, on every
kind of table) and the conflict matrix (tests/test_concurrency_matrix.py) runs every race with both.
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

#: Iceberg's per-file metrics, as its ``files`` table shows them (NaN counts aside: Arrow's footer has
#: none, so Iceberg records none, which readers take as unknown).
METRICS = "record_count, value_counts, null_value_counts, lower_bounds, upper_bounds"


def _evolved_table(spark, name: str) -> None:
    """Every type the Arrow rewriter carries, NULLs, and a schema evolved between small appends: a
    column renamed, one added, int widened to long and float to double."""
    spark.sql(f"""CREATE TABLE lake.{name} (id INT, price FLOAT, amount DECIMAL(10, 2), big DECIMAL(30, 4),
                  flag BOOLEAN, day DATE, ts TIMESTAMP, local_ts TIMESTAMP_NTZ, name STRING, payload BINARY)
                  USING iceberg PARTITIONED BY (day) TBLPROPERTIES ('format-version'='2')""")

    def values(i: int, extra: bool) -> str:
        rows = []
        for j in range(6):
            n = i * 10 + j
            literals = [f"{n}.5", f"{n}.25", f"123456789012345678.{n:04d}", str(n % 2 == 0).lower(),
                        f"TIMESTAMP '2026-01-01 0{j}:00:{n % 60:02d}+02:00'", f"TIMESTAMP_NTZ '2026-01-01 0{j}:00:00'",
                        f"'name é {n}'", f"X'{n:04x}'", *([f"'extra {n}'"] if extra else [])]
            if j == 5:  # one row of NULLs in every file
                literals = ["NULL"] * len(literals)
            rows.append(f"({n}, {literals[0]}, {literals[1]}, {literals[2]}, {literals[3]}, DATE '2026-01-0{1 + j % 2}', "
                        + ", ".join(literals[4:]) + ")")
        return ", ".join(rows)

    for i in range(3):
        spark.sql(f"INSERT INTO lake.{name} VALUES {values(i, extra=False)}")
    spark.sql(f"ALTER TABLE lake.{name} RENAME COLUMN name TO label")
    spark.sql(f"ALTER TABLE lake.{name} ADD COLUMN note STRING")
    spark.sql(f"ALTER TABLE lake.{name} ALTER COLUMN id TYPE BIGINT")
    spark.sql(f"ALTER TABLE lake.{name} ALTER COLUMN price TYPE DOUBLE")
    for i in range(3, 6):
        spark.sql(f"INSERT INTO lake.{name} VALUES {values(i, extra=True)}")


def _metrics(spark, name: str) -> list:
    def plain(value):
        return tuple(sorted(value.items())) if isinstance(value, dict) else value

    return sorted(repr([(key, plain(value)) for key, value in sorted(row.asDict(recursive=True).items())])
                  for row in spark.sql(f"SELECT {METRICS}, partition FROM lake.{name}.files").collect())


def test_arrow_and_icebergs_rewriter_commit_the_same_table(spark, lake_hook, namespace):
    arrow, iceberg = f"{namespace}.arrow", f"{namespace}.iceberg"
    _evolved_table(spark, arrow)
    lake_hook.catalog.register_table(iceberg, lake_hook.load_table(arrow).metadata_location)
    before = spark_fingerprint(spark, arrow), table_fingerprint(lake_hook.load_table(arrow))
    assert live_files(lake_hook.load_table(arrow))["DATA"] == 12

    results = {}
    for name, rewriter in ((arrow, "arrow"), (iceberg, "iceberg")):
        results[rewriter] = rewrite_job.run(spark, "lake", {
            "table": name, "options": {"min-input-files": "2"}, "rewriter": rewriter,
            "snapshot_properties": {"airflow.task-id": "rewrite"}})
    by_arrow, by_iceberg = results["arrow"], results["iceberg"]
    assert (by_arrow["rewriter"], by_iceberg["rewriter"]) == ("arrow", "iceberg")
    assert by_arrow["rewriter_note"] is None
    # The same file groups, from Iceberg's planner on both sides (numbered in a different order).
    def groups(result: dict) -> list:
        return sorted(tuple(sorted((k, v) for k, v in g.items() if k != "global_index")) for g in result["groups"])
    assert len(groups(by_arrow)) == 2 and groups(by_arrow) == groups(by_iceberg)
    assert by_arrow["failed_groups"] == [] and by_arrow["rewritten_data_files"] == 12 == by_iceberg[
        "rewritten_data_files"]
    # The same rows, read by Spark and PyIceberg, under the current schema (renamed, added, widened columns).
    for name in (arrow, iceberg):
        assert (spark_fingerprint(spark, name), table_fingerprint(lake_hook.load_table(name))) == before, name
        assert live_files(lake_hook.load_table(name))["DATA"] == 2
    assert spark.sql(f"SELECT count(*) FROM lake.{arrow} WHERE note IS NOT NULL AND label LIKE 'name é%'"
                     ).first()[0] == 15
    # The same metrics, read back by Iceberg from each writer's footers.
    assert _metrics(spark, arrow) == _metrics(spark, iceberg)
    # Each new file carries Iceberg's field IDs, as Iceberg's own writer puts them.
    table = lake_hook.load_table(arrow)
    expected_ids = {field.name: field.field_id for field in table.schema().fields}
    for task in table.scan().plan_files():
        schema = pq.read_schema(task.file.file_path.removeprefix("file:"))
        assert {f.name: int(f.metadata[b"PARQUET:field_id"]) for f in schema} == expected_ids
    # The commit is Iceberg's rewrite commit, with this run's properties, reported in the result.
    snapshot = table.current_snapshot()
    assert by_arrow["committed_snapshot_ids"] == [snapshot.snapshot_id] == [by_arrow["snapshot_id_after"]]
    assert snapshot.summary.operation.value == "replace"
    assert snapshot.summary["airflow.task-id"] == "rewrite" and snapshot.summary["deleted-data-files"] == "12"


def test_auto_takes_icebergs_rewriter_where_arrow_cannot_and_leaves_nothing_behind(spark, lake_hook, namespace):
    # A table with position deletes: auto says why Arrow stays out.
    deleted = f"{namespace}.deleted"
    spark.sql(f"CREATE TABLE lake.{deleted} (id BIGINT, day DATE) USING iceberg PARTITIONED BY (day) "
              "TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read')")
    for i in range(3):
        spark.sql(f"INSERT INTO lake.{deleted} VALUES ({i}, DATE '2026-01-01'), ({i + 10}, DATE '2026-01-01')")
    spark.sql(f"DELETE FROM lake.{deleted} WHERE id = 1")
    rows = spark_fingerprint(spark, deleted)
    result = rewrite_job.run(spark, "lake", {"table": deleted, "options": {"min-input-files": "2"}})
    assert result["rewriter"] == "iceberg" and "delete files" in result["rewriter_note"]
    assert spark_fingerprint(spark, deleted) == rows and result["rewritten_data_files"] == 3

    # Files added without Iceberg's field IDs (a migrated table): found while reading.
    added = _with_files_without_field_ids(lake_hook, f"{namespace}.added")
    with pytest.raises(ValueError, match=r"rewriter='arrow' cannot rewrite .*without an Iceberg field ID"):
        rewrite_job.run(spark, "lake", {"table": added, "options": {"min-input-files": "2"}, "rewriter": "arrow"})


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


def test_the_rewrite_task_starts_spark_only_when_arrow_hands_the_work_over(lake_hook, namespace):
    """The rewrite task as users run it (spark-submit, the operator's defaults). Where the worker expects
    Arrow, the driver starts no SparkContext; when the job finds files Arrow cannot read by field ID,
    it deletes what Arrow wrote, starts Spark there and then, and Iceberg's rewriter does the work."""
    from airflow_lake_provider.operators.rewrite import IcebergRewriteDataFilesOperator

    name = f"{namespace}.handover"
    table = lake_hook.catalog.create_table(name, schema=pa.schema([("id", pa.int64()), ("label", pa.string())]))
    for i in range(3):
        table.append(pa.table({"id": [i, i + 100], "label": [f"b{i}", None]}))

    def rewrite(run: str) -> tuple[dict, str | None]:
        task = IcebergRewriteDataFilesOperator(task_id="rewrite", table=name, options={"min-input-files": "2"})
        result = task.execute({"ti": FakeTaskInstance(task_id="rewrite", run_id=run)})
        return result, task._job_hook.application_id

    rows = table_fingerprint(lake_hook.load_table(name))
    result, application = rewrite("manual__1")
    assert (result["rewriter"], result["rewritten_data_files"], application) == ("arrow", 3, None), result
    assert table_fingerprint(lake_hook.load_table(name)) == rows and live_files(lake_hook.load_table(name))["DATA"] == 1

    _with_files_without_field_ids(lake_hook, name)
    rows = table_fingerprint(lake_hook.load_table(name))
    result, application = rewrite("manual__2")
    assert result["rewriter"] == "iceberg" and "without an Iceberg field ID" in result["rewriter_note"], result
    assert application and application.startswith("local-"), application  # Spark started for the handover
    table = lake_hook.load_table(name)
    assert table_fingerprint(table) == rows and live_files(table)["DATA"] == 1
    assert result["committed_snapshot_ids"] == [table.current_snapshot().snapshot_id]
    # On disk: the three PyIceberg files and the first rewrite's file (older snapshots), the three imported
    # files, the one new file; no file of the abandoned Arrow attempt.
    data_on_disk = {p for p in files_on_disk(table) if p.endswith(".parquet")}
    assert len(data_on_disk) == 8, sorted(data_on_disk)
