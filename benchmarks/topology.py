"""The production topology: the rewrite on S3 against a plain copy on the same store, and
planning through the REST catalog against the SQL catalog.

Everything runs against a SeaweedFS started on 127.0.0.1 for the run (S3 and its Iceberg REST
catalog; the same server the tests start, ``tests/seaweedfs_server.py``).

1. **Rewrite on S3 vs a plain copy on S3**: a table of N small files (``--quick``: fewer) on
   ``s3://`` behind a SQL catalog. Inside one spark-submit each: ``CALL rewrite_data_files``
   on a registered copy, and a Spark ``read.parquet(...).coalesce(k).write.parquet`` of the
   same objects to another S3 prefix. Then the provider's rewrite task
   (``IcebergRewriteDataFilesOperator.execute``, spark-submit included) against a raw
   spark-submit of the procedure. Beside them, the physical limit on S3: an Arrow copy of the same
   objects, the procedure warm (the second of two tables in one application), and the Arrow
   rewriter (the task's ``rewriter='auto'`` path on S3) cold and warm in one application.
2. **Planning, REST vs SQL**: the same files written through each catalog; PyIceberg
   ``plan_files()`` (what the plan task runs in the Airflow worker), median of 5 warm runs,
   and the plan operator end to end.

Run: ``python benchmarks/topology.py [--quick]`` (about 6 minutes on 2 cores; ``--quick`` 2).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

from common import (arrow_copy, context, markdown_table, private_lake, raw_spark_submit, rewrite_task_vs_raw, timed,
                    write_section)

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from seaweedfs_server import SeaweedFS  # noqa: E402

PARTITIONS = 4


def use_connection(conn: dict) -> None:
    """Point ``lake_default`` at ``conn`` for this process and the jobs it starts."""
    os.environ["AIRFLOW_CONN_LAKE_DEFAULT"] = json.dumps(conn)


def hook():
    from airflow_lake_provider.hooks.lake import IcebergLakeHook

    return IcebergLakeHook()


def write_small_files(lake, table: str, files: int) -> None:
    """One Spark job: ``files`` small files in PARTITIONS partitions."""
    from airflow_lake_provider.hooks.spark_job import LakeSparkJobHook
    from airflow_lake_provider.core.contracts import SqlJobArgs

    namespace = table.split(".")[0]
    lake.catalog.create_namespace_if_not_exists(namespace)
    rows = files * 500
    LakeSparkJobHook(lake_hook=lake).run(SqlJobArgs(statements=[
        f"CREATE TABLE {table} (id BIGINT, part INT, amount DOUBLE, payload STRING) USING iceberg "
        "PARTITIONED BY (part) TBLPROPERTIES ('format-version'='2', 'write.distribution-mode'='none', "
        "'write.spark.fanout.enabled'='true')",
        f"INSERT INTO {table} SELECT /*+ REPARTITION({files // PARTITIONS}) */ id, CAST(id % {PARTITIONS} AS INT), "
        f"(id * 37 % 1000) / 10.0, sha1(CAST(id AS STRING)) FROM range({rows})",
    ]))


def data_files(table) -> list[tuple[str, int]]:
    return [(t.file.file_path, t.file.file_size_in_bytes) for t in table.scan().plan_files()]


def plan_seconds(lake, table: str, repeat: int = 5) -> tuple[float, int]:
    """Median warm ``plan_files()`` through a catalog (the table loaded anew each time, as a task does)."""
    seconds, count = [], 0
    for _ in range(repeat + 1):
        started = time.perf_counter()
        count = len(list(lake.catalog.load_table(table).scan().plan_files()))
        seconds.append(time.perf_counter() - started)
    return statistics.median(seconds[1:]), count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="200 files instead of 2,000")
    args = parser.parse_args()
    n_files = 200 if args.quick else 2000

    from airflow_lake_provider.operators.plan import IcebergRewritePlanOperator

    with private_lake("topology") as root:
        server = SeaweedFS.launch(root / "weed")
        try:
            # -- 1. the rewrite on S3 ---------------------------------------------------------
            use_connection(server.sql_connection(f"sqlite:///{root}/catalog.db", "bench"))
            lake = hook()
            write_small_files(lake, "bench.small", n_files)
            metadata = lake.load_table("bench.small").metadata_location
            for copy in ("small_raw", "small_raw2", "small_plan", "small_warm1", "small_warm2", "small_arrow1",
                         "small_arrow2", "small_arrow3"):
                lake.catalog.register_table(f"bench.{copy}", metadata)
            before = data_files(lake.load_table("bench.small"))
            mb = sum(size for _, size in before) / 1e6
            print(f"S3: {len(before)} files, {mb:.1f} MB")

            plan = IcebergRewritePlanOperator(task_id="plan", table="bench.small", engine="pyiceberg").execute(
                context("plan"))
            op_wall, result, raw_wall, raw, jvm_count = rewrite_task_vs_raw(
                "bench.small", plan, ("bench.small_raw", "bench.small_raw2"))
            after_files = len(data_files(lake.load_table("bench.small")))
            assert result["rewritten_data_files"] == len(before)
            codec = lake.load_table("bench.small").properties.get("write.parquet.compression-codec", "zstd")
            _, copy = raw_spark_submit("copy", "s3a://warehouse/bench-copy", str(after_files), codec, "1",
                                       *[path.replace("s3://", "s3a://", 1) for path, _ in before])
            arrow_s = min(arrow_copy([path for path, _ in before], f"s3://warehouse/bench-arrow-{run}", codec,
                                     filesystem=server.filesystem()) for run in range(3))
            _, warm = raw_spark_submit("procedure", json.dumps(plan["options"]), "bench.small_warm1",
                                       "bench.small_warm2")
            _, by_arrow = raw_spark_submit("arrow", json.dumps(plan["options"]),
                                           *[f"bench.small_arrow{n}" for n in range(1, 4)])
            assert [r["rewritten_data_files"] for r in by_arrow["results"]] == [len(before)] * 3, by_arrow
            print(f"rewrite: operator {op_wall:.1f} s, raw {raw_wall:.1f} s; in the JVM: procedure "
                  f"{raw['seconds']:.1f} s (warm {warm['per_table'][1]:.1f} s), copy {copy['seconds']:.1f} s; "
                  f"Arrow copy {arrow_s:.2f} s")

            # -- 2. planning, REST vs SQL ----------------------------------------------------
            sql_plan_s, sql_count = plan_seconds(lake, "bench.small_plan")  # untouched: n_files
            sql_op_s, _ = timed(IcebergRewritePlanOperator(task_id="plan", table="bench.small_plan",
                                                           engine="pyiceberg").execute, context("plan"))
            use_connection(server.rest_connection())
            rest = hook()
            write_small_files(rest, "bench.small", n_files)
            rest_plan_s, rest_count = plan_seconds(rest, "bench.small")
            rest_op_s, _ = timed(IcebergRewritePlanOperator(task_id="plan", table="bench.small",
                                                            engine="pyiceberg").execute, context("plan"))
            print(f"planning {sql_count}/{rest_count} files: SQL {sql_plan_s:.2f} s, REST {rest_plan_s:.2f} s; "
                  f"operator SQL {sql_op_s:.2f} s, REST {rest_op_s:.2f} s")
        finally:
            server.stop()

    command = "python benchmarks/topology.py" + (" --quick" if args.quick else "")
    proc_rate, copy_rate = mb / raw["seconds"], mb / copy["seconds"]
    limit_s, warm_s = min(arrow_s, copy["seconds"]), warm["per_table"][1]
    arrow_cold_s, arrow_warm_s = by_arrow["per_table"][0], min(by_arrow["per_table"][1:])
    fastest_warm = min(warm_s, arrow_warm_s)
    ratio = proc_rate / copy_rate
    write_section("s3-rewrite", "Rewrite on S3 vs a plain copy on S3", command, f"""
{len(before):,} files ({mb:.1f} MB) in {PARTITIONS} partitions on `s3://` (SeaweedFS on 127.0.0.1, S3A,
HadoopFileIO, SQL catalog), rewritten into {after_files}. Seconds inside the application (JVM start left out).

