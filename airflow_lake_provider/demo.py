"""A table that needs maintenance, made in seconds: ``python -m airflow_lake_provider.demo``.

Writes through PyIceberg (no JVM) into the lake of ``lake_default`` (or the embedded lake): each
append is one commit and one small data file per partition it touches, like a streaming writer.
The demo table's history is dated over four days a week ago, so the table's own retention (five
days by default) expires part of it (a REST catalog refuses back-dated commits: there the table's
properties keep half of it), and a writer that died four days ago left three files under it (on a
local lake), which the clean step takes. Safe to run twice: the table is made again.
Also used by ``make demo`` and by the tests (``create_events_table``).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import hashlib
import itertools
import os
import sys
import time
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import urlsplit

import pyarrow as pa

DEMO_TABLE = "demo.events"
DAY_S = 86400

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
        transform: Any = IdentityTransform() if partition_by == "day" else DayTransform()
        name = "day" if partition_by == "day" else "day_day"
        table.update_spec().add_field("day", transform, name).commit()
        table = catalog.load_table(identifier)
        assert table.spec() == PartitionSpec(PartitionField(source_id, 1000, transform, name), spec_id=1)
    next_id = 0
    for _ in range(commits_per_day):
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

    real, snapshots.time = snapshots.time, Clock  # type: ignore[assignment]  # the demo's own clock
    try:
        yield
    finally:
        snapshots.time = real


def dead_writer_files(table: Any, *, days_old: float) -> list[str]:
    """Three files a writer that died ``days_old`` days ago left under ``table``: orphans for clean.
    Only on a local table (an object store keeps its own modification times): ``[]`` elsewhere."""
    location = urlsplit(table.location())
    if location.scheme not in ("", "file"):
        return []
    directory = Path(location.path) / "data" / "day=2026-01-01"
    directory.mkdir(parents=True, exist_ok=True)
    then = time.time() - days_old * DAY_S
    paths = []
    for n in range(3):
        path = directory / f"00000-{n}-dead-writer.parquet"
        path.write_bytes(b"the start of a file a killed writer never finished")
        os.utime(path, (then, then))
        paths.append(str(path))
    return paths


class DemoTable(NamedTuple):
    table: Any
    #: A dead writer's files under the table (none on an object store).
    orphans: list[str]
    #: How the history was made, for the demo's output.
    history: str


def build_demo_table(catalog: Any, identifier: str = DEMO_TABLE, *, days: int = 4, commits_per_day: int = 40,
                     rows_per_commit: int = 40) -> DemoTable:
    """The demo table (made again if it exists): small commits, part of them past the table's
    retention, and a dead writer's files.

    The commits are dated 7 to 3 days ago, so Iceberg's default retention (5 days) expires the
    older half. A REST catalog refuses a commit dated before the table's last update (Iceberg's
    own check, made by the server), so there the commits keep the real time and the table's owner
    keeps the last half of them (``history.expire.*`` properties)."""
    from pyiceberg.catalog.rest import RestCatalog

    commits = days * commits_per_day
    if isinstance(catalog, RestCatalog):
        properties = {"history.expire.min-snapshots-to-keep": str(commits // 2),
                      "history.expire.max-snapshot-age-ms": "1000"}
        table = create_events_table(catalog, identifier, days=days, commits_per_day=commits_per_day,
                                    rows_per_commit=rows_per_commit, properties=properties)
        history = f"{commits} small commits; the table keeps its last {commits // 2} (history.expire.* properties)"
    else:
        with snapshot_clock(time.time() - 7 * DAY_S, 4 * DAY_S / commits):
            table = create_events_table(catalog, identifier, days=days, commits_per_day=commits_per_day,
                                        rows_per_commit=rows_per_commit)
        history = f"{commits} small commits dated 7 to 3 days ago"
    return DemoTable(table, dead_writer_files(table, days_old=4), history)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m airflow_lake_provider.demo", description=__doc__.split("\n")[0])
    parser.add_argument("--table", default=DEMO_TABLE, help=f"namespace.table (default {DEMO_TABLE})")
    parser.add_argument("--lake-conn-id", default="lake_default",
                        help="the lake connection (default lake_default; without it, the embedded lake)")
    args = parser.parse_args(argv)
    from airflow_lake_provider.hooks.lake import IcebergLakeHook

    hook = IcebergLakeHook(args.lake_conn_id)
    table, orphans, history = build_demo_table(hook.catalog, args.table)
    print(f"{args.table}: {history}, {len(list(table.scan().plan_files()))} small data files, at {table.location()}"
          + (f"; {len(orphans)} files of a dead writer under it" if orphans else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
