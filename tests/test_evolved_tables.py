"""Tables whose partition spec and schema evolved: compacted onto the current spec, rows identical.

The table is built the way a long-lived table gets there: ``day(ts)``, then ``hour(ts)``, then a
bucket on ``event_id`` added, with small files appended under every spec (and, with
``evolve_schema``, columns added, renamed and dropped between them). The maintenance group runs on
such a table in tests/test_table_kinds.py.
"""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from airflow_lake_provider.jobs import rewrite as rewrite_job
from lake_checks import files_by_spec, spark_fingerprint, table_fingerprint

UTC = dt.timezone.utc
APPENDS_PER_SPEC = 4
ROWS_PER_APPEND = 10


def _append(table, first_id: int) -> int:
    """``ROWS_PER_APPEND`` rows over two hours of two days (one small file per partition touched)."""
    schema = table.schema().as_arrow()
    ids = list(range(first_id, first_id + ROWS_PER_APPEND))
    values = {
        "event_id": ids,
        "ts": [dt.datetime(2026, 1, 1 + i % 2, 5, i % 60, tzinfo=UTC) for i in ids],
        "amount": [i / 4 for i in ids],
        "note": [f"note {i}" for i in ids],
        "comment": [f"comment {i}" for i in ids],
        "country": [("DE", "FR", "JP")[i % 3] for i in ids],
    }
    table.append(pa.table({field.name: values[field.name] for field in schema}, schema=schema))
    return first_id + ROWS_PER_APPEND


def create_evolved_table(catalog, identifier: str, *, evolve_schema: bool = False):
    """Specs 0 ``day(ts)``, 1 ``hour(ts)``, 2 ``hour(ts), bucket[8](event_id)``; files under each.

    ``evolve_schema`` also adds ``country`` (before spec 1), renames ``note`` to ``comment``
    (before spec 2) and drops ``amount`` (after it), each followed by appends.
    """
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import BucketTransform, DayTransform, HourTransform
    from pyiceberg.types import DoubleType, LongType, NestedField, StringType, TimestamptzType

    schema = Schema(
        NestedField(1, "event_id", LongType(), required=True),
        NestedField(2, "ts", TimestamptzType(), required=True),
        NestedField(3, "amount", DoubleType(), required=False),
        NestedField(4, "note", StringType(), required=False),
    )
    table = catalog.create_table(
        identifier, schema=schema,
        partition_spec=PartitionSpec(PartitionField(2, 1000, DayTransform(), "ts_day")),
        properties={"format-version": "2", "write.delete.mode": "merge-on-read"},
    )
    next_id = 0

    def appends():
        nonlocal next_id
        for _ in range(APPENDS_PER_SPEC):
            next_id = _append(table, next_id)

    appends()
    if evolve_schema:
        with table.update_schema() as update:
            update.add_column("country", StringType())
    with table.update_spec() as update:
        update.remove_field("ts_day")
        update.add_field("ts", HourTransform(), "ts_hour")
    appends()
    if evolve_schema:
        with table.update_schema() as update:
            update.rename_column("note", "comment")
    with table.update_spec() as update:
        update.add_field("event_id", BucketTransform(8), "id_bucket_8")
    appends()
    if evolve_schema:
        with table.update_schema() as update:
            update.delete_column("amount")
        appends()
    return catalog.load_table(identifier)


def test_files_of_older_specs_are_compacted_and_every_group_is_confirmed(spark, lake_hook, namespace):
    """Regression: the rewrite committed every group, then reported the older specs' group as
    dropped ("ts_hour=null/id_bucket_8=null: commit dropped") because removed files were named by
    their own spec and groups by the current one."""
    name = f"{namespace}.evolved"
    table = create_evolved_table(lake_hook.catalog, name)
    assert set(files_by_spec(table)) == {0, 1, 2}
    before = table_fingerprint(table), spark_fingerprint(spark, name)

    result = rewrite_job.run(spark, "lake", {
        "table": name, "planned_snapshot_id": table.current_snapshot().snapshot_id, "partitions": None,
        "options": {"min-input-files": "2"}, "rewrite_position_deletes": True,
        "snapshot_properties": {"airflow.task-id": "rewrite"},
    })

    table = lake_hook.load_table(name)
    assert result["failed_groups"] == []
    old_spec_files = 2 * 2 * APPENDS_PER_SPEC  # specs 0 and 1: one file per day per append
    assert "ts_hour=null/id_bucket_8=null" in [g["partition"] for g in result["groups"]]
    assert sum(g["rewritten_data_files"] for g in result["groups"]
               if g["partition"] == "ts_hour=null/id_bucket_8=null") == old_spec_files
    assert set(files_by_spec(table)) == {2}
    assert (table_fingerprint(table), spark_fingerprint(spark, name)) == before
