"""Write equality deletes as Flink's upsert and CDC writers do, for tests of tables that carry them.

Spark SQL never writes equality deletes and PyIceberg cannot either, so a test writes the
delete file itself (Parquet with Iceberg field IDs, through the table's own FileIO) and commits
it with Iceberg's Java ``RowDelta`` in the test's Spark session: the same metadata a Flink
writer commits. Rows of data files with a lower data sequence number whose key columns equal
a deleted key disappear from reads; rows written later with the same key stay visible.
"""

from __future__ import annotations

import uuid
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq


def commit_equality_deletes(
    spark,
    table_name: str,
    keys: list[dict[str, Any]],
    *,
    catalog: str = "lake",
    partition_path: str | None = None,
    pyiceberg_table=None,
    spec_id: int | None = None,
    partition: Any = None,
    with_metrics: bool = False,
) -> int:
    """Commit one equality delete file deleting every row whose key columns equal one of ``keys``.

    ``keys`` are dicts of the same columns (the equality field IDs); ``partition_path`` (e.g.
    ``"day=2026-01-01"``) scopes the delete file to one partition of a partitioned spec, as a
    Flink writer does (``partition``: the same as a Java ``StructLike``, such as a data file's
    ``partition()`` under ``spec_id``); neither writes it under ``spec_id`` (default: the current
    spec) with no partition, which on an unpartitioned spec is a global delete. ``with_metrics`` records the
    file's column metrics (value and null counts, lower/upper bounds of the key columns) as Flink
    does, which lets planners skip data files whose key ranges it cannot touch. Returns the new
    snapshot ID.
    """
    from pyiceberg.io.pyarrow import schema_to_pyarrow

    if not keys:
        raise ValueError("keys must name at least one row to delete")
    jvm = spark.sparkContext._jvm
    jtable = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, f"{catalog}.{table_name}")
    columns = list(keys[0])
    if pyiceberg_table is None:
        from airflow_lake_provider.hooks.lake import IcebergLakeHook

        pyiceberg_table = IcebergLakeHook().catalog.load_table(table_name)
    pyiceberg_table.refresh()
    delete_schema = pyiceberg_table.schema().select(*columns)
    arrow = pa.Table.from_pylist(keys, schema=schema_to_pyarrow(delete_schema))

    path = f"{str(jtable.location()).rstrip('/')}/data/eq-delete-{uuid.uuid4().hex}.parquet"
    output = pyiceberg_table.io.new_output(path)
    with output.create(overwrite=True) as stream:
        pq.write_table(arrow, stream)
    size = len(pyiceberg_table.io.new_input(path))

    spec = jtable.specs().get(int(spec_id)) if spec_id is not None else jtable.spec()
    field_ids = spark.sparkContext._gateway.new_array(jvm.int, len(columns))
    for index, field in enumerate(delete_schema.fields):
        field_ids[index] = field.field_id
    builder = (
        jvm.org.apache.iceberg.FileMetadata.deleteFileBuilder(spec)
        .ofEqualityDeletes(field_ids)
        .withPath(path)
        .withFormat(jvm.org.apache.iceberg.FileFormat.PARQUET)
        .withFileSizeInBytes(size)
        .withRecordCount(len(keys))
    )
    if with_metrics:
        metrics = jvm.org.apache.iceberg.parquet.ParquetUtil.fileMetrics(
            jtable.io().newInputFile(path), jvm.org.apache.iceberg.MetricsConfig.forTable(jtable))
        builder = builder.withMetrics(metrics)
    if partition_path is not None:
        builder = builder.withPartitionPath(partition_path)
    if partition is not None:
        builder = builder.withPartition(partition)
    jtable.newRowDelta().addDeletes(builder.build()).commit()
    jtable.refresh()
    return int(jtable.currentSnapshot().snapshotId())
