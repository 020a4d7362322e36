"""Run Spark SQL statements against the catalog and return the rows of the last one.

The general-purpose job: setting up tables, reading them back for verification, and running
Iceberg procedures by hand. Rows are capped so a careless SELECT cannot flood XCom.
"""

from __future__ import annotations

from typing import Any


def run(spark, catalog: str, args: dict[str, Any]) -> dict[str, Any]:
    statements = args.get("statements") or []
    if isinstance(statements, str):
        statements = [statements]
    if not statements:
        raise ValueError("The sql job needs at least one statement in args['statements'].")
    max_rows = int(args.get("max_rows", 1000))
    spark.sql(f"USE `{catalog}`")
    rows: list[dict[str, Any]] = []
    columns: list[str] = []
    for statement in statements:
        frame = spark.sql(statement)
        columns = frame.columns
        rows = [row.asDict(recursive=True) for row in frame.limit(max_rows + 1).collect()]
    truncated = len(rows) > max_rows
    return {"columns": columns, "rows": rows[:max_rows], "truncated": truncated, "statements": len(statements)}
