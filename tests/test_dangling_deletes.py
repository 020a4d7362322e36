"""Delete files that apply to nothing after a compaction, and tables whose position deletes Iceberg cannot rewrite.

Issue 24: an equality delete file per compacted partition stayed after the maintenance run, and
the rewrite step failed on a table with list and map columns (Iceberg 1.10's
``ValidationException: Invalid partition field parent: map<string, int>`` in
``rewrite_position_delete_files``). Both run here through the shipped chain
(``lake_maintenance_group`` in a DAG written by this test, ``dag.test()``, real spark-submits).
"Dangling" is judged by Iceberg's own planner (``newScan().planFiles()`` attaches to every data
file the delete files that apply to it), not by the code under test.
"""

from __future__ import annotations

import datetime as dt
import textwrap

import pytest

from airflow_lake_provider.core.delete_files import (
    dangling_delete_removal_refused,
    dangling_delete_removal_unsafe,
    has_list_or_map,
    position_delete_rewrite_blocked,
    position_delete_rewrite_bug,
)
from demo_data import _batch, create_events_table
from equality_deletes import commit_equality_deletes
from lake_checks import spark_fingerprint


def _delete_file_counts(spark, name: str) -> dict[str, int]:
    """Live files of the current snapshot by content, from Spark's ``files`` metadata table."""
    names = {0: "DATA", 1: "POSITION_DELETES", 2: "EQUALITY_DELETES"}
    rows = spark.sql(f"SELECT content, count(*) AS n FROM lake.{name}.files GROUP BY content").collect()
    return {names[content]: 0 for content in names} | {names[r["content"]]: r["n"] for r in rows}


def _dangling_by_iceberg(spark, name: str) -> set[str]:
    """Live delete files that Iceberg's planner attaches to no live data file."""
    live = {r["file_path"] for r in spark.sql(f"SELECT file_path FROM lake.{name}.delete_files").collect()}
    jvm = spark.sparkContext._jvm
    jtable = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, f"lake.{name}")
    attached: set[str] = set()
    tasks = jtable.newScan().planFiles()
    try:
        iterator = tasks.iterator()
        while iterator.hasNext():
            attached.update(str(d.location()) for d in iterator.next().deletes())
    finally:
        tasks.close()
    return live - attached


def _nested_table(spark, name: str) -> None:
    """Unpartitioned, with struct, map and array columns, a sort order, and merge-on-read deletes."""
    spark.sql(f"""CREATE TABLE lake.{name} (id BIGINT, attrs STRUCT<a: INT, b: STRING>, tags MAP<STRING, INT>,
                  scores ARRAY<INT>) USING iceberg
                  TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read')""")
    spark.sql(f"ALTER TABLE lake.{name} WRITE ORDERED BY id")
    for start in range(0, 40, 10):
        spark.sql(f"""INSERT INTO lake.{name} SELECT id, named_struct('a', CAST(id AS INT), 'b', CAST(id AS STRING)),
                      map('k', CAST(id AS INT)), array(CAST(id AS INT), CAST(id * 2 AS INT))
                      FROM range({start}, {start + 10})""")
    spark.sql(f"DELETE FROM lake.{name} WHERE id % 7 = 0")  # one position delete file per data file


# -- the decision, pure -----------------------------------------------------------------------
def test_icebergs_dangling_delete_removal_is_refused_with_equality_deletes_before_1_12_only():
    assert [dangling_delete_removal_unsafe(v) for v in ("1.10.2", "1.11.0", "1.12.0", "1.12.1", "1.13.0-SNAPSHOT",
                                                        "2.0.0")] == [True, True, False, False, False, False]
    message = dangling_delete_removal_refused("1.10.2")
    assert "Iceberg 1.10.2" in message and "1.12 or later" in message and "leave the option off" in message


