"""Expiry and orphan removal at scale: the provider's tasks against the raw Iceberg procedures.

Two parts, each side by side in one run, each task in a fresh process (its peak RSS is the
Airflow worker's) against a plain spark-submit of the procedure:

1. **Expire 10,000 snapshots** (``--quick``: 1,000). A table gets a history of one-file appends
   (a streaming writer's commits, manifests merged as Iceberg's default append does), built
   through Iceberg's Java API; the lake is saved and put back before each run. Then
   ``CALL expire_snapshots(older_than => now, retain_last => 1)`` and the expire operator
   (``override_table_retention``, ``older_than="0m"``, ``retain_last=1``) on each ``engine``
   alternate on it: raw, spark, pyiceberg, pyiceberg, spark, raw; all remove every snapshot but
   the current one, with the same files deleted; the faster of each side counts.
2. **Orphan removal over 1,000,000 files** (``--quick``: 100,000). One table whose manifests
   name 1M files, each present on disk (empty: only the listing and the metadata matter), plus
   1,000 orphans, all dated three days back. ``CALL remove_orphan_files(older_than => 2 days
   ago)`` and the clean operator (a policy keeping every snapshot, ``orphan_older_than_hours=48``,
   the default quarantine) alternate on it, the orphans written again before each run: raw,
   task, task, raw; the faster of each side counts.
3. **Orphan removal on S3** (``--s3``): part 2 on a SeaweedFS started on 127.0.0.1, the files
   as empty objects (``--s3-files N`` for another size).

Run: ``python benchmarks/expire_clean.py [--quick] [--skip-expire] [--skip-orphans] [--s3]``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
import sys
import time
from pathlib import Path

from common import lake_hook, markdown_table, private_lake, raw_spark_submit, run_child, write_section

HISTORY_TABLE = "bench.history"
FILES_TABLE = "bench.planning"  # built by planning.py's builder
ORPHANS = 1_000
AGE_S = 3 * 86_400  # every data file and orphan is this old; the floor on both sides is 2 days

EXPIRE_TASK = """
import time
from airflow_lake_provider.operators.expire import IcebergExpireSnapshotsOperator
from common import context
op = IcebergExpireSnapshotsOperator(task_id="expire", table="{table}", override_table_retention=True,
                                    older_than="0m", retain_last=1, engine="{engine}")
