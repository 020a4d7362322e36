"""Equality deletes converted into position deletes (v2) and deletion vectors (v3), rewriting no data.

What a user checks: the rows (checksums read by Spark before and after, and by PyIceberg once no
equality deletes remain), the files by content type, the snapshots the result names, and what
happens when another writer commits in the middle of the conversion.
"""

from __future__ import annotations

import pytest

from airflow_lake_provider.demo_data import create_events_table
from airflow_lake_provider.jobs import convert_equality_deletes as convert_job
from equality_deletes import commit_equality_deletes
from lake_checks import live_files, spark_fingerprint, table_fingerprint

DAY1, DAY2 = "day=2026-01-01", "day=2026-01-02"


def _flink_style_table(spark, lake_hook, name: str, format_version: str):
    """Two days of small files with every kind of delete a streaming upsert pipeline leaves.

    Merge-on-read DELETE (position deletes or DVs) of rows 1 and 12; equality deletes in both
    partitions, one of them (event_id 1) for a row already position-deleted; event_id 2 deleted
    by key and then written again (the new row must stay visible).
    """
    create_events_table(lake_hook.catalog, name, days=2, commits_per_day=3, rows_per_commit=10)
    if format_version != "2":  # PyIceberg 0.12 writes v2 only; Spark upgrades the table
        spark.sql(f"ALTER TABLE lake.{name} SET TBLPROPERTIES ('format-version' = '{format_version}')")
    spark.sql(f"DELETE FROM lake.{name} WHERE event_id IN (1, 12)")
    commit_equality_deletes(spark, name, [{"event_id": 1}, {"event_id": 2}, {"event_id": 3}, {"event_id": 21}],
                            partition_path=DAY1)
    commit_equality_deletes(spark, name, [{"event_id": 11}, {"event_id": 33}], partition_path=DAY2)
    spark.sql(f"INSERT INTO lake.{name} VALUES (2, DATE '2026-01-01', 'z', 9.5, 'written again after its delete')")


def _delete_files_per_data_file(spark, name: str) -> dict[str, int]:
    rows = spark.sql(f"SELECT file_path FROM lake.{name}.delete_files WHERE content = 1").collect()
    referenced = spark.sql(
        f"SELECT referenced_data_file AS ref, count(*) AS n FROM lake.{name}.delete_files WHERE content = 1 "
        "GROUP BY referenced_data_file").collect()
    assert len(rows) == sum(r["n"] for r in referenced)
    return {r["ref"]: r["n"] for r in referenced}


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
    assert rows_before[0] == 60 + 1 - 7  # 60 written, 1 written again, 7 keys deleted (1 twice)

    result = convert_job.run(spark, "lake", {"table": name, "snapshot_properties": {"airflow.run-id": "r1"}})

    table = lake_hook.load_table(name)
    assert spark_fingerprint(spark, name) == rows_before
    assert table_fingerprint(table) == rows_before  # PyIceberg can read it again, and agrees with Spark
    after_files = live_files(table)
    assert after_files["EQUALITY_DELETES"] == 0
    assert after_files["DATA"] == before_files["DATA"]  # no data file rewritten
    # The equality deletes apply to the three older files of each day (the file holding the new row 2
    # was written after them); rows are deleted from four: ids 0-9 (1, 2, 3), 20-29 (21), 10-19 (11, 12),
    # 30-39 (33).
    assert result["affected_data_files"] == 6
    assert result["converted_equality_delete_files"] == 2 and result["equality_delete_records"] == 6
    assert result["deleted_rows"] == 7
    added_key = "added_deletion_vectors" if format_version == "3" else "added_position_delete_files"
    assert result[added_key] == 4
    assert result["replaced_delete_files"] == 2  # the DELETE's file-scoped deletes, merged into the new ones
    # Exactly one position delete file (or DV) per affected data file, nothing else.
    assert after_files["POSITION_DELETES"] == 4
    assert sorted(_delete_files_per_data_file(spark, name).values()) == [1, 1, 1, 1]
    # XCom's snapshot IDs are the table's: one commit, on top of the snapshot converted, carrying the run's tags.
    committed = table.snapshot_by_id(result["committed_snapshot_ids"][0])
    assert result["committed_snapshot_ids"] == [result["snapshot_id_after"]] == [table.current_snapshot().snapshot_id]
    assert committed.parent_snapshot_id == result["snapshot_id_before"] == result["converted_snapshot_id"]
    assert committed.summary["airflow.run-id"] == "r1"
    assert result["verified"] == {"visible_rows_in_affected_files": 40 - 7, "after": 40 - 7}


def test_a_table_without_equality_deletes_is_left_alone(spark, lake_hook, namespace):
    name = f"{namespace}.events"
    create_events_table(lake_hook.catalog, name, days=1, commits_per_day=2, rows_per_commit=5)
    spark.sql(f"DELETE FROM lake.{name} WHERE event_id = 3")
    snapshot = lake_hook.load_table(name).current_snapshot().snapshot_id
    result = convert_job.run(spark, "lake", {"table": name})
    assert result["committed_snapshot_ids"] == [] and result["converted_equality_delete_files"] == 0
    assert lake_hook.load_table(name).current_snapshot().snapshot_id == snapshot