def test_a_list_or_map_anywhere_blocks_the_position_delete_rewrite_on_iceberg_1_10():
    def schema(*types):
        return {"type": "struct", "schema-id": 0,
                "fields": [{"id": i, "name": f"c{i}", "required": False, "type": t} for i, t in enumerate(types, 1)]}

    flat = schema("long", "string", {"type": "struct", "fields": [{"id": 9, "name": "a", "type": "int"}]})
    a_map = {"type": "map", "key-id": 10, "key": "string", "value-id": 11, "value": "int", "value-required": False}
    in_struct = schema({"type": "struct", "fields": [{"id": 9, "name": "m", "type": a_map}]})
    listed = schema({"type": "list", "element-id": 9, "element": "long", "element-required": False})
    assert not has_list_or_map(flat) and has_list_or_map(in_struct) and has_list_or_map(listed)
    assert position_delete_rewrite_blocked("1.10.2", flat) is None
    assert position_delete_rewrite_blocked("1.11.0", listed) is None  # tried; the error is still recognised
    assert "apache/iceberg#14619" in position_delete_rewrite_blocked("1.10.2", in_struct)
    assert position_delete_rewrite_bug("1.11.0", "ValidationException: Missing required files to delete") is None
    assert position_delete_rewrite_bug("1.11.0", None) is None
    reason = position_delete_rewrite_bug("1.11.0", "ValidationException: Invalid partition field parent: list<long>")
    assert reason.startswith("not run: Iceberg 1.11.0's") and "list<long>" in reason


# -- the shipped runtime (1.12) rewrites them: the bug is fixed (in-process Spark) ----------------
def test_position_deletes_of_a_table_with_list_and_map_columns_are_rewritten(spark, lake_hook, namespace):
    from airflow_lake_provider.jobs import rewrite as rewrite_job

    name = f"{namespace}.nested"
    _nested_table(spark, name)
    before = spark_fingerprint(spark, name)
    result = rewrite_job.run(spark, "lake", {
        # Iceberg's position-delete rewrite itself, with no dangling deletes dropped before it.
        "table": name, "options": {"min-input-files": "2"}, "rewrite_position_deletes": True,
        "drop_dangling_deletes": False, "retry_backoff_seconds": 0.1})
    assert result["position_deletes"].get("skipped") is None, result["position_deletes"]
    stages = [(a["stage"], a["outcome"]) for a in result["attempts"]]
    assert stages == [("rewrite data files", "committed"), ("rewrite position deletes", "committed")], stages
    assert result["rewritten_data_files"] == 4
    assert spark_fingerprint(spark, name) == before
    # The four delete files applied to the rewritten files only: none is left, none dangles.
    assert _delete_file_counts(spark, name)["POSITION_DELETES"] == 0 and _dangling_by_iceberg(spark, name) == set()


# -- the shipped chain, end to end ----------------------------------------------------------------
DAG_ID = "lake_dangling_deletes"
DAG_SOURCE = f'''
"""Written by tests/test_dangling_deletes.py: the maintenance group on a partly compacted table."""
from airflow.sdk import DAG

from airflow_lake_provider.dag_factory import AIRFLOW_START_DATE, table_param
from airflow_lake_provider.task_group import lake_maintenance_group

with DAG(dag_id="{DAG_ID}", schedule=None, start_date=AIRFLOW_START_DATE, catchup=False,
         render_template_as_native_obj=True, params={{"events": table_param()}}) as dag:
    lake_maintenance_group(table="{{{{ params.events }}}}", group_id="events", plan={{"min_input_files": 2}},
                           clean={{"remove_orphans": False}})
'''


def _events_table(spark, lake_hook, name: str) -> None:
    """Days 1-3 of small files (compacted), day 4 one file (left alone); every kind of delete file.

    Position deletes of partition granularity (one file per partition, several data files each),
    an equality delete in each of days 1 and 2, a global one (the unpartitioned spec 0) for a row of
    day 4, and key 60 written again after its delete.
    """
    create_events_table(lake_hook.catalog, name, days=3, commits_per_day=4, rows_per_commit=10,
                        properties={"write.delete.granularity": "partition"})
    lake_hook.load_table(name).append(_batch(1000, 20, dt.date(2026, 1, 4), ["d"]))
    spark.sql(f"DELETE FROM lake.{name} WHERE event_id % 10 = 3")
    commit_equality_deletes(spark, name, [{"event_id": 0}, {"event_id": 60}], partition_path="day=2026-01-01")
    commit_equality_deletes(spark, name, [{"event_id": 11}, {"event_id": 71}], partition_path="day=2026-01-02")
    commit_equality_deletes(spark, name, [{"event_id": 1001}], spec_id=0)
    lake_hook.load_table(name).append(_batch(60, 1, dt.date(2026, 1, 1), ["z"]))


