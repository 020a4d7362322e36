"""The deletion-vector check in a driver without Spark: Avro's JSON of each delete manifest against Iceberg's
reader one delete file at a time.

Before and after every rewrite of a format v3 table the job checks for data files with two deletion vectors
and for DVs of data files that are not live (``jobs/deletion_vectors._in_driver``). The Arrow rewriter's
driver starts no Spark application, so the check reads Iceberg's manifests through py4j. Iceberg's
``ManifestReader`` hands out one ``DeleteFile`` at a time, and reading the five values the check needs costs
seven round trips per DV; the check now reads each delete manifest in one round trip (Avro's generic reader
over the file, every entry's JSON joined in the JVM: ``jobs/iceberg.delete_file_records``).

A v3 table of ``--files`` data files (default 20,000) with a merge-on-read ``DELETE`` touching every file:
one DV each. Both readings are timed in one Spark session on the same snapshot, each the fastest of
``--repeats`` runs after one warm-up, and must find the same DVs.

Run: ``python benchmarks/dv_check.py [--files N]`` (about 3 minutes on 2 cores).
"""

from __future__ import annotations

import argparse

from common import lake_hook, markdown_table, private_lake, timed, write_section


def build(spark, files: int) -> None:
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.bench")
    spark.sql("CREATE TABLE lake.bench.dvs (id BIGINT, payload STRING) USING iceberg TBLPROPERTIES "
              "('format-version'='3', 'write.delete.mode'='merge-on-read', 'write.distribution-mode'='none')")
    spark.range(0, files * 20, 1, files).selectExpr("id", "concat('row-', id) AS payload") \
        .writeTo("lake.bench.dvs").append()
    spark.sql("DELETE FROM lake.bench.dvs WHERE id % 20 = 0")  # one row of every file: a DV each


def fastest(repeats: int, fn, *args):
    fn(*args)  # warm-up
    runs = [timed(fn, *args) for _ in range(repeats)]
    return min(seconds for seconds, _ in runs), runs[0][1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-doc", action="store_true", help="print only; do not write docs/benchmarks.md")
    args = parser.parse_args()
    with private_lake("dvcheck") as root:
        from airflow_lake_provider.jobs import iceberg
        from airflow_lake_provider.jobs.deletion_vectors import _in_driver
        from airflow_lake_provider.jobs.session import local_session

        hook = lake_hook()
        hook.catalog  # creates the catalog tables Spark expects
        classpath = hook.spark_classpath()
        spark = local_session(hook.spark_catalog_conf(), jars=classpath.jars, packages=classpath.packages,
                              warehouse_dir=str(root / "wh"))
        try:
            build(spark, args.files)
            jtable = iceberg.load_table(spark, "lake", "bench.dvs")
            snapshot = int(jtable.currentSnapshot().snapshotId())
            dvs = spark.sql("SELECT count(*) FROM lake.bench.dvs.delete_files WHERE file_format = 'PUFFIN'").first()[0]
            java_snapshot = jtable.snapshot(snapshot)
            avro_s, by_avro = fastest(args.repeats, _in_driver, jtable, snapshot)
            avro_read_s, _ = fastest(args.repeats, iceberg.delete_file_records, jtable, java_snapshot)
            original = iceberg._delete_manifest_texts
            iceberg._delete_manifest_texts = lambda *_: None  # Iceberg's reader, one DeleteFile at a time
            try:
                each_s, one_by_one = fastest(args.repeats, _in_driver, jtable, snapshot)
                each_read_s, _ = fastest(args.repeats, iceberg.delete_file_records, jtable, java_snapshot)
            finally:
                iceberg._delete_manifest_texts = original
        finally:
            spark.stop()
    assert by_avro == one_by_one and not by_avro.breaks_reads, (by_avro, one_by_one)
    ratio = each_s / avro_s
    print(f"{dvs} DVs: one by one {each_s:.2f} s, Avro's JSON {avro_s:.2f} s, {ratio:.1f}x; reading the DVs alone "
          f"{each_read_s:.2f} s vs {avro_read_s:.2f} s", flush=True)
    body = f"""
A v3 table of {args.files:,} data files, each with one deletion vector ({dvs:,} DVs), checked in the driver
without Spark (`jobs/deletion_vectors._in_driver`, run before and after every rewrite of a v3 table); each
reading the fastest of {args.repeats} after a warm-up, in one Spark session; both found the same DVs.

{markdown_table(["", "one `DeleteFile` at a time (s)", "Avro's JSON per manifest (s)", "ratio"], [
        ["reading the DVs (`delete_file_records`)", f"{each_read_s:.2f}", f"{avro_read_s:.2f}",
         f"**{each_read_s / avro_read_s:.1f}x**"],
        ["the whole check (`_in_driver`)", f"{each_s:.2f}", f"{avro_s:.2f}", f"**{ratio:.1f}x**"]])}

**Reading.** One at a time, the check is bound by py4j round trips (each a socket exchange with the JVM);
read whole, by decoding the manifests' Avro and Python's JSON parsing of the entries. The check also
reads the data manifests' live paths (batched already, the same in both columns): what is left of the
whole check.
"""
    if not args.no_doc:
        write_section("dv_check", "The deletion-vector check in the driver", "python benchmarks/dv_check.py", body,
                      target={"goal": "the v3 DV check without a round trip per DV: faster than one at a time",
                              "measured": f"{dvs:,} DVs: reading {each_read_s / avro_read_s:.1f}x, whole check {ratio:.1f}x",
                              "met": ratio > 1.0})


if __name__ == "__main__":
    main()
