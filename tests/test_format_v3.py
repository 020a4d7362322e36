"""Format v3 as a first-class case: our compaction applies and drops deletion vectors and keeps
row lineage (``_row_id``, ``_last_updated_sequence_number``) of every row.

The table is written by Spark as a v3 writer would (INSERTs, a merge-on-read DELETE and UPDATE,
both of which write deletion vectors) and compacted by the plan and rewrite operators, each a
real spark-submit. Rows are read back by Spark and by PyIceberg (0.12 reads v3 and deletion vectors).
"""

from __future__ import annotations

import pytest

from airflow_lake_provider.operators.plan import IcebergRewritePlanOperator
from airflow_lake_provider.operators.rewrite import IcebergRewriteDataFilesOperator
from lake_checks import FakeTaskInstance, live_deletion_vectors, live_files, spark_fingerprint, table_fingerprint

DAYS = ("2026-01-01", "2026-01-02")
INSERTS = 4  # each INSERT writes one small file per day


def _row_lineage(spark, table: str) -> dict[int, tuple[int, int]]:
    """``event_id -> (_row_id, _last_updated_sequence_number)`` of every visible row."""
    rows = spark.sql(f"SELECT event_id, _row_id, _last_updated_sequence_number FROM {table}").collect()
    return {row.event_id: (row._row_id, row._last_updated_sequence_number) for row in rows}


def _write_v3_table(spark, table: str) -> None:
    spark.sql(f"""
        CREATE TABLE {table} (event_id BIGINT, day DATE, amount DOUBLE, payload STRING) USING iceberg
        PARTITIONED BY (day)
        TBLPROPERTIES ('format-version' = '3', 'write.delete.mode' = 'merge-on-read',
                       'write.update.mode' = 'merge-on-read')""")
    for insert in range(INSERTS):
        values = ", ".join(
            f"({insert * 100 + offset * 10 + i}, DATE '{day}', {i * 1.5}, 'p{insert}-{i}')"
            for offset, day in enumerate(DAYS) for i in range(10)
        )
        spark.sql(f"INSERT INTO {table} VALUES {values}")
    spark.sql(f"DELETE FROM {table} WHERE event_id % 10 = 3")  # one deletion vector per data file
    spark.sql(f"UPDATE {table} SET amount = amount + 1000 WHERE event_id % 10 = 7")  # more DVs, new files


@pytest.mark.spark_submit
# The default (False) runs through the maintenance group in tests/test_table_kinds.py; here Iceberg's own default.
@pytest.mark.parametrize("use_starting_sequence_number", [True], ids=["ssn-true"])
def test_compaction_keeps_row_lineage_and_drops_deletion_vectors(spark, lake_hook, namespace, use_starting_sequence_number):
    name = f"{namespace}.events"
    qualified = f"{lake_hook.config.name}.{name}"
    _write_v3_table(spark, qualified)
    table = lake_hook.load_table(name)
    assert table.metadata.format_version == 3
    lineage = _row_lineage(spark, qualified)
    assert len(lineage) == INSERTS * len(DAYS) * 9  # 10 rows per day and insert, 1 of them deleted
    assert all(row_id is not None and sequence is not None for row_id, sequence in lineage.values())
    assert len({row_id for row_id, _ in lineage.values()}) == len(lineage)  # row IDs are unique
    updated = {event_id for event_id in lineage if event_id % 10 == 7}
    assert {lineage[e][1] for e in updated} == {INSERTS + 2}  # last updated by the UPDATE (sequence 6)
    dvs_before = live_deletion_vectors(table)
    files_before = live_files(table)
    assert dvs_before > 0 and files_before["POSITION_DELETES"] == dvs_before  # every delete is a DV
    fingerprint = spark_fingerprint(spark, name)
    assert table_fingerprint(table) == fingerprint  # both readers see the same rows

    context = {"ti": FakeTaskInstance(task_id="rewrite")}
    plan = IcebergRewritePlanOperator(task_id="plan", table=name, min_input_files=2).execute(
        {"ti": FakeTaskInstance(task_id="plan")})
    rewrite = IcebergRewriteDataFilesOperator(
        task_id="rewrite", table=name, plan=plan,
        options={"use-starting-sequence-number": str(use_starting_sequence_number).lower()},
    )
    result = rewrite.execute(context)

    table = lake_hook.load_table(name)
    assert result["failed_groups"] == [] and result["snapshot_id_after"] == table.current_snapshot().snapshot_id
    assert result["rewriter"] == "arrow", result["rewriter_note"]  # DVs applied and lineage carried by Arrow
    assert rewrite._job_hook.application_id is None  # the DV checks too ran in the driver, without Spark
    assert result["rewritten_data_files"] == files_before["DATA"]
    # Deletion vectors applied (the new files hold only live rows) and dropped with the files they covered.
    after = live_files(table)
    assert after == {"DATA": len(DAYS), "POSITION_DELETES": 0, "EQUALITY_DELETES": 0}
    assert live_deletion_vectors(table) == 0
    assert sum(task.file.record_count for task in table.scan().plan_files()) == fingerprint[0]
    # Same rows for both readers, and every row keeps its identity and last-update sequence number.
    assert spark_fingerprint(spark, name) == fingerprint
    assert table_fingerprint(table) == fingerprint
    assert _row_lineage(spark, qualified) == lineage
    # Kept although the new files' data sequence number is the starting snapshot's (6) or the
    # rewrite's own (7): lineage is written into the files, not inherited from their metadata.
    # (The entries table's sequence_number is the data sequence number.)
    new_sequence_numbers = {row.sequence_number for row in spark.sql(
        f"SELECT sequence_number FROM {qualified}.entries WHERE status < 2 AND data_file.content = 0").collect()}
    assert new_sequence_numbers == {INSERTS + 2 if use_starting_sequence_number else INSERTS + 3}
