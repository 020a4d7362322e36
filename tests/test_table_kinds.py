"""The default chain on every kind of table, as a user runs it: ``lake_table_kinds`` (one
maintenance group per table, each with its defaults and the lease on) through the real scheduler.

Kinds: format v2 with position deletes, v3 with deletion vectors (row lineage kept), equality
deletes (a Flink-style writer), evolved partition specs, a table written only by PyIceberg (many
small appends and PyIceberg's own delete), an unpartitioned table with struct, map and array
columns, a sort order and a merge-on-read delete (strategy ``sort``), and identity partitions on
awkward values (quotes, ``/``, ``=``, ``%``, unicode, the empty string, NULL, dates before 1970)
planned by Spark in the run and by PyIceberg beside it, on the same snapshot. For each table: the
same rows and checksum read by Spark (and by PyIceberg, which cannot read equality deletes before
the run), fewer data files, no delete file left that no live data file needs, the rewrite's
snapshot IDs in XCom against the table's history, and the lease given back. The other Spark
track's run takes v2, v3 and equality deletes (``$LAKE_TABLE_KINDS``, as the DAG reads it).
"""

from __future__ import annotations

import datetime as dt
import json

import pytest

from airflow_lake_provider.hooks.lease import TableLeaseHook
import pyarrow as pa
from demo_data import EVENTS_SCHEMA, create_events_table
from conftest import DAGS_FOLDER, import_file
from lake_checks import (
    append_without_partition_columns,
    files_by_spec,
    live_files,
    local_path,
    spark_fingerprint,
    table_fingerprint,
)

AWKWARD_KEYS = ["it's", 'say "hi"', "a/b", "k=v", "100%", "ünïcødé ✓", "", None]
AWKWARD_DAYS = [dt.date(1969, 12, 31), dt.date(1900, 1, 1)]
APPENDS = 5  # Iceberg's default min-input-files: every partition qualifies for compaction
#: Kinds of one partition spec, without sort order or nested columns: the rewrite's `auto` takes the Arrow
#: rewriter (position and equality deletes and deletion vectors applied, v3 row lineage carried).
ARROW_KINDS = {"pyiceberg_written", "awkward_partitions", "v2_position_deletes", "equality_deletes",
               "v3_deletion_vectors"}


def _v2_position_deletes(spark, name: str, lake_hook) -> None:
    spark.sql(f"CREATE TABLE lake.{name} (event_id BIGINT, day DATE, payload STRING) USING iceberg "
              "PARTITIONED BY (day) TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read')")
    for i in range(APPENDS):
        spark.sql(f"INSERT INTO lake.{name} VALUES " + ", ".join(
            f"({i * 100 + j}, DATE '2026-01-0{1 + j % 2}', 'p{i}-{j}')" for j in range(20)))
    spark.sql(f"DELETE FROM lake.{name} WHERE event_id % 7 = 3")


def _v3_deletion_vectors(spark, name: str, lake_hook) -> None:
    from test_format_v3 import _write_v3_table

    _write_v3_table(spark, f"lake.{name}")


def _equality_deletes(spark, name: str, lake_hook) -> None:
    """As a Flink upsert job and a Spark job leave it: position deletes, partition-scoped and global
    equality deletes, and a key deleted by equality then written again (the new row must stay)."""
    from test_equality_deletes import _table_with_every_kind_of_delete

    _table_with_every_kind_of_delete(spark, lake_hook, name)


def _evolved_specs(spark, name: str, lake_hook) -> None:
    from test_evolved_tables import create_evolved_table

    create_evolved_table(lake_hook.catalog, name, evolve_schema=True)  # files under specs 0, 1 and 2
    spark.sql(f"DELETE FROM lake.{name} WHERE event_id % 7 = 0")  # merge-on-read deletes on files of every spec


