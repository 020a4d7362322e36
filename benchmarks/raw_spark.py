"""The baselines: plain PySpark applications, submitted with a plain spark-submit (no provider code).

``raw_spark.py procedure OPTIONS_JSON TABLE...``: ``CALL system.rewrite_data_files`` on each table
(``spark.*`` keys of the options are set on the session instead)
(seconds per table too: with two copies of one table, the second runs in a warm JVM).
``raw_spark.py copy OUT_DIR N CODEC REPEAT PATH...``: read Parquet files, write them again as N
files with CODEC, REPEAT times (seconds per run: the later ones warm).
``raw_spark.py sql STATEMENT...``: each statement (a ``CALL``), its first row and its row count.
``raw_spark.py orphans OLDER_THAN_MS TABLE``: Iceberg's ``DeleteOrphanFiles`` action, what
``remove_orphan_files`` runs, through the Java API (the procedure refuses a floor under 24 hours).
``raw_spark.py scan REPEAT TABLE...``: a count and a filtered aggregate on each table, REPEAT times.
``raw_spark.py arrow OPTIONS_JSON TABLE...``: the provider's Arrow rewriter (``jobs/arrow_rewrite.py``:
Iceberg's planner and commit, Arrow's Parquet) on each table, seconds per table (the second warm), and
per table where they went (``stages``: each stage's span from its first start to its last end).
``raw_spark.py profile OUT_JFR OPTIONS_JSON WARMUP UNPROFILED TABLE``: the procedure on WARMUP, on
UNPROFILED (timed, warm), then on TABLE under Java Flight Recorder (the driver JVM, which runs every task in local mode), dumped to OUT_JFR.
Each prints one JSON line with the seconds spent inside the application (after session start).
"""

import json
import statistics
import sys
import time

from pyspark.sql import SparkSession


def rewrite_call(spark, catalog: str, options: dict) -> str:
    """``CALL rewrite_data_files`` with the plan's options (a ``{}`` for the table); the ``spark.*``
    keys among them are session settings, set here, not procedure options."""
    for key in [k for k in options if k.startswith("spark.")]:
        spark.conf.set(key, options.pop(key))
    pairs = ", ".join(f"'{k}', '{v}'" for k, v in options.items())
    return f"CALL {catalog}.system.rewrite_data_files(table => '{{}}', options => map({pairs}))"


class StageClock:
    """Spans of named functions while a rewrite runs. Inside ``with StageClock(targets)``, every call
    of each ``(owner, name, stage)`` target (from any thread) is timed under ``stage``; ``spans()``
    gives each stage's first start and last end, ``totals()`` its calls' seconds summed over threads."""

    def __init__(self, targets):
        import threading

        self.targets, self.originals = targets, []
        self.calls: dict[str, list[tuple[float, float]]] = {}
        self.lock = threading.Lock()

    def __enter__(self):
        for owner, name, stage in self.targets:
            function = getattr(owner, name)
            self.originals.append((owner, name, function))
            setattr(owner, name, self._timed(function, stage))
        return self

    def __exit__(self, *exc):
        for owner, name, function in self.originals:
            setattr(owner, name, function)

    def _timed(self, function, stage):
        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                with self.lock:
                    self.calls.setdefault(stage, []).append((start, time.perf_counter()))
        return timed

    def spans(self) -> dict[str, tuple[float, float]]:
        return {stage: (min(s for s, _ in calls), max(e for _, e in calls)) for stage, calls in self.calls.items()}

    def totals(self) -> dict[str, float]:
        return {stage: sum(e - s for s, e in calls) for stage, calls in self.calls.items()}


