"""Where a warm ``rewrite_data_files`` spends its time: Java Flight Recorder on the rewrite benchmark's table.

The throughput section of ``rewrite.py`` compares the warm rewrite with the fastest plain copy of
the same bytes. This script answers what that section cannot: how the rewrite's CPU time splits.
One table of 2,000 small files in 4 partitions (as ``rewrite.py`` builds it; ``--quick``: 400),
three registered copies; one spark-submit rewrites the first copy (warm-up), the second (timed, to
show what the recording costs), then the third under
JFR's ``profile`` settings (execution samples every 10-20 ms of every running Java thread). The
samples are attributed to what the stack shows the thread was doing, innermost recognisable work
first, and the figures are written to ``docs/benchmarks.md`` (section ``rewrite-profile``).

Run: ``python benchmarks/profile_rewrite.py [--quick]`` (about 2 minutes).
"""

from __future__ import annotations

import argparse
import collections
import datetime as dt
import json
import shutil
import subprocess
import tempfile
from pathlib import Path

from common import RESULTS, lake_hook, machine, markdown_table, private_lake, raw_spark_submit, write_section
from rewrite import build, data_files, prewarm

FIGURES = RESULTS / "figures" / "rewrite-profile.json"
ROWS = "Spark rows between reader and writer (columnar to rows, row writers)"
JDK_ONLY = "JDK frames only (JFR could not walk the stack further)"
# (label, frame prefixes): a sample goes to the first label any of its frames (innermost first) matches.
CATEGORIES = (
    # Iceberg's Parquet.ReadBuilder.build copies the Hadoop Configuration for every file it opens
    # through HadoopFileIO (to unset read properties); JFR often cannot walk past the JDK's map code there.
    ("Hadoop Configuration copied per opened file", ("org.apache.hadoop.conf.Configuration.<init>",
                                                     "java.util.Properties.clone")),
    ("zstd compression (write)", ("com.github.luben.zstd.ZstdOutputStream", "com.github.luben.zstd.ZstdCompress",
                                  "org.apache.parquet.hadoop.codec.ZstdCompressor", "com.github.luben.zstd.Zstd.compress")),
    ("zstd decompression (read)", ("com.github.luben.zstd.ZstdInputStream", "com.github.luben.zstd.ZstdDecompress",
                                   "org.apache.parquet.hadoop.codec.ZstdDecompressor", "com.github.luben.zstd.Zstd.decompress")),
    ("checksums of local files (.crc)", ("org.apache.hadoop.fs.ChecksumFileSystem", "org.apache.hadoop.fs.FSInputChecker",
                                         "org.apache.hadoop.fs.FSOutputSummer", "org.apache.hadoop.util.DataChecksum",
                                         "java.util.zip.CRC32")),
    ("Parquet footer and file open", ("org.apache.parquet.hadoop.ParquetFileReader.readFooter",
                                      "org.apache.parquet.format.Util.readFileMetaData",
                                      "org.apache.parquet.hadoop.ParquetFileReader.<init>",
                                      "org.apache.parquet.hadoop.ParquetFileReader.open")),
    ("Parquet encoding (write)", ("org.apache.parquet.column.values", "org.apache.parquet.column.impl.ColumnWriter",
                                  "org.apache.iceberg.parquet.ParquetWriter", "org.apache.iceberg.parquet.ParquetValueWriters",
                                  "org.apache.parquet.hadoop.ColumnChunkPageWriteStore",
                                  "org.apache.iceberg.spark.data.SparkParquetWriters")),
    ("Parquet decoding (read, vectorised)", ("org.apache.iceberg.arrow.vectorized", "org.apache.iceberg.parquet.VectorizedParquetReader",
                                             "org.apache.parquet.column.page", "org.apache.parquet.bytes",
                                             "org.apache.iceberg.spark.data.vectorized", "org.apache.arrow")),
    ("Iceberg manifests and commit", ("org.apache.iceberg.ManifestReader", "org.apache.iceberg.ManifestWriter",
                                      "org.apache.iceberg.avro", "org.apache.iceberg.SnapshotProducer",
                                      "org.apache.iceberg.BaseRewriteFiles", "org.apache.iceberg.MergingSnapshotProducer",
                                      "org.apache.iceberg.jdbc", "org.apache.iceberg.TableMetadataParser")),
    ("Iceberg planning (scan tasks)", ("org.apache.iceberg.ManifestGroup", "org.apache.iceberg.BaseFileScanTask",
                                       "org.apache.iceberg.actions.RewriteDataFilesSparkAction",
                                       "org.apache.iceberg.spark.actions.RewriteDataFilesSparkAction",
                                       "org.apache.iceberg.util.BinPacking")),
    ("Spark scheduling, codegen, planning", ("org.apache.spark.scheduler", "org.codehaus.janino",
                                             "org.apache.spark.sql.catalyst.expressions.codegen.CodeGenerator",
                                             "org.apache.spark.sql.catalyst.analysis", "org.apache.spark.sql.catalyst.optimizer",
                                             "org.apache.spark.sql.catalyst.plans", "org.apache.spark.sql.execution.QueryExecution")),
    (ROWS, (
        "org.apache.spark.sql.catalyst", "org.apache.spark.sql.execution", "org.apache.spark.sql.vectorized",
        "org.apache.spark.unsafe", "org.apache.spark.sql.execution.datasources.v2.WritingSparkTask")),
    ("file system (open, read, write, rename)", ("org.apache.hadoop.fs", "java.io.FileInputStream", "java.io.FileOutputStream",
                                                 "sun.nio.fs", "sun.nio.ch")),
)


