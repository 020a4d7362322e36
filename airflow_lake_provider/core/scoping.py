"""Scope maintenance to the partitions of a data interval (scheduled runs and backfills).

A daily run over ``[2026-01-03, 2026-01-04)`` of a table partitioned by ``day(ts)`` (or by
identity on a ``DATE`` column) should compact that day's partitions only, so a backfill over
last month compacts each day in its own run. Pure logic: the table's partition fields come in
as plain tuples; the result is a PyIceberg row filter string for the planner.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import TYPE_CHECKING

from airflow_lake_provider.core.coercion import is_none
from airflow_lake_provider.exceptions import LakeConfigError

if TYPE_CHECKING:
    from pyiceberg.table import Table

TIME_TRANSFORMS = ("hour", "day", "month", "year")


@dataclass(frozen=True)
class PartitionFieldInfo:
    """One partition field: its source column, transform (``day``, ``identity``...) and source type."""

    source_column: str
    transform: str
    source_type: str  # "date", "timestamp", "timestamptz", "string", ...


def time_partition_field(fields: list[PartitionFieldInfo]) -> PartitionFieldInfo | None:
    """The field that partitions by time: a time transform, or identity on a date column."""
    for field in fields:
        if field.transform in TIME_TRANSFORMS and field.source_type in ("date", "timestamp", "timestamptz"):
            return field
    for field in fields:
        if field.transform == "identity" and field.source_type == "date":
            return field
    return None


def _utc(value: dt.datetime) -> dt.datetime:
    if value.tzinfo is None:
        return value.replace(tzinfo=dt.timezone.utc)
    return value.astimezone(dt.timezone.utc)


def interval_filter(fields: list[PartitionFieldInfo], start: dt.datetime, end: dt.datetime) -> str | None:
    """A row filter selecting the partitions that hold ``[start, end)``; ``None`` if the table has no time partition.

    The bounds are on the source column, so the planner's inclusive projection maps them to
    exactly the partitions of the interval (a day, or the hours of a day, ...).
    """
    start, end = _utc(start), _utc(end)
    if end <= start:
        raise LakeConfigError(f"The data interval [{start.isoformat()}, {end.isoformat()}) is empty.")
    field = time_partition_field(fields)
    if field is None:
        return None
    column = field.source_column
    if field.source_type == "date":
        first = start.date()
        # The end is exclusive: an interval ending at midnight does not touch the next day.
        last_exclusive = end.date() if end.time() == dt.time(0, tzinfo=None) else end.date() + dt.timedelta(days=1)
        return f"{column} >= '{first.isoformat()}' AND {column} < '{last_exclusive.isoformat()}'"
    if field.source_type == "timestamptz":
        return f"{column} >= '{start.isoformat()}' AND {column} < '{end.isoformat()}'"
    naive = "%Y-%m-%dT%H:%M:%S.%f"
    return f"{column} >= '{start.strftime(naive)}' AND {column} < '{end.strftime(naive)}'"


def parse_first_day(text: str, *, setting: str) -> dt.datetime:
    """The first day a scheduled DAG maintains, from its setting (``YYYY-MM-DD``), at 00:00 UTC."""
    try:
        day = dt.date.fromisoformat(str(text).strip())
    except ValueError:
        raise LakeConfigError(f"{setting}={text!r} is not a date: write it as YYYY-MM-DD, e.g. 2025-01-01.") from None
    return dt.datetime(day.year, day.month, day.day, tzinfo=dt.timezone.utc)


def before_first_day(interval_start: dt.datetime | None, first_day: dt.datetime, *, dag_id: str,
                     setting: str) -> str | None:
    """Why a run whose data interval starts before ``first_day`` is refused; ``None`` when it may run.

    A run without a data interval (manual, no logical date) covers no day and may run.
    """
    if interval_start is None or _utc(interval_start) >= _utc(first_day):
        return None
    day = _utc(interval_start).date().isoformat()
    return (
        f"This run is for {day}, before {first_day.date().isoformat()}, the first day {dag_id} maintains "
        f"({setting}): nothing was done. To maintain earlier days, set {setting}={day} (or earlier) in the "
        "environment of the dag-processor, scheduler and workers, then trigger or backfill these days again."
    )


def partition_fields_of(table: Table) -> list[PartitionFieldInfo]:
    """The current partition spec of a PyIceberg table as :class:`PartitionFieldInfo` tuples."""
    schema = table.schema()
    found = []
    for field in table.spec().fields:
        source = schema.find_field(field.source_id)
        found.append(PartitionFieldInfo(source.name, str(field.transform).split("[")[0], str(source.field_type)))
    return found


def combine_filters(*filters: str | None) -> str | None:
    """AND of the given filters, ignoring empty ones."""
    present = [f"({str(f).strip()})" for f in filters if not is_none(f)]
    return " AND ".join(present) if present else None
