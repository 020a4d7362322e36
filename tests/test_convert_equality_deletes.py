"""Equality deletes converted into position deletes (v2) and deletion vectors (v3), rewriting no data.

What a user checks: the rows (checksums read by Spark before and after, and by PyIceberg once no
equality deletes remain), the files by content type, the snapshots the result names, and what
happens when another writer commits in the middle of the conversion.
"""

from __future__ import annotations

import json

import pytest

from demo_data import create_events_table
from airflow_lake_provider.exceptions import LakeConfigError, LakeSnapshotError, LakeTableNotFound
from airflow_lake_provider.jobs import convert_equality_deletes as convert_job
from airflow_lake_provider.operators.convert_equality_deletes import IcebergConvertEqualityDeletesOperator
from conftest import load_dag
from equality_deletes import commit_equality_deletes
from lake_checks import FakeTaskInstance, live_files, spark_fingerprint, table_fingerprint

DAY1, DAY2 = "day=2026-01-01", "day=2026-01-02"


def _flink_style_table(spark, lake_hook, name: str, format_version: str):
    """Two days of small files with every kind of delete a streaming upsert pipeline leaves.

    Merge-on-read DELETE (position deletes or DVs) of rows 1 and 12; equality deletes in both
    partitions, one of them (event_id 1) for a row already position-deleted, ten of them for every
    row of one data file (ids 50-59); event_id 2 deleted by key and then written again (the new
    row must stay visible).
    """
    create_events_table(lake_hook.catalog, name, days=2, commits_per_day=3, rows_per_commit=10)
    if format_version != "2":  # PyIceberg 0.12 writes v2 only; Spark upgrades the table
        spark.sql(f"ALTER TABLE lake.{name} SET TBLPROPERTIES ('format-version' = '{format_version}')")
    spark.sql(f"DELETE FROM lake.{name} WHERE event_id IN (1, 12)")
    commit_equality_deletes(spark, name, [{"event_id": 1}, {"event_id": 2}, {"event_id": 3}, {"event_id": 21}],
                            partition_path=DAY1)
    commit_equality_deletes(spark, name, [{"event_id": k} for k in (11, 33, *range(50, 60))], partition_path=DAY2)
    spark.sql(f"INSERT INTO lake.{name} VALUES (2, DATE '2026-01-01', 'z', 9.5, 'written again after its delete')")


def _delete_files_per_data_file(spark, name: str) -> dict[str, int]:
    """Live position delete files (or DVs) per data file they name; ``None`` collects those naming none."""
    return {r["ref"]: r["n"] for r in spark.sql(
        f"SELECT referenced_data_file AS ref, count(*) AS n FROM lake.{name}.delete_files WHERE content = 1 "
        "GROUP BY referenced_data_file").collect()}


@pytest.mark.parametrize("format_version", ["2", "3"])
def test_conversion_keeps_every_row_and_leaves_no_equality_delete(spark, lake_hook, namespace, format_version):
    name = f"{namespace}.events"
    _flink_style_table(spark, lake_hook, name, format_version)
    table = lake_hook.load_table(name)
    before_files = live_files(table)
    assert before_files["EQUALITY_DELETES"] == 2 and before_files["POSITION_DELETES"] == 2
    with pytest.raises(ValueError, match="equality deletes"):  # why the table needs converting
        table_fingerprint(table)
    rows_before = spark_fingerprint(spark, name)
    assert rows_before[0] == 60 + 1 - 17  # 60 written, 1 written again, 17 keys deleted (1 twice)

    dry = convert_job.run(spark, "lake", {"table": name, "dry_run": True})
    assert dry["committed_snapshot_ids"] == [] and [a["outcome"] for a in dry["attempts"]] == ["dry run"]
    assert lake_hook.load_table(name).current_snapshot().snapshot_id == table.current_snapshot().snapshot_id

    result = convert_job.run(spark, "lake", {"table": name, "snapshot_properties": {"airflow.run-id": "r1"}})
    figures = ("converted_equality_delete_files", "affected_data_files", "deleted_rows", "replaced_delete_files")
    assert {k: dry[k] for k in figures} == {k: result[k] for k in figures}  # the dry run said what would happen

    table = lake_hook.load_table(name)
    assert spark_fingerprint(spark, name) == rows_before
    assert table_fingerprint(table) == rows_before  # PyIceberg can read it again, and agrees with Spark
    after_files = live_files(table)
    assert after_files["EQUALITY_DELETES"] == 0
    assert after_files["DATA"] == before_files["DATA"]  # no data file rewritten
    # The equality deletes apply to the three older files of each day (the file holding the new row 2
    # was written after them); rows are deleted from five: ids 0-9 (1, 2, 3), 20-29 (21), 10-19 (11, 12),
    # 30-39 (33) and 50-59 (all).
    assert result["affected_data_files"] == 6
    assert result["converted_equality_delete_files"] == 2 and result["equality_delete_records"] == 16
    assert result["deleted_rows"] == 17
    added_key = "added_deletion_vectors" if format_version == "3" else "added_position_delete_files"
    assert result[added_key] == 5
    assert result["replaced_delete_files"] == 2  # the DELETE's file-scoped deletes, merged into the new ones
    # Exactly one position delete file (or DV) per affected data file, nothing else.
    assert after_files["POSITION_DELETES"] == 5
    per_data_file = _delete_files_per_data_file(spark, name)
    assert None not in per_data_file and sorted(per_data_file.values()) == [1] * 5
    # XCom's snapshot IDs are the table's: one commit, on top of the snapshot converted, carrying the run's tags.
    committed = table.snapshot_by_id(result["committed_snapshot_ids"][0])
    assert result["committed_snapshot_ids"] == [result["snapshot_id_after"]] == [table.current_snapshot().snapshot_id]
    assert committed.parent_snapshot_id == result["snapshot_id_before"] == result["converted_snapshot_id"]
    assert committed.summary["airflow.run-id"] == "r1"
    # The summary figures a retried task rebuilds its result from (operators/convert_equality_deletes.py).
    added, replaced = ("added-dvs", "removed-dvs") if format_version == "3" else (
        "added-position-delete-files", "removed-position-delete-files")
    assert {k: committed.summary[k] for k in (added, replaced, "removed-equality-delete-files")} == {
        added: "5", replaced: "2", "removed-equality-delete-files": "2"}
    assert result["verified"] == {"visible_rows_in_affected_files": 50 - 17, "after": 50 - 17}


