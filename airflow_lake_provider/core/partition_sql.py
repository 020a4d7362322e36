"""A PyIceberg row filter as Spark SQL over partition values: how the Spark planner filters.

PyIceberg selects files for a filter in two steps: the filter's *inclusive* projection on each
partition spec (is any row of this partition possibly selected?), then column metrics. The
Spark planning job sees partition values only, so it gets two predicates per spec:

* ``inclusive``: the files PyIceberg's partition step keeps;
* ``strict``: partitions whose rows *all* match the filter.

Where a live file sits in a partition that is inclusive but not strict, the filter cuts through
the partition, and only column metrics could tell which files PyIceberg keeps: the job then
refuses (it does not guess), and the operator falls back to PyIceberg. Filters on the partition
source columns at partition boundaries (``day = '2026-01-01'``, the data-interval filters of
scheduled runs) are always aligned.

The predicates compare the *normalised* partition column ``part`` the job builds: dates as days
and timestamps as microseconds since the epoch, which are also the literal values Iceberg's
projections carry. Each predicate is written to be true or false, never NULL, with PyIceberg's
evaluator semantics (``NULL != 1`` is true there, as in Python).

PyIceberg is imported inside the functions: this runs in the Airflow worker, never on Spark.
"""

from __future__ import annotations

import decimal
import uuid
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyiceberg.table import Table

SPEC_COLUMN = "spec_id"
PARTITION_COLUMN = "part"


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _literal(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return f"{value}L"
    if isinstance(value, float):
        return f"{value!r}D"
    if isinstance(value, decimal.Decimal):
        return f"{value}BD"
    if isinstance(value, (bytes, bytearray)):
        return f"X'{bytes(value).hex()}'"
    if isinstance(value, uuid.UUID):
        value = str(value)
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    raise ValueError(f"Cannot write {value!r} ({type(value).__name__}) as a Spark SQL literal.")


def _definite(sql: str) -> str:
    return f"coalesce({sql}, false)"


def to_spark_sql(expr: Any) -> str:
    """A (projected, unbound) PyIceberg expression over partition fields as a Spark SQL predicate."""
    from pyiceberg.expressions import (
        AlwaysFalse,
        AlwaysTrue,
        And,
        EqualTo,
        GreaterThan,
        GreaterThanOrEqual,
        In,
        IsNaN,
        IsNull,
        LessThan,
        LessThanOrEqual,
        Not,
        NotEqualTo,
        NotIn,
        NotNaN,
        NotNull,
        NotStartsWith,
        Or,
        StartsWith,
    )

    if isinstance(expr, AlwaysTrue):
        return "true"
    if isinstance(expr, AlwaysFalse):
        return "false"
    if isinstance(expr, And):
        return f"({to_spark_sql(expr.left)} AND {to_spark_sql(expr.right)})"
    if isinstance(expr, Or):
        return f"({to_spark_sql(expr.left)} OR {to_spark_sql(expr.right)})"
    if isinstance(expr, Not):
        return f"(NOT {to_spark_sql(expr.child)})"
    column = f"{PARTITION_COLUMN}.{_quote(expr.term.name)}"
    if isinstance(expr, IsNull):
        return f"({column} IS NULL)"
    if isinstance(expr, NotNull):
        return f"({column} IS NOT NULL)"
    if isinstance(expr, IsNaN):
        return _definite(f"isnan({column})")
    if isinstance(expr, NotNaN):
        return f"(NOT {_definite(f'isnan({column})')})"
    if isinstance(expr, (In, NotIn)):
        values = ", ".join(sorted(_literal(lit.value) for lit in expr.literals))
        inside = _definite(f"{column} IN ({values})")
        return inside if isinstance(expr, In) else f"(NOT {inside})"
    value = expr.literal.value
    if isinstance(expr, (StartsWith, NotStartsWith)):
        inside = _definite(f"left({column}, {len(value)}) = {_literal(value)}")
        return inside if isinstance(expr, StartsWith) else f"(NOT {inside})"
    operators = {EqualTo: "=", LessThan: "<", LessThanOrEqual: "<=", GreaterThan: ">", GreaterThanOrEqual: ">="}
    if isinstance(expr, NotEqualTo):
        return f"(NOT {_definite(f'{column} = {_literal(value)}')})"
    for kind, op in operators.items():
        if isinstance(expr, kind):
            return _definite(f"{column} {op} {_literal(value)}")
    raise ValueError(f"Cannot translate {expr!r} to Spark SQL.")


def spark_partition_predicates(table: Table, row_filter: Any) -> dict[str, str] | None:
    """``{"inclusive", "strict"}`` Spark SQL predicates over ``spec_id`` and ``part`` for every spec
    of ``table``; ``None`` when ``row_filter`` selects everything."""
    from pyiceberg.expressions import AlwaysTrue
    from pyiceberg.expressions.visitors import inclusive_projection, strict_projection

    if isinstance(row_filter, AlwaysTrue):
        return None
    schema = table.schema()
    predicates = {}
    for kind, project in (("inclusive", inclusive_projection), ("strict", strict_projection)):
        clauses = [
            f"({SPEC_COLUMN} = {spec_id} AND {to_spark_sql(project(schema, spec, True)(row_filter))})"
            for spec_id, spec in sorted(table.specs().items())
        ]
        predicates[kind] = " OR ".join(clauses)
    return predicates
