"""Rewrite on a Spark standalone cluster of two workers: the provider's rewrite task against Iceberg's action.

A Spark standalone Master and two Workers (1 core and 2 GiB each; ``tests/spark_cluster.py``, the
cluster the topology tests start) on 127.0.0.1, and a table of N small files (default 100,000;
``--quick``: 2,000) on the local file system (the executors run on this machine and see the same
disk) in identity partitions (100 at 100,000 files: many file groups), built once by a local Spark
job, with copies registered on its metadata for each side and one left untouched. Then, one run
each, raw first:

1. **Iceberg's action**: a plain spark-submit of ``CALL rewrite_data_files`` with the plan's options
   on its copy, to the cluster's master (client mode), 2 executors of 1 core.
2. **The rewrite task**: ``IcebergRewriteDataFilesOperator.execute`` with its defaults (``rewriter='auto'``)
   on the plan of ``IcebergRewritePlanOperator`` (PyIceberg, made before and not timed), its Spark
   connection the cluster's master, its lake connection's ``spark_conf`` the same executor settings.

Both timed end to end (spark-submit included). Each application writes a Spark event log; from it and
the Master's record, each run's time is split into what bounds it: the JVM and submission outside the
application, the executors' start, the driver's work before the first Spark job (table load, planning),
the Spark jobs (the Parquet work on the executors' 2 cores), the driver's work after the last (commit).
After both: the same row count and checksum of rows on both copies and the untouched table, and the
files left on each side.

Run: ``python benchmarks/cluster.py [--quick] [--files N]`` (``--quick``: 1.5-2.5 minutes on 2 cores; the full
size has not been timed yet).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from common import context, lake_hook, markdown_table, private_lake, rewrite_task_vs_raw, timed, write_section
from rewrite import build, data_files, prewarm

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from spark_cluster import SparkStandaloneCluster

WORKERS, WORKER_CORES, WORKER_MEMORY = 2, 1, "2g"
ROWS_PER_FILE = 50


def fingerprint(hook, table: str) -> tuple[int, int]:
    """Row count and an order-free checksum of every row (the sum of each row's hash, modulo 2**64), via PyIceberg."""
    import numpy as np
    import pandas as pd

    data = hook.load_table(table).scan().to_arrow()
    columns = sorted(data.column_names)
    total = np.uint64(0)
    for batch in data.select(columns).to_batches(max_chunksize=500_000):
        hashes = pd.util.hash_pandas_object(batch.to_pandas(), index=False).to_numpy(dtype=np.uint64)
        total = np.add(total, np.add.reduce(hashes, dtype=np.uint64), dtype=np.uint64)
    return data.num_rows, int(total)


def spark_timeline(directory: Path) -> dict[str, float | int | None]:
    """What the event logs in ``directory`` (one application, or several summed) say, in seconds:
    ``app`` (application start to end), ``executors`` (start to the last executor added), ``before_jobs``
    (start to the first Spark job), ``jobs`` (first job's submission to the last one's completion),
    ``after_jobs`` (the last job's completion to the end), ``task_s`` (the tasks' durations summed),
    ``job_count``, ``task_count``; ``first_start``, ``last_end``: the first application's start and the last
    one's end (seconds since the epoch)."""
    totals: dict[str, float | int | None] = dict.fromkeys(("app", "executors", "before_jobs", "jobs", "after_jobs",
                                                            "task_s"), 0.0)
    totals.update(job_count=0, task_count=0, apps=0, first_start=None, last_end=None)
    for path in sorted(directory.iterdir()):
        # Spark 4 writes a rolling event log by default: a directory of events_N_APP files per application.
        parts = sorted(path.glob("events_*"), key=lambda p: int(p.name.split("_")[1])) if path.is_dir() else [path]
        events = [json.loads(line) for part in parts for line in part.read_text().splitlines() if line.strip()]
        kinds: dict[str, list[dict]] = {}
        for event in events:
            kinds.setdefault(event["Event"], []).append(event)
        start = kinds["SparkListenerApplicationStart"][0]["Timestamp"]
        end = kinds["SparkListenerApplicationEnd"][0]["Timestamp"]
        added = [e["Timestamp"] for e in kinds.get("SparkListenerExecutorAdded", [])]
        submitted = [e["Submission Time"] for e in kinds.get("SparkListenerJobStart", [])]
        completed = [e["Completion Time"] for e in kinds.get("SparkListenerJobEnd", [])]
        tasks = [e["Task Info"] for e in kinds.get("SparkListenerTaskEnd", [])]
        totals["apps"] += 1
        totals["first_start"] = min(start / 1000, totals["first_start"] or start / 1000)
        totals["last_end"] = max(end / 1000, totals["last_end"] or end / 1000)
        totals["app"] += (end - start) / 1000
        totals["executors"] += (max(added) - start) / 1000 if added else 0
        if submitted:
            totals["before_jobs"] += (min(submitted) - start) / 1000
            totals["jobs"] += (max(completed) - min(submitted)) / 1000
            totals["after_jobs"] += (end - max(completed)) / 1000
        else:  # no Spark job: the driver did everything
            totals["before_jobs"] += (end - start) / 1000
        totals["task_s"] += sum(t["Finish Time"] - t["Launch Time"] for t in tasks) / 1000
        totals["job_count"] += len(submitted)
        totals["task_count"] += len(tasks)
    return totals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2,000 files instead of 100,000")
    parser.add_argument("--files", type=int, help="this many files (default 100,000; --quick 2,000)")
    parser.add_argument("--partitions", type=int,
                        help="identity partitions (default: one per 1,000 files, at least 1, at most 100; "
                             "--quick: 100)")
    parser.add_argument("--no-doc", action="store_true", help="print the figures, leave docs/benchmarks.md alone")
    args = parser.parse_args()
    n_files = args.files or (2000 if args.quick else 100_000)
    partitions = args.partitions or (100 if args.quick and not args.files else max(1, min(100, n_files // 1000)))
    if n_files // partitions < 2:
        parser.error(f"{n_files} files in {partitions} partitions: fewer than 2 files per partition, "
                     "nothing to rewrite")

    from airflow_lake_provider import class_archive
    from airflow_lake_provider.operators.plan import IcebergRewritePlanOperator

    archive = class_archive.archive_for_driver() is not None  # the task's driver maps it (client mode)
    started = time.perf_counter()
    with private_lake("cluster") as root:
        hook = lake_hook()
        build_s, _ = timed(build, hook, n_files, name="cl", partitions=partitions, rows_per_file=ROWS_PER_FILE,
                           copies=("cl_raw", "cl_before"))
        before = data_files(hook.load_table("bench.cl_before"))
        mb = sum(size for _, size in before) / 1e6
        print(f"{len(before):,} files, {mb:.0f} MB, {partitions} partitions (built in {build_s:.0f} s)", flush=True)
        prewarm([path for path, _ in before])  # the page cache equally warm for both sides
        check_s, rows_before = timed(fingerprint, hook, "bench.cl_before")
        print(f"before: {rows_before[0]:,} rows, checksum {rows_before[1]:#x} ({check_s:.1f} s)", flush=True)

        cluster = SparkStandaloneCluster(root / "spark", worker_cores=WORKER_CORES, worker_memory=WORKER_MEMORY,
                                         workers=WORKERS)
        try:
            cluster_s, _ = timed(cluster.start)
            print(f"cluster {cluster.master_url}: {cluster.alive_workers()} workers alive ({cluster_s:.1f} s)",
                  flush=True)
            events = {side: root / "events" / side for side in ("task", "raw")}
            for directory in events.values():
                directory.mkdir(parents=True)
            # The same executor settings on both sides; only the event log's directory differs.
            executors = {"spark.pyspark.python": sys.executable, "spark.driver.host": "127.0.0.1",
                         "spark.cores.max": str(WORKERS * WORKER_CORES), "spark.executor.cores": str(WORKER_CORES),
                         "spark.executor.memory": WORKER_MEMORY, "spark.eventLog.enabled": "true",
                         "spark.eventLog.compress": "false"}
            lake_home = Path(os.environ["LAKE_HOME"])
            # The embedded lake's catalog, as a connection: the task's jobs take its spark_conf.
            os.environ["AIRFLOW_CONN_LAKE_DEFAULT"] = json.dumps({
                "conn_type": "iceberg_lake", "host": f"sqlite:///{lake_home / 'catalog.db'}",
                "extra": {"catalog_kind": "sql", "catalog_name": "lake",
                          "warehouse": f"file://{lake_home / 'warehouse'}",
                          "spark_conf": {**executors, "spark.eventLog.dir": f"file://{events['task']}"}}})
            os.environ["AIRFLOW_CONN_SPARK_DEFAULT"] = json.dumps({
                "conn_type": "spark", "host": "spark://127.0.0.1", "port": cluster.master_port,
                "extra": {"deploy-mode": "client"}})

            plan_s, plan = timed(IcebergRewritePlanOperator(task_id="plan", table="bench.cl",
                                                            engine="pyiceberg").execute, context("plan"))
            print(f"plan: {len(plan['groups'])} groups, {plan_s:.1f} s; options {plan['options']}", flush=True)
            task_wall, result, raw_wall, raw, jvms = rewrite_task_vs_raw(
                "bench.cl", plan, ("bench.cl_raw",), raw_submit={
                    "master": cluster.master_url,
                    "conf": {**executors, "spark.eventLog.dir": f"file://{events['raw']}"}})
            # raw ran first, the task right after it: each side's start and end on the wall clock.
            task_end = time.time()
            walls = {"task": (task_end - task_wall, task_end),
                     "raw": (task_end - task_wall - raw_wall, task_end - task_wall)}
            rewritten_by = result.get("rewritten_by")
            print(f"rewrite: task {task_wall:.1f} s (rewriter {result.get('rewriter')}, rewritten_by "
                  f"{rewritten_by or '(no such key)'}; {result.get('rewriter_note')}), raw {raw_wall:.1f} s "
                  f"(procedure {raw['per_table'][0]:.1f} s inside)", flush=True)
            apps = cluster.applications()
            timeline = {side: spark_timeline(directory) for side, directory in events.items()}
            for side, (side_start, side_end) in walls.items():
                started_app = timeline[side]["apps"]  # none: the job never started a SparkContext
                timeline[side]["before_app"] = timeline[side]["first_start"] - side_start if started_app else None
                timeline[side]["after_app"] = side_end - timeline[side]["last_end"] if started_app else None
            workers_alive = cluster.alive_workers()
        except BaseException:
            print(cluster.logs())
            raise
        finally:
            cluster.stop()

        raw_result = raw["results"][0]
        assert result["rewritten_data_files"] == len(before) == int(raw_result["rewritten_data_files_count"]), \
            (result["rewritten_data_files"], raw_result)
        files_after = {"task": len(data_files(hook.load_table("bench.cl"))),
                       "raw": len(data_files(hook.load_table("bench.cl_raw")))}
        assert files_after["task"] == result["added_data_files"], (files_after, result["added_data_files"])
        assert files_after["raw"] == int(raw_result["added_data_files_count"]), (files_after, raw_result)
        rows_after = {side: fingerprint(hook, table) for side, table in (("task", "bench.cl"), ("raw", "bench.cl_raw"))}
        assert rows_after["task"] == rows_after["raw"] == rows_before, (rows_before, rows_after)
        # Where each side's work ran: the applications the Master recorded.
        by_name = {}
        for app in apps:
            by_name.setdefault("raw" if app["name"].startswith("raw-") else "task", []).append(app)
        print(f"after: {files_after} files, rows equal ({rows_before[0]:,}); applications "
              f"{[(a['name'], a['cores'], a['duration']) for a in apps]}", flush=True)
    total_s = time.perf_counter() - started
    print(f"the whole run: {total_s:.0f} s")

    quick = n_files < 100_000
    command = "python benchmarks/cluster.py" + (" --quick" if args.quick and not args.files else
                                                f" --files {n_files:,}".replace(",", "") if args.files else "")
    rows, ratio = section_rows(task_wall, raw_wall, raw, timeline, by_name), task_wall / raw_wall
    summary = (f"{len(before):,} files ({mb:.0f} MB, {ROWS_PER_FILE} rows each, {rows_before[0]:,} rows) in "
               f"{partitions} identity partitions, {len(plan['groups'])} file groups in the plan")
    quick_note = (f"**A quick run: {len(before):,} files, not the 100,000 the target names** (no verdict on the "
                  "target from it); `python benchmarks/cluster.py` runs the full size.\n\n" if quick else "")
    ran = f"`rewriter={result.get('rewriter')}`" + (f", `rewritten_by={rewritten_by}`" if rewritten_by else "") \
        + (f": \"{result['rewriter_note']}\"" if result.get("rewriter_note") else "")
    body = f"""
{quick_note}{summary}, on the local disk. A Spark standalone cluster on 127.0.0.1
(`tests/spark_cluster.py`): one Master, {WORKERS} Workers of {WORKER_CORES} core and {WORKER_MEMORY} each;
both sides submit in client mode (the driver on this machine) with `spark.cores.max` {WORKERS * WORKER_CORES},
one executor of {WORKER_CORES} core and {WORKER_MEMORY} per Worker, and a Spark event log. The driver, the
daemons and the two executors share this machine's {os.cpu_count()} cores. "task" is
`IcebergRewriteDataFilesOperator.execute` with its defaults (`rewriter='auto'`; here it ran
{ran}), {jvms} spark-submit{" (its driver maps the provider's class archive)" if archive else ""}; "raw" a
plain spark-submit of `CALL rewrite_data_files` with the plan's options. Each on its
own registered copy of the table, one run each (raw first); the plan (PyIceberg, {plan_s:.1f} s) is made before
and not included. After both: {files_after["task"]} files on the task's copy, {files_after["raw"]} on raw's, the
same {rows_before[0]:,} rows and row checksum as the untouched table.

Each run's seconds, split by the application's event log and the Master's record (the application's start
is its SparkContext's; the Spark jobs' span is the first job's submission to the last one's end, and the
executors' summed task time is that span's Parquet work, at most {WORKERS * WORKER_CORES} x the span):

{markdown_table(["", "task", "raw"], rows)}

**Reading.** {reading(task_wall, raw_wall, timeline, len(before), mb, archive, result.get("rewriter") == "iceberg")}
"""
    goal = ("the rewrite of 100,000 files on a two-worker cluster no slower than Iceberg's action on the same "
            "cluster")
    measured = (f"{'quick run, ' if quick else ''}{len(before):,} files: task {task_wall:.1f} s, "
                f"raw {raw_wall:.1f} s, {ratio:.2f} x")
    print(f"{goal}: {measured}")
    print(markdown_table(["", "task", "raw"], rows))
    print(f"workers alive at the end: {workers_alive}")
    if not args.no_doc:
        write_section("cluster", "Rewrite on a standalone cluster vs Iceberg's action", command, body,
                      target={"goal": goal, "measured": measured, "met": None if quick else ratio <= 1.0})


def section_rows(task_wall: float, raw_wall: float, raw: dict, timeline: dict, by_name: dict) -> list[list[str]]:
    task, rawt = timeline["task"], timeline["raw"]

    def seconds(value: float | None) -> str:
        return "-" if value is None else f"{value:.1f}"

    master = {side: sum(a["duration"] for a in by_name.get(side, [])) / 1000 for side in ("task", "raw")}
    return [
        ["end to end (spark-submit included)", f"**{task_wall:.1f}**", f"**{raw_wall:.1f}**"],
        ["ratio task / raw", f"**{task_wall / raw_wall:.2f}**", ""],
        ["applications on the cluster (cores each)",
         ", ".join(f"{a['name']} ({a['cores']})" for a in by_name.get("task", [])) or "none",
         ", ".join(f"{a['name']} ({a['cores']})" for a in by_name.get("raw", [])) or "none"],
        ["outside the application: JVM start, submission, stop (and the operator's Python)",
         seconds(task_wall - task["app"]), seconds(raw_wall - rawt["app"])],
        ["  before its start (spark-submit's JVM, the driver's Python, up to the SparkContext)",
         seconds(task["before_app"]), seconds(rawt["before_app"])],
        ["  after its end (the SparkContext stopped, until spark-submit has exited)",
         seconds(task["after_app"]), seconds(rawt["after_app"])],
        ["the application (event log; the Master's record)", f"{task['app']:.1f} ({master['task']:.1f})",
         f"{rawt['app']:.1f} ({master['raw']:.1f})"],
        ["  start to both executors added", seconds(task["executors"]), seconds(rawt["executors"])],
        ["  start to the first Spark job (session, table load, planning in the driver)",
         seconds(task["before_jobs"]), seconds(rawt["before_jobs"])],
        ["  Spark jobs, first to last (the Parquet work on the executors)", seconds(task["jobs"]),
         seconds(rawt["jobs"])],
        ["    executors' task time summed (jobs, tasks)",
         f"{task['task_s']:.1f} ({task['job_count']}, {task['task_count']})",
         f"{rawt['task_s']:.1f} ({rawt['job_count']}, {rawt['task_count']})"],
        ["  the last job's end to the application's end (commit in the driver, stop)",
         seconds(task["after_jobs"]), seconds(rawt["after_jobs"])],
        ["`CALL rewrite_data_files` inside the application (raw's own clock)", "", f"{raw['per_table'][0]:.1f}"],
    ]


def reading(task_wall: float, raw_wall: float, timeline: dict, n_files: int, mb: float, archive: bool,
            same_action: bool) -> str:
    """The section's reading, from the figures: what bounds each run, and where the two differ."""
    task, raw = timeline["task"], timeline["raw"]
    walls = {"task": task_wall, "raw": raw_wall}
    parts = {  # name: (task s, raw s, what it is)
        "outside": (task_wall - task["app"], raw_wall - raw["app"],
                    ("outside the application (spark-submit's JVM start and exit, and the operator's Python "
                     "around it)")),
        "before_jobs": (task["before_jobs"], raw["before_jobs"],
                        ("the driver's work from the SparkContext's start to the first Spark job (the session, the "
                         "catalog, the table load and Iceberg's planning")
                        + ("; the task's driver maps the provider's class archive of Spark's and Iceberg's classes, "
                           "raw's loads them from the jars: \"Job start with and without the class archive\" "
                           "measures what that saves at a job's start" if archive else "") + ")"),
        "jobs": (task["jobs"], raw["jobs"], "the Spark jobs (the Parquet work on the executors)"),
        "after_jobs": (task["after_jobs"], raw["after_jobs"], "the driver's commit and the application's stop"),
    }
    difference = task_wall - raw_wall
    text = [(f"The task took {abs(difference):.1f} s {'more' if difference > 0 else 'less'} than Iceberg's action "
             f"submitted by hand ({task_wall / raw_wall:.2f} x).")]
    for side, label in (("raw", "Raw"), ("task", "The task")):
        t = timeline[side]
        own = {name: value[0 if side == "task" else 1] for name, value in parts.items()}
        biggest = max(own, key=own.__getitem__)
        if not t["jobs"]:
            text.append(f"{label} ran no Spark job on the executors: its largest part is {_short(biggest)} "
                        f"({own[biggest]:.1f} s)" + ("" if t["apps"] else "; it started no SparkContext, so the "
                                                     "driver's whole work, the Parquet's included, counts as outside "
                                                     "the application") + ".")
            continue
        per_job, per_task = t["task_count"] / max(t["job_count"], 1), t["task_s"] / max(t["task_count"], 1)
        largest = "" if biggest == "jobs" else f"its largest part is {_short(biggest)} ({own[biggest]:.1f} s); "
        text.append(
            f"{label}: {largest}its Spark jobs took {t['jobs']:.1f} s ({t['jobs'] / walls[side]:.0%} of its "
            f"{walls[side]:.1f} s): {t['job_count']} jobs of "
            f"{per_job:.0f} task{'s' if per_job >= 1.5 else ''} each on average, {per_task:.2f} s a task, the two "
            f"executors' slots occupied {t['task_s'] / t['jobs']:.1f} of {WORKERS * WORKER_CORES} on average over "
            f"the span. Before them, {t['before_app'] or 0:.1f} s to the SparkContext's start and "
            f"{t['before_jobs']:.1f} s "
            f"to the first job, over which both executors were added ({t['executors']:.1f} s after the start: each "
            f"Worker starts a fresh executor JVM for every application).")
    name, (t_s, r_s, what) = max(parts.items(), key=lambda item: abs(item[1][0] - item[1][1]))
    largest_is_jobs = name == "jobs"
    text.append(f"The largest difference is {what}: {t_s:.1f} s for the task, {r_s:.1f} s for raw.")
    if same_action and largest_is_jobs:
        text.append("Both sides ran Iceberg's action with the same options on the cluster's two Workers, so that "
                    "difference is most likely the moment's, not the task's: one run each on a shared machine moves "
                    "by tens of percent (the load average at the start is in the line above).")
    else:
        text.append("One run each on a shared machine: each side's time moves by tens of percent with the load "
                    "(the load average at the start is in the line above).")
    text.append(f"Slots are not cores: the executors share this machine's {os.cpu_count()} cores with their driver "
                "and the daemons (and with whatever else runs here), so a task's time includes waiting for a core.")
    if n_files < 100_000:
        text.append(f"At {n_files:,} files a task reads {n_files / max(raw['task_count'], 1):.0f} files of "
                    f"{mb * 1000 / n_files:.1f} KB: the jobs measure per-job and per-file costs (the driver scheduling "
                    "each group's job, an executor opening each file) more than Parquet decoding, and the rest of each "
                    "run is fixed costs (three JVMs started, the session, the catalog); the 100,000-file run is the "
                    "one that weighs the Parquet work.")
    return " ".join(text)


def _short(part: str) -> str:
    return {"outside": "the spark-submit JVM outside the application",
            "before_jobs": "the driver's work before the first Spark job", "jobs": "the Spark jobs",
            "after_jobs": "the commit and stop"}[part]


if __name__ == "__main__":
    main()