started = time.perf_counter()
result = op.execute(context("expire"))
print(json.dumps({{"seconds": time.perf_counter() - started, **_peaks(),
                  "expired": len(result["expired_snapshot_ids"]), "deleted": result["deleted_files"],
                  "xcom_kb": len(json.dumps(result)) // 1024}}))
"""

LOCAL_FLOOR = "orphan_older_than_hours=48"
# An S3 object's age is its upload time, which a benchmark cannot set back: a floor of 0 hours
# (allowed with force_orphan_floor) on both sides, the orphans uploaded just before each run.
S3_FLOOR = "orphan_older_than_hours=0, force_orphan_floor=True"
CLEAN_TASK = """
import time
from airflow_lake_provider.operators.clean import IcebergCleanPolicyOperator
from common import context
op = IcebergCleanPolicyOperator(task_id="clean", table="{table}", policy="KEEP_LATEST_COMMITS", retained=10_000,
                                {orphan_floor})
started = time.perf_counter()
result = op.execute(context("clean"))
print(json.dumps({{"seconds": time.perf_counter() - started, **_peaks(), "orphans": result["orphan_file_count"],
                  "expired": len(result["expired_snapshot_ids"])}}))
"""

BARE_SUBMIT = """
import time
import airflow_lake_provider.operators.clean, airflow_lake_provider.operators.expire  # the task's own imports
from airflow_lake_provider.hooks.lake import IcebergLakeHook
from airflow_lake_provider.hooks.spark_job import LakeSparkJobHook
from airflow_lake_provider.core.contracts import SqlJobArgs
started = time.perf_counter()
LakeSparkJobHook(lake_hook=IcebergLakeHook()).run(SqlJobArgs(statements=["SELECT 1"]))
print(json.dumps({"seconds": time.perf_counter() - started, **_peaks()}))
"""


def build_history(snapshots: int) -> float:
    """The history table, ``snapshots`` commits: one spark-submit of this file (``history`` mode)."""
    lake_hook().catalog.create_namespace_if_not_exists("bench")
    started = time.perf_counter()
    os.environ["SPARK_DRIVER_MEMORY"] = "3g"  # the builder only: a history of 10,000 snapshots in one JVM
    try:
        raw_spark_submit("history", str(snapshots), HISTORY_TABLE, app=Path(__file__))
    finally:
        del os.environ["SPARK_DRIVER_MEMORY"]
    return time.perf_counter() - started


def history_app(spark, snapshots: int, tables: list[str]) -> dict:
    """Inside Spark: create each table with one real file, then append ``snapshots - 1`` one-file commits
    (entries copied from the real file under new paths) through Iceberg's Java API, interleaved."""
    from airflow_lake_provider.jobs import iceberg

    catalog = spark.conf.get("spark.bench.catalog", "lake")
    jtables = []
    for name in tables:
        spark.sql(f"CREATE TABLE {catalog}.{name} (id BIGINT, payload STRING) USING iceberg TBLPROPERTIES "
                  "('format-version'='2', 'write.metadata.delete-after-commit.enabled'='true', "
                  "'write.metadata.previous-versions-max'='20')")
        spark.sql(f"INSERT INTO {catalog}.{name} VALUES (0, 'x')")
        jtables.append(iceberg.load_table(spark, catalog, name))
    jvm = spark._jvm
    for jtable in jtables:
        template = jtable.currentSnapshot().addedDataFiles(jtable.io()).iterator().next()
        location = str(jtable.location())
        # Transactions of many appends: each append is its own snapshot (manifest list, merged
        # manifests), but the table metadata is written once per transaction, not once per commit
        # (quadratic in the history); one transaction for all ran out of heap at 10,000.
        for first in range(1, snapshots, 1000):
            transaction = jtable.newTransaction()
            for i in range(first, min(first + 1000, snapshots)):
                data_file = (jvm.org.apache.iceberg.DataFiles.builder(jtable.spec()).copy(template)
                             .withPath(f"{location}/data/stream-{i:06d}.parquet").build())
                transaction.newAppend().appendFile(data_file).commit()
            transaction.commitTransaction()
    return {"snapshots": [spark.sql(f"SELECT count(*) FROM {catalog}.{name}.snapshots").first()[0] for name in tables]}


def small_history(name: str = "bench.history_small") -> str:
    """The worker's baseline table: two one-row appends (PyIceberg, no JVM), so the same task expires one snapshot."""
    import pyarrow as pa

    hook = lake_hook()
    hook.catalog.create_namespace_if_not_exists("bench")
    table = hook.catalog.create_table(name, schema=pa.schema([("id", pa.int64()), ("payload", pa.string())]))
    for i in range(2):
        table.append(pa.table({"id": [i], "payload": ["x"]}))
    return name


def expire_part(snapshots: int, lake: Path) -> dict:
    """Raw, task, task, raw on the same table: the lake (catalog and files) is saved once built and
    put back before each run, so every run expires the same history; the faster of each side counts."""
    build_s = build_history(snapshots)
    print(f"built a table of {snapshots:,} snapshots in {build_s:.0f} s", flush=True)
    small = small_history()
    saved = lake.with_name("lake-saved")
    shutil.copytree(lake, saved)
    bare = run_child(BARE_SUBMIT)
    small_task = run_child(EXPIRE_TASK.format(table=small, engine="spark"))
    raws, left = [], []
    tasks: dict[str, list[dict]] = {"spark": [], "pyiceberg": []}  # the task's engine: its Spark job, or the worker
    for side in ("raw", "spark", "pyiceberg", "pyiceberg", "spark", "raw"):
        shutil.rmtree(lake)
        shutil.copytree(saved, lake)
        if side == "raw":
            # The raw procedure removes what older_than and retain_last leave, as the task is asked to.
            cutoff = (dt.datetime.now() + dt.timedelta(minutes=1)).strftime("%Y-%m-%d %H:%M:%S")
            wall, raw = raw_spark_submit("sql", f"CALL lake.system.expire_snapshots(table => '{HISTORY_TABLE}', "
                                         f"older_than => TIMESTAMP '{cutoff}', retain_last => 1)")
            raws.append({"seconds": wall, **raw["rows"][0]})
        else:
            tasks[side].append(run_child(EXPIRE_TASK.format(table=HISTORY_TABLE, engine=side)))
        left.append(len(lake_hook().load_table(HISTORY_TABLE).snapshots()))
        print(f"{side}: {(raws if side == 'raw' else tasks[side])[-1]}, {left[-1]} snapshots left", flush=True)
    shutil.rmtree(saved)
    raw = min(raws, key=lambda r: r["seconds"])
    return {"snapshots": snapshots, "build_s": build_s, "bare": bare, "small_task": small_task,
            "raw_s": raw["seconds"], "raw": raw, "task": min(tasks["spark"], key=lambda r: r["seconds"]),
            "worker": min(tasks["pyiceberg"], key=lambda r: r["seconds"]),
            "raw_runs_s": [r["seconds"] for r in raws], "task_runs_s": [r["seconds"] for r in tasks["spark"]],
            "worker_runs_s": [r["seconds"] for r in tasks["pyiceberg"]], "left": left}


def build_files(files: int, *, while_small=None) -> Path:
    """The 1M-entry table (planning.py's builder: fast-appended entries), and each named file on disk.
    ``while_small`` runs while the table still holds its one real file."""
    from planning import add_files, build_table

    catalog = lake_hook().catalog
    table = build_table(catalog)
    if while_small:
        while_small()
    add_files(table, 1, files - 1)
    table = catalog.load_table(FILES_TABLE)
    location = Path(table.location().removeprefix("file:").removeprefix("//"))
    created, dated = 0, time.time() - AGE_S
    for task in table.scan().plan_files():
        path = Path(task.file.file_path.removeprefix("file:").removeprefix("//"))
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch()
            os.utime(path, (dated, dated))
            created += 1
    print(f"{files:,} entries, {created:,} files created under {location}", flush=True)
    return location


def write_orphans(location: Path) -> None:
    """``ORPHANS`` files no snapshot names, spread over the partitions (a killed writer's leftovers)."""
    dated = time.time() - AGE_S
    for i in range(ORPHANS):
        path = location / "data" / f"part={i % 100}" / f"orphan-{i:05d}.parquet"
        path.write_bytes(b"PAR1")
        os.utime(path, (dated, dated))


def orphans_part(files: int) -> dict:
    started = time.perf_counter()
    small = []  # the same task on the table while it holds one file: the worker's baseline for this step
    location = build_files(files, while_small=lambda: small.append(run_child(CLEAN_TASK.format(table=FILES_TABLE, orphan_floor=LOCAL_FLOOR))))
    build_s = time.perf_counter() - started
    bare = run_child(BARE_SUBMIT)
    raws, tasks = [], []
    for side in ("raw", "task", "task", "raw"):
        write_orphans(location)
        if side == "raw":
            cutoff = (dt.datetime.now() - dt.timedelta(days=2)).strftime("%Y-%m-%d %H:%M:%S")
            wall, raw = raw_spark_submit("sql", f"CALL lake.system.remove_orphan_files(table => '{FILES_TABLE}', "
                                         f"older_than => TIMESTAMP '{cutoff}')")
            raws.append({"seconds": wall, "orphans": raw["counts"][0]})
        else:
            tasks.append(run_child(CLEAN_TASK.format(table=FILES_TABLE, orphan_floor=LOCAL_FLOOR)))
        print(f"{side}: {(raws if side == 'raw' else tasks)[-1]}", flush=True)
    left = sum(1 for path in (location / "data").rglob("orphan-*"))
    return {"files": files, "build_s": build_s, "bare": bare, "small_task": small[0], "raw": min(raws, key=lambda r: r["seconds"]),
            "task": min(tasks, key=lambda r: r["seconds"]), "orphans_left": left,
            "all_found": all(r["orphans"] == ORPHANS for r in raws + tasks)}


def orphans_s3_part(files: int, root: Path) -> dict:
    """The orphan part on S3: a SeaweedFS on 127.0.0.1 (the tests' server), a SQL catalog, the same
    table (entries named the way planning.py's builder names them, each uploaded as an empty
    object) and the same orphans, uploaded before each run. Both sides take every unreferenced
    object older than the moment the run starts."""
    from concurrent.futures import ThreadPoolExecutor

    from pyarrow import fs
    from planning import PARTITIONS, add_files, build_table
    from topology import SeaweedFS, use_connection

    server = SeaweedFS.launch(root / "weed")
    try:
        use_connection(server.sql_connection(f"sqlite:///{root}/catalog-s3.db", "bench"))
        started = time.perf_counter()
        catalog = lake_hook().catalog
        table = build_table(catalog)
        small = run_child(CLEAN_TASK.format(table=FILES_TABLE, orphan_floor=S3_FLOOR))
        add_files(table, 1, files - 1)
        prefix = catalog.load_table(FILES_TABLE).location().removeprefix("s3://") + "/data"
        s3 = server.filesystem()

        def upload(name: str) -> None:
            s3.open_output_stream(f"{prefix}/{name}").close()

        with ThreadPoolExecutor(32) as pool:
            list(pool.map(upload, (f"part={i % PARTITIONS}/synthetic-{i:08d}.parquet" for i in range(1, files)),
                          chunksize=500))
        build_s = time.perf_counter() - started
        print(f"S3: {files:,} entries and objects in {build_s:.0f} s", flush=True)
        bare = run_child(BARE_SUBMIT)
        # raw, quarantine, delete, delete, quarantine, raw: the task with its default quarantine (a copy
        # and a delete per orphan) and with quarantine_days=0 (a delete, as the raw action does).
        runs: dict[str, list[dict]] = {"raw": [], "task": [], "task_delete": []}
        for side in ("raw", "task", "task_delete", "task_delete", "task", "raw"):
            with ThreadPoolExecutor(32) as pool:
                list(pool.map(upload, (f"part={i % 100}/orphan-{i:05d}.parquet" for i in range(ORPHANS))))
            time.sleep(2)  # S3 times have one-second resolution: the orphans are strictly older than the start
            if side == "raw":  # the procedure's action: the procedure itself refuses a floor under 24 hours
                wall, raw = raw_spark_submit("orphans", str(int(time.time() * 1000)), FILES_TABLE)
                runs[side].append({"seconds": wall, "orphans": raw["orphans"]})
            else:
                floor = S3_FLOOR + (", quarantine_days=0" if side == "task_delete" else "")
                runs[side].append(run_child(CLEAN_TASK.format(table=FILES_TABLE, orphan_floor=floor)))
            print(f"S3 {side}: {runs[side][-1]}", flush=True)
        orphan_paths = [f"{prefix}/part={i % 100}/orphan-{i:05d}.parquet" for i in range(ORPHANS)]
        left = sum(info.type != fs.FileType.NotFound for info in s3.get_file_info(orphan_paths))
    finally:
        server.stop()
        os.environ.pop("AIRFLOW_CONN_LAKE_DEFAULT", None)
    every = [run for side in runs.values() for run in side]
    fastest = {side: min(found, key=lambda r: r["seconds"]) for side, found in runs.items()}
    # At least the planted orphans: with a floor of 0 h the first run also takes the table's oldest
    # metadata file once it has fallen out of the metadata log (more commits than previous-versions-max).
    return {"files": files, "build_s": build_s, "bare": bare, "small_task": small, "raw": fastest["raw"],
            "task": fastest["task"], "task_delete": fastest["task_delete"], "orphans_left": left,
            "orphans_per_run": {side: [r["orphans"] for r in found] for side, found in runs.items()},
            "all_found": all(r["orphans"] >= ORPHANS for r in every)}


PARTS = Path(__file__).resolve().parent / "results" / "figures" / "expire_clean.json"  # both parts, for a partial rerun


def report(measured: dict[str, dict | None], command: str) -> None:
    """The section, from every part's figures (a part skipped this run: its last saved figures)."""
    import json

    saved = json.loads(PARTS.read_text()) if PARTS.exists() else {}
    parts = {name: measured.get(name) or saved.get(name) for name in ("expire", "orphans", "orphans_s3")}
    PARTS.write_text(json.dumps(parts, indent=1, default=str) + "\n")
    expire, orphans, orphans_s3 = parts["expire"], parts["orphans"], parts["orphans_s3"]
    rows, targets, notes = [], [], []
    for label, part, count in (("expire", expire, "expired"), ("orphans", orphans, "orphans"),
                               ("orphans on S3", orphans_s3, "orphans")):
        if part is None:
            continue
        task = part["task"]
        # The worker's baseline: the same step on a small table (runs before it had one: a bare submit).
        baseline = part.get("small_task") or part["bare"]
        raw_s = part["raw_s"] if label == "expire" else part["raw"]["seconds"]
        ratio = task["seconds"] / raw_s
        over = task["peak_mb"] - baseline["peak_mb"]
        size = f"{part['snapshots']:,} snapshots" if label == "expire" else f"{part['files']:,} files"
        rows.append([label, size, f"{raw_s:.1f}", f"{task['seconds']:.1f}", f"{ratio:.2f}", f"{task[count]:,}",
                     f"{part['bare']['peak_mb']}", f"{part['small_task']['peak_mb']}" if "small_task" in part else "-",
                     f"{task['peak_mb']} ({over:+d})", f"{part['build_s']:.0f}"])
        what = {"expire": "expire of 10k snapshots", "orphans": "orphan removal over 1M files (local)",
                "orphans on S3": "orphan removal over 1M files on S3"}[label]
        targets.append({"goal": f"{what} <= 1.1x the raw procedure, worker memory flat (<= 50 MB over its baseline)",
                        "measured": f"{size}: {ratio:.2f}x, worker {over:+d} MB",
                        "met": ratio <= 1.1 and over <= 50 and (part.get("snapshots", 0) >= 10_000
                                                               or part.get("files", 0) >= 1_000_000)})
    if expire and "worker" in expire:
        worker = expire["worker"]
        rows.append(["expire, engine=pyiceberg (the worker, no JVM)", f"{expire['snapshots']:,} snapshots",
                     f"{expire['raw_s']:.1f}", f"{worker['seconds']:.1f}", f"{worker['seconds'] / expire['raw_s']:.2f}",
                     f"{worker['expired']:,}", f"{expire['bare']['peak_mb']}", "-",
                     f"{worker['peak_mb']} ({worker['peak_mb'] - expire['small_task']['peak_mb']:+d})",
                     f"{expire['build_s']:.0f}"])
        notes.append(f"Expiry in the worker (`engine=\"pyiceberg\"`; `auto` takes it below 2,000 snapshots): runs "
                     f"{', '.join(f'{t:.1f}' for t in expire['worker_runs_s'])} s, deleted {worker['deleted']} (the "
                     f"Spark task: {expire['task']['deleted']}).")
    if expire:
        notes.append(f"Expiry: one table, restored before each run, raw and task alternating: raw "
                     f"{', '.join(f'{t:.1f}' for t in expire['raw_runs_s'])} s, task "
                     f"{', '.join(f'{t:.1f}' for t in expire['task_runs_s'])} s (the faster of each counts); snapshots "
                     f"left after each run: {expire['left']}; the task deleted "
                     f"{expire['task']['deleted']}; its XCom result (every snapshot with the rule that removed it) "
                     f"was {expire['task'].get('xcom_kb', '?')} KB of JSON.")
    if orphans:
        notes.append(f"Orphans: {ORPHANS:,} per run, every run found all of them: "
                     f"{'yes' if orphans['all_found'] else 'NO'}; left on disk after the last run: "
                     f"{orphans['orphans_left']} (the task's runs moved theirs to the quarantine, the raw runs deleted).")
    if orphans_s3 and "task_delete" in orphans_s3:
        like = orphans_s3["task_delete"]["seconds"] / orphans_s3["raw"]["seconds"]
        notes.append(f"Orphans on S3, like for like: the task with `quarantine_days=0` (it deletes, as the raw action "
                     f"does) took {orphans_s3['task_delete']['seconds']:.1f} s = {like:.2f}x the raw action; with its "
                     f"default quarantine (each orphan copied, then deleted: a recoverable move) "
                     f"{orphans_s3['task']['seconds']:.1f} s, the row above.")
    if orphans_s3:
        notes.append(f"Orphans on S3 (SeaweedFS on 127.0.0.1, SQL catalog): {ORPHANS:,} per run, uploaded just before "
                     f"it (an object's age is its upload time: both sides take what is older than the run's start, "
                     f"the task with `orphan_older_than_hours=0, force_orphan_floor=True`); every run found all of "
                     f"them: {'yes' if orphans_s3['all_found'] else 'NO'} (found per run and side: "
                     f"{orphans_s3.get('orphans_per_run', '?')}: a count over {ORPHANS:,} is the table's oldest metadata "
                     f"file, out of the metadata log after 101 commits, which the first run took); left after the last run: "
                     f"{orphans_s3['orphans_left']}. Build: entries and {orphans_s3['files'] - 1:,} empty objects.")
    body = f"""
{markdown_table(["step", "table", "raw procedure s (submit incl.)", "task s (submit incl.)", "task / raw",
                 "snapshots expired / orphans found", "worker peak MB: bare submit", "the task on a small table",
                 "the task here (over its baseline)", "build s"], rows)}

{chr(10).join(f"- {n}" for n in notes)}

The worker's baseline is the same task on a small table: for orphans the table while it held one
file, for expiry a table of two snapshots (the task expires one). A bare spark-submit from a
process that imported the operators is shown beside it: the difference between the two is the
catalog client (PyIceberg, SQLAlchemy, PyArrow's file system) that every task opens, whatever the
table's size.

**Reading.** Both sides pay the same JVM start and Iceberg's own actions do the heavy part on
both (the task's expire is Iceberg's `ExpireSnapshots` action with the IDs resolved in the worker,
its clean is Iceberg's `DeleteOrphanFiles` listing with a delete function that deletes nothing,
then the never-orphan check and the quarantine moves). What the task adds: in the worker, reading
the table's metadata to resolve the retention; in Spark, naming each snapshot to expire (one py4j
call per ID) and re-checking refs against fresh metadata; for orphans, the reference check over
the catalog's other tables and a rename plus a manifest line per orphan instead of a delete. The
worker never reads a manifest, so its memory does not grow with the files. The snapshot list it
must read: the metadata of 10,000 snapshots is about 6 MB of JSON, which PyIceberg's model held
as about 64 MB (the task measured +133 MB over its baseline when it read it that way, twice); the
steps that decide from the history alone (expire, and clean under every policy but
KEEP_LATEST_FILE_VERSIONS) now read it lean (`core/table_digest.py`: each snapshot reduced to its
ID, parent, time and operation as the JSON is decoded), which left the history at a few MB; the
rest over the baseline is the decision itself, which lists every snapshot with its reason (log
and XCom).
"""
    write_section("expire_clean", "Expiry and orphan removal at scale, task against the raw procedures", command,
                  body, target=targets)


def spark_main(argv: list[str]) -> None:
    """Run as a Spark application (``history N TABLE...``), or the plain-procedure modes of raw_spark.py."""
    import json

    from pyspark.sql import SparkSession

    spark = SparkSession.builder.appName("bench-history").getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    out = history_app(spark, int(argv[2]), argv[3:])
    spark.stop()
    print(json.dumps(out))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1,000 snapshots and 100,000 files")
    parser.add_argument("--skip-expire", action="store_true")
    parser.add_argument("--skip-orphans", action="store_true")
    parser.add_argument("--s3", action="store_true", help="also orphan removal on S3 (SeaweedFS)")
    parser.add_argument("--s3-files", type=int, help="files of the S3 orphan part (default: as the local part)")
    args = parser.parse_args()
    snapshots, files = (1_000, 100_000) if args.quick else (10_000, 1_000_000)
    measured = {}
    if not args.skip_expire:
        with private_lake("expire-clean") as root:
            measured["expire"] = expire_part(snapshots, root / "lake")
            print(measured["expire"], flush=True)
    if not args.skip_orphans:
        with private_lake("orphans"):
            measured["orphans"] = orphans_part(files)
            print(measured["orphans"], flush=True)
    if args.s3:
        with private_lake("orphans-s3") as root:
            measured["orphans_s3"] = orphans_s3_part(args.s3_files or files, root)
            print(measured["orphans_s3"], flush=True)
    command = "python benchmarks/expire_clean.py" + (" --quick" if args.quick else "")
    report(measured, command)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "history":
        spark_main(sys.argv)
    else:
        main()
