"""Build tables that need maintenance: many small files, several partitions.

Used by ``make demo`` and by the tests. Writes through PyIceberg (no JVM): each append is
one commit and one small data file per partition it touches, like a streaming writer.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import itertools

import pyarrow as pa

EVENTS_SCHEMA = pa.schema(
    [
        pa.field("event_id", pa.int64(), nullable=False),
        pa.field("day", pa.date32(), nullable=False),
        pa.field("category", pa.string(), nullable=False),
        pa.field("amount", pa.float64(), nullable=False),
        pa.field("payload", pa.string(), nullable=False),
    ]
)


def _batch(start_id: int, rows: int, day: dt.date, categories: list[str]) -> pa.Table:
    ids = list(range(start_id, start_id + rows))
    return pa.table(
        {
            "event_id": ids,
            "day": [day] * rows,
            "category": [categories[i % len(categories)] for i in ids],
            "amount": [round((i * 37 % 1000) / 10.0, 2) for i in ids],
            "payload": [hashlib.sha1(str(i).encode()).hexdigest() for i in ids],
        },
        schema=EVENTS_SCHEMA,
    )


def create_events_table(
    catalog,
    identifier: str,
    *,
    days: int = 3,
    commits_per_day: int = 20,
    rows_per_commit: int = 50,
    first_day: dt.date = dt.date(2026, 1, 1),
    partition_by: str = "day",
    properties: dict[str, str] | None = None,
    replace: bool = True,
):
    """Create ``identifier`` partitioned by ``day`` (identity), appended to in many small commits.

    ``partition_by="day_transform"`` partitions by ``day(ts)``-style transform on the date
    column instead; ``"none"`` leaves the table unpartitioned. Returns the PyIceberg table.
    """
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.transforms import DayTransform, IdentityTransform

    namespace = identifier.rsplit(".", 1)[0]
    catalog.create_namespace_if_not_exists(namespace)
    if replace and catalog.table_exists(identifier):
        catalog.purge_table(identifier)
    table = catalog.create_table(
        identifier,
        schema=EVENTS_SCHEMA,
        properties={"write.delete.mode": "merge-on-read", "write.update.mode": "merge-on-read",
                    "format-version": "2", **(properties or {})},
    )
    if partition_by != "none":
        source_id = table.schema().find_field("day").field_id
        transform = IdentityTransform() if partition_by == "day" else DayTransform()
        name = "day" if partition_by == "day" else "day_day"
        table.update_spec().add_field("day", transform, name).commit()
        table = catalog.load_table(identifier)
        assert table.spec() == PartitionSpec(PartitionField(source_id, 1000, transform, name), spec_id=1)
    next_id = 0
    for commit in range(commits_per_day):
        for offset in range(days):
            day = first_day + dt.timedelta(days=offset)
            table.append(_batch(next_id, rows_per_commit, day, ["a", "b", "c"]))
            next_id += rows_per_commit
    return catalog.load_table(identifier)


@contextlib.contextmanager
def snapshot_clock(first_s: float, step_s: float):
    """Date the snapshots PyIceberg commits inside ``first_s``, ``first_s + step_s``, ... (epoch
    seconds): a history written over days, made in seconds (the demo's table, old enough for the
    table's own retention to expire part of it). Only a new Snapshot's default timestamp reads this
    clock; metadata files keep the real time, which is later, as Iceberg requires."""
    import pyiceberg.table.snapshots as snapshots

    ticks = itertools.count()

    class Clock:
        @staticmethod
        def time() -> float:
            return first_s + next(ticks) * step_s

    real, snapshots.time = snapshots.time, Clock  # type: ignore[assignment]
    try:
        yield
    finally:
        snapshots.time = real