def _frame_name(frame: dict) -> str:
    """``package.Class.method`` with dots (JFR writes slashes) and Iceberg's shading removed."""
    name = f"{frame['method']['type']['name']}.{frame['method']['name']}".replace("/", ".")
    return name.removeprefix("org.apache.iceberg.shaded.")


def attribute(jfr_file: Path) -> tuple[collections.Counter, collections.Counter, collections.Counter, int]:
    """(samples per category, per innermost method, per thread kind, total) from the recording."""
    printed = subprocess.run(["jfr", "print", "--json", "--events", "jdk.ExecutionSample", str(jfr_file)],
                             capture_output=True, text=True, check=True).stdout
    events = json.loads(printed)["recording"]["events"]
    by_category, by_method, by_thread = collections.Counter(), collections.Counter(), collections.Counter()
    for event in events:
        frames = [_frame_name(f) for f in event["values"]["stackTrace"]["frames"]]
        thread = event["values"]["sampledThread"]["javaName"] or ""
        by_thread["task threads" if thread.startswith("Executor task launch") else thread.split("-")[0][:30]] += 1
        # The innermost frame outside the JDK: what asked for the time (a HashMap resize is someone's map).
        caller = next((f for f in frames if not f.startswith(("java.", "jdk.", "sun."))), frames[0] if frames else "?")
        inner = frames[0] if frames else "?"
        by_method[caller if caller == inner else f"{caller} -> {inner.rsplit('.', 2)[-2]}.{inner.rsplit('.', 1)[-1]}"] += 1
        label = next((name for frame in frames for name, prefixes in CATEGORIES if frame.startswith(prefixes)),
                     "other" if caller != inner else JDK_ONLY)
        by_category[label] += 1
    return by_category, by_method, by_thread, len(events)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="400 files")
    parser.add_argument("--keep", type=Path, help="copy the JFR recording here (open it with `jfr print` or JMC)")
    parser.add_argument("--render", action="store_true", help="rewrite the doc section from the last run's figures")
    args = parser.parse_args()
    if args.render:  # the section from the figures of the last run, measuring nothing
        render(json.loads(FIGURES.read_text()))
        return
    files = 400 if args.quick else 2_000
    started = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    with private_lake("rewrite-profile"), tempfile.TemporaryDirectory() as scratch:
        hook = lake_hook()
        build(hook, files, copies=("profile_warmup", "profile_unprofiled", "profile_warm"))
        prewarm([path for path, _ in data_files(hook.load_table("bench.small"))])
        from airflow_lake_provider.operators.plan import IcebergRewritePlanOperator
        from common import context

        plan = IcebergRewritePlanOperator(task_id="plan", table="bench.small", engine="pyiceberg").execute(context("plan"))
        recording = Path(scratch) / "rewrite.jfr"
        _, out = raw_spark_submit("profile", str(recording), json.dumps(plan["options"]), "bench.profile_warmup",
                                  "bench.profile_unprofiled", "bench.profile_warm")
        by_category, by_method, by_thread, total = attribute(recording)
        if args.keep:
            shutil.copyfile(recording, args.keep)
    figures = {"command": "python benchmarks/profile_rewrite.py" + (" --quick" if args.quick else ""), "files": files,
               "profiled_s": out["profiled_s"], "unprofiled_s": out["unprofiled_s"], "samples": total,
               "categories": dict(by_category.most_common()), "threads": dict(by_thread.most_common(6)),
               "top": by_method.most_common(12), "measured_at": f"{started} ({machine()})"}
    print(json.dumps(figures, indent=1))
    FIGURES.parent.mkdir(parents=True, exist_ok=True)
    FIGURES.write_text(json.dumps(figures, indent=1) + "\n")
    render(figures, fresh=True)


