"""Reads before and after converting equality deletes into position deletes, and the conversion's cost.

A table shaped like a Flink upsert pipeline's: ``--rows`` rows (default 200,000) in 40 data files
over 4 days, then ``--delete-commits`` commits (default 30) of equality delete files, each
deleting ``--keys-per-commit`` keys (default 100: 3,000 keys in all) spread over every day, as a
streaming writer leaves them. One in-process Spark session does everything, so each figure is
a warm read: the same queries (a full read with a row checksum; a narrow read of one column
for one category) are run once to warm up, then ``--repeats`` times (median), before the
conversion and after it, on the same table; the ratios are measured side by side in this run,
and every query must return the same result after as before. The conversion (the ``convert_equality_deletes`` job,
run in-process) is timed too, and so is a PyIceberg read after it (PyIceberg cannot read the
table before: it does not apply equality deletes).

Run: ``python benchmarks/convert_equality_deletes.py`` (about 2-4 minutes on 2 shared cores).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from common import REPO, lake_hook, markdown_table, private_lake, timed, write_section

sys.path.insert(0, str(REPO / "tests"))  # the tests' Flink-style equality delete writer

DAYS = 4
# A count and a row-level checksum (exact: a sum of 32-bit hashes), so "same rows" is checked too.
QUERIES = {
    "full read (count + row checksum)":
        "SELECT count(*) AS n, sum(hash(event_id, day, category, amount, payload)) AS checksum FROM lake.bench.upserts",
    # One narrow column: equality deletes make Iceberg read the key column of every row too.
    "narrow read (sum of one column for one category)":
        "SELECT count(*) AS n, sum(CAST(amount * 10 AS BIGINT)) AS a FROM lake.bench.upserts WHERE category = 'a'",
}


def build(spark, hook, rows: int, delete_commits: int, keys_per_commit: int) -> None:
    from equality_deletes import commit_equality_deletes

    hook.catalog.create_namespace_if_not_exists("bench")
    spark.sql(
        "CREATE TABLE lake.bench.upserts (event_id BIGINT, day DATE, category STRING, amount DOUBLE, payload STRING) "
        "USING iceberg PARTITIONED BY (day) TBLPROPERTIES ('format-version'='2', 'write.distribution-mode'='none')")
    spark.sql(
        f"INSERT INTO lake.bench.upserts SELECT /*+ REPARTITION(10) */ id, date_add(DATE '2026-01-01', CAST(id % {DAYS} AS INT)), "
        f"element_at(array('a', 'b', 'c'), CAST(id % 3 AS INT) + 1), (id * 37 % 1000) / 10.0, sha1(CAST(id AS STRING)) "
        f"FROM range({rows})")
    table = hook.load_table("bench.upserts")
    step = max(1, rows // (delete_commits * keys_per_commit)) | 1  # odd: the keys cycle through every day
    key = 0
    for _ in range(delete_commits):
        for day in range(DAYS):  # one equality delete file per day touched, as Flink writes them
            keys = [{"event_id": k} for k in range(key, key + keys_per_commit * step, step) if k % DAYS == day]
            if keys:
                commit_equality_deletes(spark, "bench.upserts", keys, partition_path=f"day=2026-01-0{day + 1}",
                                        pyiceberg_table=table)
        key += keys_per_commit * step


def warm_read(spark, query: str, repeats: int) -> tuple[float, tuple]:
    result = tuple(spark.sql(query).collect()[0])  # warm-up run
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        assert tuple(spark.sql(query).collect()[0]) == result
        times.append(time.perf_counter() - started)
    return statistics.median(times), result


def warm_reads(spark, repeats: int) -> dict[str, tuple[float, tuple]]:
    return {label: warm_read(spark, query, repeats) for label, query in QUERIES.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--delete-commits", type=int, default=30)
    parser.add_argument("--keys-per-commit", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-doc", action="store_true", help="print only; do not write docs/benchmarks.md")
    args = parser.parse_args()
    with private_lake("convert") as root:
        from airflow_lake_provider.jobs import convert_equality_deletes as convert_job
        from airflow_lake_provider.jobs.session import local_session

        hook = lake_hook()
        hook.catalog  # creates the catalog tables Spark expects
        spark = local_session(hook.spark_catalog_conf(), jars=hook.spark_classpath().jars, packages=hook.spark_classpath().packages, warehouse_dir=str(root / "wh"))
        try:
            build(spark, hook, args.rows, args.delete_commits, args.keys_per_commit)
            files_before = {r["content"]: r["n"] for r in spark.sql(
                "SELECT content, count(*) AS n FROM lake.bench.upserts.delete_files GROUP BY content").collect()}
            before = warm_reads(spark, args.repeats)
            convert_seconds, result = timed(convert_job.run, spark, "lake", {"table": "bench.upserts"})
            print(f"before: {before}; conversion: {convert_seconds:.1f} s {result['seconds']}", flush=True)
            after = warm_reads(spark, args.repeats)
            for label, (_, rows) in before.items():
                assert after[label][1] == rows, (label, rows, after[label][1])  # the same rows
            pyiceberg_seconds, arrow = timed(lambda: hook.load_table("bench.upserts").scan().to_arrow())
            visible = before["full read (count + row checksum)"][1][0]
            assert arrow.num_rows == visible
        finally:
            spark.stop()

    ratios = {label: before[label][0] / after[label][0] for label in QUERIES}
    rows = [[f"warm Spark {label}, median of {args.repeats}", f"{before[label][0]:.3f} s", f"{after[label][0]:.3f} s",
             f"**{ratios[label]:.2f}x** faster"] for label in QUERIES]
    rows += [
        ["equality delete files / position delete files",
         f"{files_before.get(2, 0)} / {files_before.get(1, 0)}",
         f"0 / {result['added_position_delete_files']}", ""],
        ["PyIceberg full read", "cannot read (equality deletes)", f"{pyiceberg_seconds:.2f} s", ""],
    ]
    body = (
        f"A Flink-upsert-shaped v2 table: {args.rows:,} rows in 40 data files over {DAYS} days, "
        f"{result['converted_equality_delete_files']} equality delete files ({result['equality_delete_records']:,} keys, "
        f"{args.delete_commits} commits). The conversion (in-process job, one shared Spark session) took "
        f"{convert_seconds:.1f} s ({', '.join(f'{k} {v:.1f} s' for k, v in result['seconds'].items())}): "
        f"{result['affected_data_files']} data files affected, "
        f"{result['added_position_delete_files']} position delete files written, {result['deleted_rows']:,} rows "
        f"deleted; every query returned the same result before and after ({visible:,} rows).\n\n"
        + markdown_table(["", "before", "after", ""], rows)
    )
    print(body)
    if not args.no_doc:
        write_section("convert_equality_deletes", "Equality deletes converted to position deletes",
                      "python benchmarks/convert_equality_deletes.py", body,
                      target={"goal": "warm Spark reads faster after the conversion, same rows",
                              "measured": " / ".join(f"{r:.2f}x" for r in ratios.values()),
                              "met": all(r > 1.0 for r in ratios.values())})


if __name__ == "__main__":
    main()
