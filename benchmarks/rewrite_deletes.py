"""The rewrite of tables with deletes: the provider's Arrow rewriter against Iceberg's ``rewrite_data_files``.

Two format v2 tables of ``--files`` small files (default 400, 1,000 rows each, 4 partitions):

* **position deletes**: Spark's merge-on-read ``DELETE`` of one row in ten (a delete file per data
  file, as Spark writes them);
* **equality deletes**: ``--delete-commits`` commits (default 20) of equality delete files, one per
  partition per commit as a Flink upsert writer leaves them, deleting one key in ten.

Each table is registered four times on its metadata (identical copies). One spark-submit runs
Iceberg's ``CALL rewrite_data_files`` on four copies, another the Arrow rewriter (the path the
rewrite task's ``rewriter='auto'`` takes on these tables: Iceberg's planner and validated commit,
Arrow's Parquet with the deletes applied) on the other four, with the same options (every file
rewritten). The first run of each is the JVM's first Iceberg work (cold); warm is the fastest of the
other three. Every rewritten copy must give the rows of the table before (a count and a checksum of
every row, Spark), with no delete applying any more.

``--store s3``: the same on ``s3://`` (a SeaweedFS started on 127.0.0.1 for the run, a SQL catalog,
S3A; the Arrow rewriter reads and writes through pyarrow's S3 file system).

Run: ``python benchmarks/rewrite_deletes.py [--files N] [--store s3]`` (about 5 minutes on 2 cores locally).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from common import REPO, lake_hook, markdown_table, private_lake, raw_spark_submit, write_section

sys.path.insert(0, str(REPO / "tests"))  # the tests' Flink-style equality delete writer

PARTITIONS = 4
COPIES = 4
OPTIONS = {"rewrite-all": "true", "use-starting-sequence-number": "false", "partial-progress.enabled": "false"}
CHECKSUM = "SELECT count(*) AS n, sum(hash(id, part, amount, payload)) AS checksum FROM lake.bench.{}"


def build(spark, hook, name: str, files: int, deletes: str, delete_commits: int) -> None:
    """``bench.NAME``: ``files`` files of 1,000 rows, then its deletes (``position`` or ``equality``)."""
    from equality_deletes import commit_equality_deletes

    rows = files * 1000
    spark.sql(
        f"CREATE TABLE lake.bench.{name} (id BIGINT, part INT, amount DOUBLE, payload STRING) USING iceberg "
        "PARTITIONED BY (part) TBLPROPERTIES ('format-version'='2', 'write.distribution-mode'='none', "
        "'write.spark.fanout.enabled'='true', 'write.delete.mode'='merge-on-read')")
    spark.sql(f"INSERT INTO lake.bench.{name} SELECT /*+ REPARTITION({files // PARTITIONS}) */ id, "
              f"CAST(id % {PARTITIONS} AS INT), (id * 37 % 1000) / 10.0, sha1(CAST(id AS STRING)) FROM range({rows})")
    if deletes == "position":
        spark.sql(f"DELETE FROM lake.bench.{name} WHERE id % 10 = 3")
        return
    table = hook.load_table(f"bench.{name}")
    keys = [k for k in range(rows) if k % 10 == 3]
    per_commit = -(-len(keys) // delete_commits)
    for commit in range(delete_commits):
        chunk = keys[commit * per_commit:(commit + 1) * per_commit]
        for part in range(PARTITIONS):
            in_part = [{"id": k} for k in chunk if k % PARTITIONS == part]
            if in_part:
                commit_equality_deletes(spark, f"bench.{name}", in_part, partition_path=f"part={part}",
                                        pyiceberg_table=table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=400)
    parser.add_argument("--delete-commits", type=int, default=20)
    parser.add_argument("--store", choices=("local", "s3"), default="local")
    parser.add_argument("--no-doc", action="store_true", help="print only; do not write docs/benchmarks.md")
    args = parser.parse_args()
    on_s3 = args.store == "s3"
    measured = {}
    with private_lake("deletes") as root:
        server = None
        if on_s3:
            from seaweedfs_server import SeaweedFS

            server = SeaweedFS.launch(root / "weed")
            os.environ["AIRFLOW_CONN_LAKE_DEFAULT"] = json.dumps(
                server.sql_connection(f"sqlite:///{root}/catalog.db", "bench"))
        try:
            measured, truth, shape = measure(root, args)
        finally:
            if server is not None:
                server.stop()
    report(args, on_s3, measured, truth, shape)


def measure(root, args) -> tuple[dict, dict, dict]:
    """Build both tables, rewrite their copies each way, check every copy: (seconds, checksums, file counts)."""
    from airflow_lake_provider.jobs.session import local_session

    measured: dict = {}
    hook = lake_hook()
    hook.catalog.create_namespace_if_not_exists("bench")
    classpath = hook.spark_classpath()
    spark = local_session(hook.spark_catalog_conf(), jars=classpath.jars, packages=classpath.packages,
                          warehouse_dir=str(root / "wh"))
    truth, shape = {}, {}
    try:
        for kind in ("position", "equality"):
            build(spark, hook, kind, args.files, kind, args.delete_commits)
            truth[kind] = spark.sql(CHECKSUM.format(kind)).first().asDict()
            shape[kind] = {r["content"]: r["n"] for r in spark.sql(
                f"SELECT content, count(*) AS n FROM lake.bench.{kind}.files GROUP BY content").collect()}
    finally:
        spark.stop()
    for kind in ("position", "equality"):
        metadata = hook.load_table(f"bench.{kind}").metadata_location
        copies = {side: [f"{kind}_{side}{n}" for n in range(COPIES)] for side in ("iceberg", "arrow")}
        for names in copies.values():
            for copy in names:
                hook.catalog.register_table(f"bench.{copy}", metadata)
        _, iceberg_run = raw_spark_submit("procedure", json.dumps(OPTIONS), *[f"bench.{c}" for c in copies["iceberg"]])
        _, arrow_run = raw_spark_submit("arrow", json.dumps(OPTIONS), *[f"bench.{c}" for c in copies["arrow"]])
        every = copies["iceberg"] + copies["arrow"]
        _, checked = raw_spark_submit("sql", *[CHECKSUM.format(c) for c in every])
        for copy, row in zip(every, checked["rows"], strict=True):
            assert row == truth[kind], (copy, row, truth[kind])
        for copy in every:
            summary = hook.load_table(f"bench.{copy}").current_snapshot().summary
            assert summary.operation.value == "replace", (copy, summary)
        measured[kind] = {"iceberg": iceberg_run["per_table"], "arrow": arrow_run["per_table"]}
        print(kind, json.dumps(measured[kind]), flush=True)
    return measured, truth, shape


def report(args, on_s3: bool, measured: dict, truth: dict, shape: dict) -> None:
    rows, ratios = [], {}
    for kind in ("position", "equality"):
        iceberg_s, arrow_s = measured[kind]["iceberg"], measured[kind]["arrow"]
        warm = min(iceberg_s[1:]) / min(arrow_s[1:])
        ratios[kind] = warm
        data_files, delete_files = shape[kind].get(0, 0), shape[kind].get(1, 0) + shape[kind].get(2, 0)
        rows.append([f"{kind} deletes", f"{data_files:,} / {delete_files:,}", f"{truth[kind]['n']:,}",
                     f"{min(iceberg_s[1:]):.2f}", f"{min(arrow_s[1:]):.2f}", f"**{warm:.2f}x**",
                     f"{iceberg_s[0]:.2f}", f"{arrow_s[0]:.2f}", f"{iceberg_s[0] / arrow_s[0]:.2f}x"])
    where = "on `s3://` (SeaweedFS on 127.0.0.1, SQL catalog, S3A)" if on_s3 else "on the local disk"
    s3_note = ("; on S3 both also pay a request per object read and written, Iceberg through S3A, Arrow through "
               "pyarrow's S3 file system set up from the table's FileIO") if on_s3 else ""
    body = f"""