{markdown_table(["work", "s in the JVM", "MB/s"], [
    ["`rewrite_data_files` (raw procedure)", f"{raw['seconds']:.1f}", f"{proc_rate:.2f}"],
    [f"Spark `read.parquet(...).coalesce({after_files}).write.parquet` to another S3 prefix",
     f"{copy['seconds']:.1f}", f"{copy_rate:.2f}"],
    ["ratio rewrite / copy throughput", f"**{ratio:.2f}**", ""],
])}

End to end, spark-submit included:

{markdown_table(["run", "wall s", "JVMs"], [
    ["the provider's rewrite task", f"{op_wall:.1f}", jvm_count],
    ["raw spark-submit of `CALL rewrite_data_files` (faster of two)", f"{raw_wall:.1f}", 1],
    ["ratio task / raw", f"**{op_wall / raw_wall:.2f}**", ""],
])}

**Reading.** On S3 both sides pay one request per object read and per object written, and the
S3A output committer's renames (copies on S3); the rewrite also writes manifests and commits.
A ratio near 1 means the rewrite runs at the store's copy speed.

**Against the physical limit on S3**, beside the local one ("Rewrite vs the physical limit"): the fastest
plain copy of the same objects into {after_files} objects on the same store, Arrow (its S3 file system, read
with threads, one object per partition written in parallel, fastest of 3) or Spark's copy above. The
Arrow rewriter reads and writes through pyarrow's S3 file system, set up from the table's own FileIO
settings; the rewrite task took the {result["rewriter"]} rewriter here.