def test_a_table_without_equality_deletes_is_left_alone(spark, lake_hook, namespace):
    name = f"{namespace}.events"
    create_events_table(lake_hook.catalog, name, days=1, commits_per_day=2, rows_per_commit=5)
    spark.sql(f"DELETE FROM lake.{name} WHERE event_id = 3")
    snapshot = lake_hook.load_table(name).current_snapshot().snapshot_id
    result = convert_job.run(spark, "lake", {"table": name})
    assert result["committed_snapshot_ids"] == [] and result["converted_equality_delete_files"] == 0
    assert lake_hook.load_table(name).current_snapshot().snapshot_id == snapshot


# -- racing another writer: the commit validates, the retry converts the new snapshot ------------
COMPACTION = "CALL lake.system.rewrite_data_files(table => '{name}', options => map('min-input-files', '2'))"


@pytest.mark.parametrize(
    ("format_version", "writer", "outcomes"),
    [
        # A row of an affected data file deleted: the commit fails validation, the retry converts.
        ("2", "DELETE FROM lake.{name} WHERE event_id = 5", ["conflict", "committed"]),
        ("3", "DELETE FROM lake.{name} WHERE event_id = 5", ["conflict", "committed"]),  # a DV it replaces
        # The affected data files compacted (applying every delete, and dropping the equality deletes
        # it made dangling): the commit fails validation and the retry finds nothing left to convert.
        ("2", COMPACTION, ["conflict", "nothing to convert"]),
        # An append touches no affected file: the conversion commits on top of it at the first attempt.
        ("2", "INSERT INTO lake.{name} VALUES (900, DATE '2026-01-01', 'a', 1.0, 'appended meanwhile')", ["committed"]),
    ],
    ids=["delete-v2", "delete-v3", "compaction-v2", "append-v2"],
)
def test_a_writer_committing_mid_conversion(spark, lake_hook, namespace, monkeypatch, format_version, writer, outcomes):
    name = f"{namespace}.events"
    _flink_style_table(spark, lake_hook, name, format_version)
    written: list[int] = []
    commit = convert_job.commit_conversion

    def another_writer_commits_first(*args, **kwargs):
        if not written:  # between the conversion's read of the table and its commit
            spark.sql(writer.format(name=name))
            written.append(lake_hook.load_table(name).current_snapshot().snapshot_id)
        return commit(*args, **kwargs)

    monkeypatch.setattr(convert_job, "commit_conversion", another_writer_commits_first)
    result = convert_job.run(spark, "lake", {"table": name, "retry_backoff_seconds": 0})

    assert [a["outcome"] for a in result["attempts"]] == outcomes
    if outcomes[0] == "conflict":
        assert "ValidationException" in result["attempts"][0]["detail"]
        assert result["attempts"][1]["starting_snapshot_id"] == written[0]  # planned again on the writer's snapshot
    table = lake_hook.load_table(name)
    committed = outcomes[-1] == "committed"
    assert result["committed_snapshot_ids"] == ([table.current_snapshot().snapshot_id] if committed else [])
    # The rows are exactly what the other writer committed, and no equality delete is left.
    expected = spark_fingerprint(spark, name, snapshot_id=written[0])
    assert spark_fingerprint(spark, name) == expected
    assert table_fingerprint(table) == expected
    assert live_files(table)["EQUALITY_DELETES"] == 0
    if format_version == "3":
        per_data_file = _delete_files_per_data_file(spark, name)
        assert None not in per_data_file and set(per_data_file.values()) == {1}  # never two DVs for a file