Two format v2 tables {where} of {args.files:,} files of 1,000 rows in {PARTITIONS} partitions, one with Spark's position
deletes (one row in ten), one with equality deletes ({args.delete_commits} commits, one file per partition each,
one key in ten), every file rewritten (`{json.dumps(OPTIONS)}`). Iceberg's `CALL rewrite_data_files` and the
provider's Arrow rewriter (`rewriter='auto'` takes it on these tables), each in its own spark-submit on
{COPIES} registered copies of the same table: cold is the JVM's first rewrite, warm the fastest of the other
three. Every copy gives the rows of the table before (count and checksum through Spark).

{markdown_table(["table", "data / delete files", "rows", "Iceberg warm s", "Arrow warm s", "faster (warm)",
                 "Iceberg cold s", "Arrow cold s", "faster (cold)"], rows)}

**Reading.** Both apply the same deletes to the same files: Iceberg's Spark reader builds a delete
index per file and filters rows on Spark's row path before its row writer; the Arrow rewriter reads
each delete file once per group, takes the positions of each data file (position deletes) or a hash
semi-join on the key columns, NULL and NaN compared as Iceberg does (equality deletes), and writes
columns. Bounded by Parquet decoding and encoding on the 2 cores, as the plain rewrite is{s3_note}.
"""
    print(body)
    if not args.no_doc:
        suffix = " --store s3" if on_s3 else ""
        write_section("rewrite_deletes" + suffix.replace(" --store ", "_"),
                      "Rewrite of tables with deletes vs Iceberg's action" + (" on S3" if on_s3 else ""),
                      "python benchmarks/rewrite_deletes.py" + suffix, body,
                      target={"goal": f"rewrite of a table with position / equality deletes{' on S3' if on_s3 else ''} "
                                      ">= 2x faster than Iceberg's `rewrite_data_files` (warm, same cores, same rows)",
                              "measured": f"{ratios['position']:.2f}x / {ratios['equality']:.2f}x",
                              "met": all(r >= 2 for r in ratios.values())})


if __name__ == "__main__":
    main()
