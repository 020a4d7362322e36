"""One catalog, two faces: what Spark writes PyIceberg reads, and the other way round."""

from __future__ import annotations

import pyarrow as pa
import pytest

from airflow_lake_provider.hooks.spark_job import LakeSparkJobHook
from airflow_lake_provider.core.contracts import SqlJobArgs


def test_table_created_by_spark_is_listed_loaded_and_read_by_pyiceberg(spark, lake_hook, namespace):
    spark.sql(f"CREATE TABLE lake.{namespace}.orders (id BIGINT, region STRING, amount DOUBLE) USING iceberg PARTITIONED BY (region)")
    spark.sql(f"INSERT INTO lake.{namespace}.orders VALUES (1, 'eu', 10.5), (2, 'us', 20.0), (3, 'eu', 7.25)")
    spark.sql(f"DELETE FROM lake.{namespace}.orders WHERE id = 2")

    assert (namespace, "orders") in lake_hook.catalog.list_tables(namespace)
    table = lake_hook.load_table(f"{namespace}.orders")
    rows = sorted(table.scan().to_arrow().to_pylist(), key=lambda r: r["id"])
    spark_rows = [r.asDict() for r in spark.sql(f"SELECT * FROM lake.{namespace}.orders ORDER BY id").collect()]
    assert rows == spark_rows == [
        {"id": 1, "region": "eu", "amount": 10.5},
        {"id": 3, "region": "eu", "amount": 7.25},
    ]
    spark_snapshots = [r.snapshot_id for r in spark.sql(f"SELECT snapshot_id FROM lake.{namespace}.orders.snapshots ORDER BY committed_at").collect()]
    assert [s.snapshot_id for s in table.snapshots()] == spark_snapshots


@pytest.mark.spark_submit
def test_pyiceberg_append_is_seen_by_a_later_spark_job(lake_hook, namespace):
    schema = pa.schema([("id", pa.int64()), ("name", pa.string())])
    table = lake_hook.catalog.create_table(f"{namespace}.people", schema=schema)
    table.append(pa.table({"id": [1, 2, 3], "name": ["ada", "bob", "cy"]}, schema=schema))

    result = LakeSparkJobHook(lake_hook=lake_hook).run(SqlJobArgs(statements=[
            f"SELECT count(*) AS n, sum(id) AS total FROM lake.{namespace}.people",
        ]),
    )
    assert result.rows == [{"n": 3, "total": 6}]
    assert result.columns == ["n", "total"]