@pytest.mark.spark_submit
def test_maintenance_leaves_no_dangling_delete_and_keeps_the_deletes_a_live_file_needs(
        airflow_db, spark, lake_hook, namespace):
    """The list/map table goes through the maintenance group in tests/test_table_kinds.py."""
    from conftest import DAGS_FOLDER, load_dag

    events = f"{namespace}.events"
    _events_table(spark, lake_hook, events)
    before = {"events": (spark_fingerprint(spark, events), _delete_file_counts(spark, events))}
    assert before["events"][1] == {"DATA": 14, "POSITION_DELETES": 4, "EQUALITY_DELETES": 3}
    assert not _dangling_by_iceberg(spark, events)
    rows = {r["event_id"]: r["category"] for r in spark.table(f"lake.{events}").collect()}
    assert not {0, 11, 71, 1001, 3, 1003} & set(rows) and rows[60] == "z"

    dag_file = DAGS_FOLDER / f"{DAG_ID}.py"  # dag.test() runs only DAGs of the dags folder
    dag_file.write_text(textwrap.dedent(DAG_SOURCE))
    try:
        run = load_dag(dag_file.name, DAG_ID).test(run_conf={"events": events})
    finally:
        dag_file.unlink()  # other tests' dag.test() parse the whole folder: leave nothing behind
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert run.state == "success", states
    assert states["events.rewrite"] == "success"
    xcom = {"events": run.get_task_instance("events.rewrite").xcom_pull(task_ids="events.rewrite")}

    # Equality deletes: days 1-3 compacted, day 4 left alone. Every row as before (key 60 once,
    # as written again), and only the delete files day 4 still needs are left: its position
    # delete file and the global equality delete (the ones of days 1 and 2 stayed before).
    assert spark_fingerprint(spark, events) == before["events"][0]
    assert xcom["events"]["rewritten_data_files"] == 13 and xcom["events"]["failed_groups"] == []
    assert _delete_file_counts(spark, events) == {"DATA": 4, "POSITION_DELETES": 1, "EQUALITY_DELETES": 1}
    assert not _dangling_by_iceberg(spark, events)
    dangling = xcom["events"]["dangling_deletes"]
    assert (dangling["removed_equality_delete_files"], dangling["kept_delete_files"]) == (2, 2)
    assert dangling["snapshot_id"] in xcom["events"]["committed_snapshot_ids"]
    assert xcom["events"]["removed_equality_delete_files"] == 2


def test_the_finder_without_spark_finds_what_the_sql_finder_and_icebergs_planner_find(spark, lake_hook, namespace):
    """The Arrow rewriter's driver starts no Spark: there the dangling deletes come from Iceberg's planner
    (``_find_by_icebergs_planner``). On a table with every kind of delete file, days 1-3 compacted by
    Iceberg's action with nothing removed, it finds what the SQL finder finds, and what the judge finds."""
    from airflow_lake_provider.jobs import dangling_deletes
    from airflow_lake_provider.jobs import iceberg as jiceberg

    events = f"{namespace}.events"
    _events_table(spark, lake_hook, events)
    spark.sql(f"CALL lake.system.rewrite_data_files(table => '{events}', where => \"day < DATE '2026-01-04'\", "
              "options => map('rewrite-all', 'true', 'use-starting-sequence-number', 'false'))")
    judge = _dangling_by_iceberg(spark, events)
    assert judge and _delete_file_counts(spark, events)["EQUALITY_DELETES"] == 3
    jtable = jiceberg.load_table(spark, "lake", events)
    by_sql = dangling_deletes.find(spark, "lake", events, jtable, jtable.currentSnapshot())
    by_planner = dangling_deletes._find_by_icebergs_planner(jtable, jtable.currentSnapshot())
    for found in (by_sql, by_planner):
        assert {str(f.location()) for f in found.files} == judge
    assert (by_planner.position, by_planner.equality, by_planner.kept) == (by_sql.position, by_sql.equality,
                                                                           by_sql.kept) == (3, 2, 2)