def main(argv):
    mode = argv[1]
    spark = SparkSession.builder.appName(f"raw-{mode}").getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    catalog = spark.conf.get("spark.bench.catalog", "lake")
    out = {"mode": mode}
    started = time.perf_counter()
    if mode == "procedure":
        call = rewrite_call(spark, catalog, json.loads(argv[2]))
        rows, per_table = [], []
        for table in argv[3:]:
            t0 = time.perf_counter()
            row = spark.sql(call.format(table)).first()
            per_table.append(time.perf_counter() - t0)
            rows.append(row.asDict())
        out["results"], out["per_table"] = rows, per_table
    elif mode == "arrow":
        from airflow_lake_provider.jobs import arrow_rewrite, iceberg
        from airflow_lake_provider.jobs.rewriters import ArrowRewriter, RewriteScope

        options = {k: v for k, v in json.loads(argv[2]).items() if not k.startswith("spark.")}
        rows, per_table, stages = [], [], []
        targets = ((iceberg, "load_table", "table load"), (arrow_rewrite, "ineligibility", "eligibility"),
                   (iceberg, "bin_pack_groups", "planning"), (arrow_rewrite._Group, "_files", "file lists"),
                   (arrow_rewrite, "_in_driver", "read and write"), (arrow_rewrite._Group, "set_output", "metrics"))
        for table in argv[3:]:
            with StageClock(targets) as clock:
                t0 = time.perf_counter()
                jtable = iceberg.load_table(spark, catalog, table)
                reason = arrow_rewrite.ineligibility(spark, jtable, "binpack", options)
                if reason is not None:
                    raise SystemExit(f"the Arrow rewriter cannot rewrite {table}: {reason}")
                outcome = ArrowRewriter().rewrite(RewriteScope(spark, jtable, None, options, {}))
                end = time.perf_counter()
            per_table.append(end - t0)
            spans, totals = clock.spans(), clock.totals()
            stages.append({**{stage: e - s for stage, (s, e) in spans.items() if stage != "metrics"},
                           "metrics (summed over threads)": totals.get("metrics", 0.0),
                           "commit": end - spans["read and write"][1]})
            rows.append({"groups": len(outcome.groups),
                         "rewritten_data_files": sum(g.rewritten_data_files for g in outcome.groups)})
        out["results"], out["per_table"], out["stages"] = rows, per_table, stages
    elif mode == "profile":
        import subprocess

        target, warmup, unprofiled, table = argv[2], argv[4], argv[5], argv[6]
        call = rewrite_call(spark, catalog, json.loads(argv[3]))
        spark.sql(call.format(warmup)).collect()
        t0 = time.perf_counter()
        spark.sql(call.format(unprofiled)).collect()
        out["unprofiled_s"] = time.perf_counter() - t0
        pid = str(spark._jvm.java.lang.ProcessHandle.current().pid())
        subprocess.run(["jcmd", pid, "JFR.start", "name=rewrite", "settings=profile"], check=True, capture_output=True)
        t0 = time.perf_counter()
        out["result"] = spark.sql(call.format(table)).first().asDict()
        out["profiled_s"] = time.perf_counter() - t0
        subprocess.run(["jcmd", pid, "JFR.stop", "name=rewrite", f"filename={target}"], check=True, capture_output=True)
    elif mode == "copy":
        # copy OUT_DIR N CODEC REPEAT PATH...: the copy REPEAT times in one JVM (the last runs warm).
        target, files, codec, repeat, paths = argv[2], int(argv[3]), argv[4], int(argv[5]), argv[6:]
        per_run = []
        for run in range(repeat):
            t0 = time.perf_counter()
            # coalesce, not repartition: no shuffle, like a binpack rewrite.
            (spark.read.parquet(*paths).coalesce(files).write.mode("overwrite").option("compression", codec)
             .parquet(f"{target}-{run}"))
            per_run.append(time.perf_counter() - t0)
        out["per_run"] = per_run
    elif mode == "sql":
        results = [spark.sql(statement).collect() for statement in argv[2:]]
        out["rows"] = [rows[0].asDict() if rows else None for rows in results]
        out["counts"] = [len(rows) for rows in results]
    elif mode == "orphans":
        jvm = spark.sparkContext._jvm
        table = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, f"{catalog}.{argv[3]}")
        out["load_s"] = time.perf_counter() - started
        result = (jvm.org.apache.iceberg.spark.actions.SparkActions.get(spark._jsparkSession)
                  .deleteOrphanFiles(table).olderThan(int(argv[2])).execute())
        out["action_s"] = time.perf_counter() - started - out["load_s"]
        out["orphans"] = sum(1 for _ in result.orphanFileLocations())
    elif mode == "scan":
        repeat, tables = int(argv[2]), argv[3:]
        timings = {}
        for table in tables:
            for query in ("count", "aggregate"):
                sql = (f"SELECT count(*) FROM {catalog}.{table}" if query == "count" else
                       f"SELECT part, sum(amount), count(*) FROM {catalog}.{table} WHERE amount > 50 GROUP BY part")
                seconds = []
                for _ in range(repeat):
                    t0 = time.perf_counter()
                    spark.sql(sql).collect()
                    seconds.append(time.perf_counter() - t0)
                timings[f"{table}:{query}"] = {"first": seconds[0], "median_warm": statistics.median(seconds[1:] or seconds)}
        out["timings"] = timings
    out["seconds"] = time.perf_counter() - started
    spark.stop()
    print(json.dumps(out, default=str))


if __name__ == "__main__":
    main(sys.argv)
