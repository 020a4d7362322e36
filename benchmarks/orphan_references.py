"""What the never-orphan check (``jobs/references.never_orphans``) adds to a clean with candidates.

Builds a catalog of ``TABLES`` small tables (one namespace each, a few commits each) in a
temporary embedded lake, and times, in one local Spark session, the check for a handful of
candidates of one table: its own metadata and statistics (driver only), then every other
table's metadata (loaded one by one) and ``all_files``/``all_manifests`` (one Spark job).
Only printed (not part of ``make bench``). Run: ``.venv/bin/python benchmarks/orphan_references.py``.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))

from common import lake_hook, private_lake  # noqa: E402

TABLES = 20
REPEATS = 5


def main() -> None:
    with private_lake("refs") as root:
        from demo_data import create_events_table

        from airflow_lake_provider.jobs import iceberg, references
        from airflow_lake_provider.jobs.session import local_session

        hook = lake_hook()
        names = [f"bench_{i:02d}.events" for i in range(TABLES)]
        for name in names:
            create_events_table(hook.catalog, name, days=2, commits_per_day=3, rows_per_commit=10)
        spark = local_session(hook.spark_catalog_conf(), jars=hook.spark_classpath().jars, packages=hook.spark_classpath().packages, warehouse_dir=str(root / "wh"))
        jtable = iceberg.load_table(spark, "lake", names[0])
        location = str(jtable.location())
        candidates = [f"{location}/data/day=2026-01-01/orphan-{i}.parquet" for i in range(5)]
        figures = []
        for _ in range(REPEATS + 1):  # the first warms the JVM up and is left out
            started = time.perf_counter()
            kept = references.never_orphans(spark, "lake", jtable, candidates)
            figures.append(time.perf_counter() - started)
        assert kept == {}, kept
        spark.stop()
    print(f"never_orphans, {len(candidates)} candidates, {TABLES} tables of 6 commits: "
          f"first {figures[0]:.2f} s, then median {statistics.median(figures[1:]):.2f} s "
          f"(min {min(figures[1:]):.2f}, max {max(figures[1:]):.2f}) over {REPEATS} runs")


if __name__ == "__main__":
    main()