def render(f: dict, *, fresh: bool = False) -> None:
    """The doc section from the figures (``fresh``: measured by this run, else re-rendered from the saved run)."""
    total, share = f["samples"], (lambda n: f"{n / f['samples']:.0%}")
    cats = f["categories"]
    parquet = sum(cats.get(k, 0) for k in cats if k.startswith(("Parquet", "zstd")))
    copies, unwalked = cats.get("Hadoop Configuration copied per opened file", 0), cats.get(JDK_ONLY, 0)
    rows_path = cats.get(ROWS, 0)
    rows = [[label, f"{count:,}", share(count)] for label, count in cats.items()]
    top = [[f"`{method}`", f"{count:,}", share(count)] for method, count in f["top"]]
    threads = ", ".join(f"{name}: {count:,}" for name, count in f["threads"].items())
    write_section("rewrite-profile", "Where a warm rewrite spends its time (Java Flight Recorder)", f["command"], f"""
A warm `rewrite_data_files` of {f['files']:,} small files (4 partitions, the rewrite benchmark's table)
took {f['profiled_s']:.2f} s under JFR ({f['unprofiled_s']:.2f} s for an identical copy just before, unprofiled:
recording costs that much, so the shares are the figures, not the seconds). {total:,} execution
samples of running Java threads (by thread: {threads}), each attributed to the innermost work its
stack shows:

{markdown_table(["work", "samples", "share"], rows)}

Where the time was spent (self time), named by the innermost frame outside the JDK (and the
JDK method under it, if any):

{markdown_table(["frame", "samples", "share"], top)}

**Reading.** Parquet's own work, decoding the small files and encoding the output (compression
included), is {share(parquet)} of the samples: the part the plain copy does too. Two costs the copy
does not pay make most of the rest:

- **A Hadoop `Configuration` copied for every file opened**: {share(copies)} of the samples show
  it, and the {share(unwalked)} whose stacks JFR could not walk past the JDK are mostly inside
  `ConcurrentHashMap` and `Properties.clone`, the code such a copy runs (JFR cannot say whose they
  are, so they are counted apart). Iceberg's `Parquet.ReadBuilder.build` copies the whole Hadoop
  configuration of every input file read through `HadoopFileIO`, to unset read properties that
  may conflict. It grows with the file count, not the bytes. Tables whose FileIO is not Hadoop's
  (`S3FileIO`, which REST catalogs on S3 use; chosen by `io-impl`) skip the copy; local, HDFS and
  `s3a://` tables pay it, and neither Spark nor Iceberg has a setting to avoid it.
- **Spark's row path** ({share(rows_path)}): the vectorised reader hands column batches, Iceberg's
  Spark writer takes rows, so every value is copied into an `UnsafeRow` and written one at a time.
  Iceberg 1.10 on Spark 3.5 has no columnar writer.

Planning, manifests and the commit are a few percent. With 2,000 files of a few tens of KB each,
the per-file copy and the per-row path keep Iceberg's Spark action several times the Arrow copy
(the throughput section); neither is a setting this provider or a user can change on a
Hadoop-FileIO table. This profile is of that action (`rewriter='iceberg'`, and what `auto` takes
where the Arrow rewriter does not apply): the Arrow rewriter skips both, keeping Iceberg's
planning and commit; its time, stage by stage, is in the throughput section above.
""", measured_at=None if fresh else f["measured_at"])


if __name__ == "__main__":
    main()
