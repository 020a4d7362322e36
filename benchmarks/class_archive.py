"""The class archive: the rewrite task and a one-statement job, each with and without it, in one run.

Each pair runs the same task on its own registered copy of one small table (200 files, 4 partitions),
once with the driver mapping the class archive (``airflow_lake_provider/class_archive.py``) and once
without, alternating which goes first; the faster of each side counts. Everything else (the jar
cache, the JVM flags, the table) is the same.
"""

from __future__ import annotations

import argparse
import time

from common import context, lake_hook, markdown_table, private_lake, write_section
from rewrite import build


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=3)
    args = parser.parse_args()

    from airflow_lake_provider import class_archive
    from airflow_lake_provider.hooks.spark_job import LakeSparkJobHook
    from airflow_lake_provider.core.contracts import SqlJobArgs
    from airflow_lake_provider.operators.rewrite import IcebergRewriteDataFilesOperator

    archive = class_archive.archive_for_driver()
    if archive is None:
        raise SystemExit("No class archive for this Spark and Java: python -m airflow_lake_provider.class_archive build")
    built = class_archive.archive_for_driver

    def without_archive():
        return None

    copies = tuple(f"copy{i}" for i in range(2 * args.pairs))
    timings: dict[str, dict[bool, list[float]]] = {"rewrite task": {True: [], False: []},
                                                   "one-statement job": {True: [], False: []}}
    with private_lake("class-archive"):
        hook = lake_hook()
        build(hook, 200, name="small", copies=copies)
        for pair in range(args.pairs):
            order = (True, False) if pair % 2 == 0 else (False, True)
            for position, with_archive in enumerate(order):
                class_archive.archive_for_driver = built if with_archive else without_archive
                try:
                    copy = copies[2 * pair + position]
                    started = time.perf_counter()
                    result = IcebergRewriteDataFilesOperator(task_id="rewrite", table=f"bench.{copy}").execute(
                        context("rewrite"))
                    timings["rewrite task"][with_archive].append(time.perf_counter() - started)
                    assert result["rewritten_data_files"] == 200, result
                    started = time.perf_counter()
                    LakeSparkJobHook(lake_hook=hook).run(SqlJobArgs(statements=[f"SELECT count(*) FROM bench.{copy}"]))
                    timings["one-statement job"][with_archive].append(time.perf_counter() - started)
                finally:
                    class_archive.archive_for_driver = built
                print({work: {side: [round(t, 2) for t in runs] for side, runs in by_side.items()}
                       for work, by_side in timings.items()})

    rows, ratios = [], []
    for work, by_side in timings.items():
        on, off = min(by_side[True]), min(by_side[False])
        ratios.append(on / off)
        rows.append([work, f"{off:.2f}", f"{on:.2f}", f"**{on / off:.2f}**"])
    write_section("class-archive", "Job start with and without the class archive", "python benchmarks/class_archive.py",
                  f"""
The rewrite task (`IcebergRewriteDataFilesOperator.execute`, spark-submit included) on 200 small files
in 4 partitions, and a job of one `SELECT count(*)`, each run {args.pairs} times with the driver mapping
the class archive and {args.pairs} times without (alternating which goes first, each on its own copy of
the table); the fastest of each side counts. The archive ({archive.stat().st_size / 1e6:.0f} MB) was
recorded by `python -m airflow_lake_provider.class_archive build`.

{markdown_table(["work", "without s", "with s", "with / without"], rows)}

**Reading.** What the archive takes away is the driver's class loading, parsing and verification of
Spark's, Scala's and Iceberg's classes, the same on every job whatever the table; what is left is the
JVM's own start, Spark's start-up work, the Python driver and the job itself.
""", target={"goal": "class archive: a job's start shorter (with / without < 1)",
             "measured": " / ".join(f"{r:.2f} x" for r in ratios), "met": all(r < 1 for r in ratios)})


if __name__ == "__main__":
    main()