# -- the operator: XCom, a retried task, bad input -------------------------------------------
@pytest.mark.spark_submit
def test_operator_converts_in_spark_and_a_retried_task_finds_its_commit(spark, lake_hook, namespace):
    name = f"{namespace}.events"
    _flink_style_table(spark, lake_hook, name, "2")
    rows_before = spark_fingerprint(spark, name)
    seen = lake_hook.load_table(name).current_snapshot().snapshot_id
    context = {"ti": FakeTaskInstance(task_id="convert", run_id="manual__convert")}

    result = IcebergConvertEqualityDeletesOperator(task_id="convert", table=name, snapshot_id=seen).execute(context)

    assert json.loads(json.dumps(result)) == result  # travels through XCom as it is
    table = lake_hook.load_table(name)
    assert result["snapshot_id_before"] == result["converted_snapshot_id"] == seen
    assert result["committed_snapshot_ids"] == [result["snapshot_id_after"]] == [table.current_snapshot().snapshot_id]
    committed = table.snapshot_by_id(result["snapshot_id_after"])
    assert committed.parent_snapshot_id == seen
    assert {k: committed.summary[k] for k in ("airflow.run-id", "airflow.task-id")} == {
        "airflow.run-id": "manual__convert", "airflow.task-id": "convert"}
    figures = {k: result[k] for k in ("converted_equality_delete_files", "added_position_delete_files",
                                      "replaced_delete_files", "deleted_rows")}
    assert figures == {"converted_equality_delete_files": 2, "added_position_delete_files": 5,
                       "replaced_delete_files": 2, "deleted_rows": 17}
    assert table_fingerprint(table) == rows_before
    assert live_files(table) == {"DATA": 7, "POSITION_DELETES": 5, "EQUALITY_DELETES": 0}

    # The same task tried again: it finds its commit in the table's history and starts no Spark.
    retried = IcebergConvertEqualityDeletesOperator(task_id="convert", table=name, snapshot_id=seen)
    again = retried.execute(context)
    assert retried._job_hook is None
    assert again["recovered_from_earlier_try"] is True
    assert {k: again[k] for k in ("snapshot_id_before", "committed_snapshot_ids", "snapshot_id_after", *figures)} == {
        k: result[k] for k in ("snapshot_id_before", "committed_snapshot_ids", "snapshot_id_after", *figures)}


@pytest.mark.spark_submit
def test_the_shipped_dag_converts_a_flink_table(airflow_db, spark, lake_hook, namespace):
    """``lake_convert_equality_deletes`` through dag.test(): the user's way in, a spark-submit underneath."""
    name = f"{namespace}.events"
    _flink_style_table(spark, lake_hook, name, "2")
    rows_before = spark_fingerprint(spark, name)
    snapshot_before = lake_hook.load_table(name).current_snapshot().snapshot_id

    run = load_dag("lake_convert_equality_deletes.py", "lake_convert_equality_deletes").test(run_conf={"table": name})
    assert run.state == "success"
    result = run.get_task_instance("convert_equality_deletes").xcom_pull(task_ids="convert_equality_deletes")

    table = lake_hook.load_table(name)
    assert result["snapshot_id_before"] == snapshot_before
    assert result["committed_snapshot_ids"] == [table.current_snapshot().snapshot_id] == [result["snapshot_id_after"]]
    assert table.snapshot_by_id(result["snapshot_id_after"]).parent_snapshot_id == snapshot_before
    assert result["converted_equality_delete_files"] == 2 and result["deleted_rows"] > 0
    assert live_files(table)["EQUALITY_DELETES"] == 0
    assert spark_fingerprint(spark, name) == rows_before == table_fingerprint(table)


def test_operator_bad_input_and_nothing_to_do_start_no_spark(lake_hook, namespace, bad_input):
    name = f"{namespace}.events"
    create_events_table(lake_hook.catalog, name, days=1, commits_per_day=2, rows_per_commit=5)
    snapshot = lake_hook.load_table(name).current_snapshot().snapshot_id
    context = {"ti": FakeTaskInstance(task_id="convert")}
    for kwargs, error, message in [
        ({"table": f"{namespace}.ghost"}, LakeTableNotFound, "does not exist in catalog 'lake'"),
        ({"table": name, "max_commit_attempts": 0}, LakeConfigError, "max_commit_attempts must be a whole number"),
        ({"table": name, "snapshot_id": 42}, LakeSnapshotError, "given snapshot 42 is not in the history"),
    ]:
        op = IcebergConvertEqualityDeletesOperator(task_id="convert", **kwargs)
        with pytest.raises(error, match=message) as raised:
            op.execute(context)
        assert op._job_hook is None
        bad_input(IcebergConvertEqualityDeletesOperator.__name__,
                  ", ".join(f"{k}={v!r}" for k, v in kwargs.items() if v != name), raised.value, table_checked=True)

    op = IcebergConvertEqualityDeletesOperator(task_id="convert", table=name)
    result = op.execute(context)
    assert op._job_hook is None
    assert result["committed_snapshot_ids"] == [] and result["converted_equality_delete_files"] == 0
    assert result["snapshot_id_before"] == result["snapshot_id_after"] == snapshot
    assert lake_hook.load_table(name).current_snapshot().snapshot_id == snapshot