{markdown_table(["work", "s", "x the limit"], [
    ["Arrow copy on S3 (fastest of 3)", f"{arrow_s:.2f}", f"{arrow_s / limit_s:.2f}"],
    ["Spark copy on S3 (the JVM's first)", f"{copy['seconds']:.2f}", f"{copy['seconds'] / limit_s:.2f}"],
    ["`rewrite_data_files`, warm JVM (second of two tables)", f"{warm_s:.2f}", f"**{warm_s / limit_s:.2f}**"],
    ["`rewrite_data_files`, the JVM's first (cold)", f"{raw['per_table'][0]:.2f}",
     f"{raw['per_table'][0] / limit_s:.2f}"],
    ["Arrow rewriter, warm JVM (fastest of two)", f"{arrow_warm_s:.2f}", f"**{arrow_warm_s / limit_s:.2f}**"],
    ["Arrow rewriter, the JVM's first (cold)", f"{arrow_cold_s:.2f}", f"{arrow_cold_s / limit_s:.2f}"],
    ["rewrite task, end to end (spark-submit incl.)", f"{op_wall:.2f}", f"**{op_wall / limit_s:.2f}**"],
])}
""", target=[{"goal": "rewrite on S3 >= 0.8 x plain copy on S3", "measured": f"{ratio:.2f}", "met": ratio >= 0.8},
             {"goal": f"on S3, {len(before):,} files: warm rewrite <= 2 x the fastest plain copy on S3; "
                      "end to end <= 6 x",
              "measured": f"warm {fastest_warm / limit_s:.2f} x, end to end {op_wall / limit_s:.1f} x",
              "met": fastest_warm / limit_s <= 2 and op_wall / limit_s <= 6}])
    plan_ratio = rest_plan_s / sql_plan_s
    write_section("rest-planning", "Planning through the REST catalog vs the SQL catalog", command, f"""
The same layout ({sql_count:,} data files on S3) written through each catalog. `plan_files()` is what the plan
task runs in the Airflow worker (load the table through the catalog, read the manifests from S3);
median of 5 warm runs. The plan operator end to end (one run) adds the health figures and the plan.

{markdown_table(["catalog", "plan_files() s", "plan operator s"], [
    ["SQL (SQLite) + S3", f"{sql_plan_s:.2f}", f"{sql_op_s:.2f}"],
    ["REST (SeaweedFS, OAuth2) + S3", f"{rest_plan_s:.2f}", f"{rest_op_s:.2f}"],
    ["ratio REST / SQL", f"**{plan_ratio:.2f}**", f"**{rest_op_s / sql_op_s:.2f}**"],
])}

**Reading.** The catalog is asked once per plan (load the table: one HTTP round trip plus an OAuth2 token,
against one SQL query); the rest is reading manifests from the same S3, so the two converge as tables grow.
""", target={"goal": "planning through REST <= 1.5 x SQL catalog", "measured": f"{plan_ratio:.2f}",
             "met": plan_ratio <= 1.5})


if __name__ == "__main__":
    main()
