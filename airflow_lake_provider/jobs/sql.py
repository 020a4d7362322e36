"""Run Spark SQL statements against the catalog and return the rows of the last one.

The general-purpose job: setting up tables, reading them back for verification, and running
Iceberg procedures by hand. Rows are capped so a careless SELECT cannot flood XCom.
"""

from __future__ import annotations

from typing import Any

from airflow_lake_provider.core.contracts import SqlJobArgs, SqlJobResult


def run(spark, catalog: str, args: dict[str, Any]) -> dict[str, Any]:
    job = SqlJobArgs.from_json(args).validate()
    spark.sql(f"USE `{catalog}`")
    rows: list[dict[str, Any]] = []
    columns: list[str] = []
    for statement in job.statements:
        frame = spark.sql(statement)
        columns = frame.columns
        rows = [row.asDict(recursive=True) for row in frame.limit(job.max_rows + 1).collect()]
    return SqlJobResult(columns=columns, rows=rows[:job.max_rows], truncated=len(rows) > job.max_rows,
                        statements=len(job.statements)).to_json()