def _pyiceberg_written(spark, name: str, lake_hook) -> None:
    """PyIceberg's appends and delete, plus what once broke the Arrow rewriter's files (issue 34):
    values past Arrow's statistics limit and signed zeros in files rewritten into several row groups."""
    from pyiceberg.expressions import EqualTo

    create_events_table(lake_hook.catalog, name, days=2, commits_per_day=8, rows_per_commit=10,
                        properties={"write.parquet.row-group-size-bytes": "4096"})
    table = lake_hook.load_table(name)
    table.delete(EqualTo("event_id", table.scan(limit=1).to_arrow().column("event_id")[0].as_py()))
    days = sorted({row["day"] for row in table.scan(selected_fields=("day",)).to_arrow().to_pylist()})
    for first_id, day in zip((9001, 9101), days, strict=True):
        table.append(pa.table({"event_id": range(first_id, first_id + 4), "day": [day] * 4, "category": ["a"] * 4,
                               "amount": [0.0, -0.0, -0.0, 1.5], "payload": ["~" * 5000, "!" + "a" * 5000, "x", "y"]},
                              schema=EVENTS_SCHEMA))


#: Filters whose answers the pyiceberg_written kind must keep (issue 34: the Arrow rewriter's bounds missed
#: long values and zeros, and its files held NULL for a partition column the old file left out).
AWKWARD_FILTERS = ["payload = repeat('~', 5000)", "payload > 'z'", "payload LIKE '!%'", "amount = 0.0",
                   "amount = -0.0", "amount <= -0.0"]


def _nested_sorted(spark, name: str, lake_hook) -> None:
    spark.sql(f"""CREATE TABLE lake.{name} (id BIGINT, attrs STRUCT<color: STRING, size: INT>,
                  counts MAP<STRING, INT>, tags ARRAY<STRING>) USING iceberg
                  TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read')""")
    spark.sql(f"ALTER TABLE lake.{name} WRITE ORDERED BY id DESC")
    for i in range(APPENDS):
        spark.sql(f"INSERT INTO lake.{name} VALUES " + ", ".join(
            f"({i * 10 + j}, named_struct('color', 'c{j}', 'size', {j}), map('k{j}', {i}), array('t{i}', 't{j}'))"
            for j in range(10)))
    spark.sql(f"DELETE FROM lake.{name} WHERE id % 4 = 1")


def _awkward_partitions(spark, name: str, lake_hook) -> None:
    """Awkward partition values, and one file that leaves out both partition columns, as tables migrated
    from Hive or built with ``add_files`` hold them (issue 34: the Arrow rewriter wrote NULL there)."""
    from pyspark.sql.types import DateType, LongType, StringType, StructField, StructType

    spark.sql(f"CREATE TABLE lake.{name} (id BIGINT, key STRING, day DATE) USING iceberg PARTITIONED BY (key, day)")
    schema = StructType([StructField("id", LongType()), StructField("key", StringType()),
                         StructField("day", DateType())])
    for i in range(APPENDS):
        rows = [(i * 100 + k * 10 + d, key, day) for k, key in enumerate(AWKWARD_KEYS)
                for d, day in enumerate(AWKWARD_DAYS)]
        spark.createDataFrame(rows, schema).coalesce(1).writeTo(f"lake.{name}").append()
    migrated = pa.table({"id": [9001, 9002], "key": ["a/b"] * 2, "day": [AWKWARD_DAYS[0]] * 2})
    append_without_partition_columns(spark, lake_hook.load_table(name), name, migrated,
                                     [("key", "a/b"), ("day", AWKWARD_DAYS[0])])


WRITERS = {
    "v2_position_deletes": _v2_position_deletes,
    "v3_deletion_vectors": _v3_deletion_vectors,
    "equality_deletes": _equality_deletes,
    "evolved_specs": _evolved_specs,
    "pyiceberg_written": _pyiceberg_written,
    "nested_sorted": _nested_sorted,
    "awkward_partitions": _awkward_partitions,
}
DAG_FILE = import_file(DAGS_FOLDER / "lake_table_kinds.py")
WRITERS = {kind: WRITERS[kind] for kind in DAG_FILE.KINDS}  # the DAG's kinds ($LAKE_TABLE_KINDS narrows both)


def _row_lineage(spark, name: str) -> dict:
    return {row.event_id: (row._row_id, row._last_updated_sequence_number) for row in
            spark.sql(f"SELECT event_id, _row_id, _last_updated_sequence_number FROM lake.{name}").collect()}


@pytest.mark.both_tracks
@pytest.mark.slow
@pytest.mark.spark_submit
def test_the_default_chain_maintains_every_kind_of_table(airflow, lake_hook, spark, namespace):
    from test_group_outcomes import _states

    names = {kind: f"{namespace}.{kind}" for kind in WRITERS}
    before = {}
    for kind, write in WRITERS.items():
        write(spark, names[kind], lake_hook)
        table = lake_hook.load_table(names[kind])
        # Each reader's checksum is compared with its own later (they render timestamps differently).
        before[kind] = {"rows": spark_fingerprint(spark, names[kind]), "files": live_files(table),
                        "snapshot": table.current_snapshot().snapshot_id,
                        # PyIceberg cannot read equality deletes: that table it reads only afterwards.
                        "pyiceberg_rows": None if kind == "equality_deletes" else table_fingerprint(table)}
    assert before["v2_position_deletes"]["files"]["POSITION_DELETES"] > 0
    if "pyiceberg_written" in names:  # the truth: the rows materialised before, where nothing prunes
        awkward_truth = spark.table(f"lake.{names['pyiceberg_written']}").selectExpr(
            *(f"count_if({f})" for f in AWKWARD_FILTERS)).first()
    assert before["equality_deletes"]["files"] == {"DATA": 25, "POSITION_DELETES": 24, "EQUALITY_DELETES": 2}
    lineage = _row_lineage(spark, names["v3_deletion_vectors"])
    assert lake_hook.load_table(names["v3_deletion_vectors"]).format_version == 3
    if "evolved_specs" in names:
        assert set(files_by_spec(lake_hook.load_table(names["evolved_specs"]))) == {0, 1, 2}
    if "nested_sorted" in names:
        assert before["nested_sorted"]["files"]["POSITION_DELETES"] > 0
    if "awkward_partitions" in names:  # PyIceberg's plan of the snapshot the run's Spark planner will plan
        from airflow_lake_provider.steps.plan import PlanStep
        from airflow_lake_provider.steps.runner import CatalogTable, run_step

        pyiceberg_plan = run_step(PlanStep(table=names["awkward_partitions"], engine="pyiceberg"),
                                  CatalogTable(lake_hook.catalog, names["awkward_partitions"]), None,
                                  run_job=None).result.to_json()

    airflow.wait_for_dag("lake_table_kinds")
    response = airflow.api("POST", "/dags/lake_table_kinds/dagRuns", json={"logical_date": None, "conf": names})
    assert response.ok, response.text
    run_id = response.json()["dag_run_id"]
    run = airflow.wait_for_run("lake_table_kinds", run_id, timeout=900)
    states = _states(airflow, "lake_table_kinds", run_id)
    assert run["state"] == "success", airflow.task_states("lake_table_kinds", run_id)
    assert {state for state in states.values()} == {"success"}, states

    leases = TableLeaseHook(lake_hook)
    plans = {}
    for kind, name in names.items():
        table = lake_hook.load_table(name)
        after = live_files(table)
        # Same rows, read by Spark and by PyIceberg (now on every table: no equality delete is left).
        assert spark_fingerprint(spark, name) == before[kind]["rows"], kind
        assert table_fingerprint(table) == (before[kind]["pyiceberg_rows"] or before[kind]["rows"]), kind
        # Compacted, and no delete file left that no live data file needs.
        assert after["DATA"] < before[kind]["files"]["DATA"], (kind, before[kind]["files"], after)
        assert after["POSITION_DELETES"] == after["EQUALITY_DELETES"] == 0, (kind, after)
        # The rewrite's snapshot IDs in XCom, against the table's history.
        rewrite = airflow.xcom("lake_table_kinds", run_id, f"{kind}.rewrite")
        assert rewrite["snapshot_id_before"] == before[kind]["snapshot"], kind
        assert table.current_snapshot().snapshot_id == rewrite["snapshot_id_after"], kind
        assert set(rewrite["committed_snapshot_ids"]) <= {s.snapshot_id for s in table.snapshots()}, kind
        # Every delete file left the table through the rewrite's commits, and its result counts them all.
        files = before[kind]["files"]
        assert (rewrite["removed_delete_files"], rewrite["removed_equality_delete_files"]) == (
            sum(n for content, n in files.items() if content != "DATA"), files.get("EQUALITY_DELETES", 0)), kind
        # rewriter='auto': Arrow where the table allows it, Iceberg's Spark action (and why) elsewhere.
        assert rewrite["rewriter"] == ("arrow" if kind in ARROW_KINDS else "iceberg"), (kind, rewrite["rewriter_note"])
        assert (rewrite["rewriter_note"] is None) == (kind in ARROW_KINDS), kind
        assert not leases.load(name)[1].held, kind
        plans[kind] = airflow.xcom("lake_table_kinds", run_id, f"{kind}.plan")
    if "pyiceberg_written" in names:
        # Every filter answers as the truth after the Arrow rewriter, through Spark and PyIceberg, and its
        # files hold the partition value the old file left out (plain Parquet readers see it).
        name = names["pyiceberg_written"]
        after = [len(spark.sql(f"SELECT 1 FROM lake.{name} WHERE {f}").collect()) for f in AWKWARD_FILTERS]
        assert after == list(awkward_truth), list(zip(AWKWARD_FILTERS, awkward_truth, after, strict=True))
        assert tuple(awkward_truth[:3]) == (2, 2, 2) and awkward_truth[4] > 4, awkward_truth
        from pyiceberg.expressions import EqualTo

        table = lake_hook.load_table(name)
        assert table.scan(row_filter=EqualTo("payload", "~" * 5000)).to_arrow().num_rows == 2
    for kind in ("awkward_partitions",):
        if kind in names:  # the Arrow rewriter's files hold the partition values (plain Parquet readers see them)
            import pyarrow.parquet as pq

            table = lake_hook.load_table(names[kind])
            assert spark.sql(f"SELECT count(*) FROM lake.{names[kind]} WHERE key = 'a/b' AND day = DATE '1969-12-31'"
                             ).first()[0] == APPENDS + 2
            for task in table.scan().plan_files():
                held = pq.read_table(local_path(task.file.file_path), columns=["key", "day"]).to_pylist()
                expected = (task.file.partition[0], task.file.partition[1])
                assert {(row["key"], (row["day"] - dt.date(1970, 1, 1)).days if row["day"] else None)
                        for row in held} == {expected}, (kind, task.file.file_path, expected)
    # v3: every row keeps its identity and last-update sequence number.
    assert _row_lineage(spark, names["v3_deletion_vectors"]) == lineage
    if set(names) == set(DAG_FILE.OTHER_TRACK_KINDS):
        return  # the other track's run: the kinds below ran on the default track
    # Evolved specs: every live file under the current spec.
    evolved = lake_hook.load_table(names["evolved_specs"])
    assert set(files_by_spec(evolved)) == {evolved.spec().spec_id} == {2}
    # List and map columns: Iceberg 1.12 rewrites their position deletes (1.10.x failed on them,
    # apache/iceberg#14619); none is left (asserted above for every kind).
    nested = airflow.xcom("lake_table_kinds", run_id, "nested_sorted.rewrite")
    assert "skipped" not in nested["position_deletes"], nested["position_deletes"]
    # The nested table is sorted by its sort order (id DESC) within its one new file.
    ids = [row.id for row in spark.sql(f"SELECT id FROM lake.{names['nested_sorted']}").collect()]
    assert ids == sorted(ids, reverse=True)
    # Both engines planned the awkward partitions alike, on the same snapshot: every value, NULL and
    # pre-1970 dates included.
    def groups(plan: dict) -> list:
        return sorted((json.dumps(g["partition"], sort_keys=True), g["files"]) for g in plan["groups"])
    spark_plan = plans["awkward_partitions"]
    assert (spark_plan["engine"], pyiceberg_plan["engine"]) == ("spark", "pyiceberg")
    assert spark_plan["snapshot_id"] == pyiceberg_plan["snapshot_id"] == before["awkward_partitions"]["snapshot"]
    assert groups(spark_plan) == groups(pyiceberg_plan)
    assert len(groups(spark_plan)) == len(AWKWARD_KEYS) * len(AWKWARD_DAYS)
