"""The whole maintenance run on a table of small files, against a plain copy of its bytes.

A table of ``--files`` small files (default 2,000) made as ``make demo`` makes its table: small
commits (four days of them) dated 7 to 3 days ago, so the table's own 5-day retention expires about
half of the snapshots, and a dead writer's three files under it (orphans for clean); then Spark's
merge-on-read ``DELETE`` of one row in ten (position deletes for the rewrite to apply). The shipped
``lake_maintenance`` DAG with its defaults runs on it through ``dag.test()`` in a fresh process,
every step with real work: each task's share is read from its task instance. The limit: the plain
Arrow copy of the same data files (fastest of 3), as in "Rewrite vs the physical limit".

Run: ``python benchmarks/whole_run.py [--files N]`` (about 40 minutes on 2 cores, most of it PyIceberg
writing the 2,000 back-dated commits; ``--files 400``: 3 minutes). ``--cache DIR`` keeps the built
lake in DIR and runs every later call on a fresh copy of it (a minute at 2,000 files): for profiling;
the copy keeps the files' times, so the snapshots' ages grow from the day it was built.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from common import REPO, arrow_copy, lake_hook, markdown_table, private_lake, write_section

TABLE = "bench.whole"
DAYS = 4

DAG_RUN = """
import importlib.util, json, sys, time
from airflow.sdk import DAG
spec = importlib.util.spec_from_file_location("whole_run_dag", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
dag = next(v for v in vars(module).values() if isinstance(v, DAG) and v.dag_id == "lake_maintenance")
started = time.perf_counter()
run = dag.test(run_conf={"table": sys.argv[2]})
seconds = time.perf_counter() - started
tasks = {ti.task_id: {"seconds": (ti.end_date - ti.start_date).total_seconds() if ti.start_date and ti.end_date else 0.0,
                      "state": str(ti.state)} for ti in run.get_task_instances()}
xcom = {t: run.get_task_instance(t).xcom_pull(task_ids=t) for t in ("plan", "rewrite", "expire", "clean")}
print(json.dumps({"seconds": seconds, "state": str(run.state), "tasks": tasks, "xcom": xcom}, default=str))
"""


def build(hook, files: int) -> None:
    from airflow_lake_provider.core.contracts import SqlJobArgs
    from airflow_lake_provider.demo import build_demo_table
    from airflow_lake_provider.hooks.spark_job import LakeSparkJobHook

    hook.catalog.create_namespace_if_not_exists("bench")
    build_demo_table(hook.catalog, TABLE, days=DAYS, commits_per_day=files // DAYS, rows_per_commit=200)
    LakeSparkJobHook(lake_hook=hook).run(SqlJobArgs(statements=[
        f"ALTER TABLE {TABLE} SET TBLPROPERTIES ('write.delete.mode'='merge-on-read')",
        f"DELETE FROM {TABLE} WHERE event_id % 10 = 3"]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--no-doc", action="store_true", help="print only; do not write docs/benchmarks.md")
    parser.add_argument("--cache", type=Path, help="build the table once into this directory, then reuse copies")
    args = parser.parse_args()
    cache = args.cache.resolve() if args.cache else None
    with private_lake("whole", lake_home=cache / "lake" if cache else None):
        subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"], check=True, capture_output=True)
        if cache and (cache / "built").exists():  # the catalog holds absolute paths: restore in place
            shutil.rmtree(cache / "lake", ignore_errors=True)
            shutil.copytree(cache / "built", cache / "lake", copy_function=shutil.copy2)
        hook = lake_hook()
        if not (cache and (cache / "built").exists()):
            build(hook, args.files)
            if cache:
                shutil.copytree(cache / "lake", cache / "built", copy_function=shutil.copy2)
        table = hook.load_table(TABLE)
        paths = [task.file.file_path for task in table.scan().plan_files()]
        rows_before = table.scan().to_arrow().num_rows
        snapshots_before = len(table.snapshots())
        codec = table.properties.get("write.parquet.compression-codec", "gzip")
        with tempfile.TemporaryDirectory() as out:
            copy_s = min(arrow_copy(paths, Path(out) / f"copy-{run}", codec, partition_column="day") for run in range(3))
        print(f"{len(paths)} files, {snapshots_before} snapshots; Arrow copy {copy_s:.2f} s", flush=True)
        env = {**os.environ, "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags")}
        done = subprocess.run([sys.executable, "-c", DAG_RUN, str(REPO / "dags" / "lake_maintenance.py"), TABLE],
                              capture_output=True, text=True, env=env)
        if cache:  # the tasks' logs, for the profile
            (cache / "run.log").write_text(done.stdout + done.stderr)
        if done.returncode != 0:
            raise RuntimeError(done.stderr[-4000:])
        run = json.loads(done.stdout.strip().splitlines()[-1])
        table = hook.load_table(TABLE)
        assert run["state"] == "success", run["tasks"]
        assert table.scan().to_arrow().num_rows == rows_before
        files_after = sum(1 for _ in table.scan().plan_files())
        xcom = run["xcom"]
        assert xcom["rewrite"]["rewritten_data_files"] == len(paths) and xcom["expire"]["expired_snapshot_ids"]
        print(json.dumps({k: v for k, v in run.items() if k != "xcom"}), flush=True)

    total = run["seconds"]
    order = ["check_run", "acquire_lease", "plan", "rewrite", "expire", "clean", "release_lease"]
    tasks = sorted(run["tasks"].items(), key=lambda kv: order.index(kv[0]) if kv[0] in order else len(order))
    in_tasks = sum(t["seconds"] for _, t in tasks)
    rows = [[f"`{task}`", f"{t['seconds']:.1f}", f"{t['seconds'] / total:.0%}", f"{t['seconds'] / copy_s:.1f}"]
            for task, t in tasks]
    rows.append(["between the tasks (`dag.test()` scheduling)", f"{total - in_tasks:.1f}",
                 f"{(total - in_tasks) / total:.0%}", f"{(total - in_tasks) / copy_s:.1f}"])
    rows.append(["**the run**", f"**{total:.1f}**", "100%", f"**{total / copy_s:.1f}**"])
    ratio = total / copy_s
    biggest = sorted(tasks, key=lambda kv: -kv[1]["seconds"])[:2]
    expired_by, listed_by = xcom["expire"].get("expired_by"), xcom["clean"].get("orphans_listed_by")
    where = {"pyiceberg": "in the Airflow worker", "driver": "in its job's driver JVM, no Spark application",
             "spark_action": "by Iceberg's Spark action"}
    reading = (f"The rewrite is {run['tasks']['rewrite']['seconds'] / copy_s:.1f} x the copy. Expire ran "
               f"{where.get(expired_by, expired_by)}; clean listed the orphans {where.get(listed_by, listed_by)}. "
               f"The biggest shares: " + " and ".join(f"`{task}` ({t['seconds'] / total:.0%})" for task, t in biggest)
               + f"; the run is {ratio:.1f} x the copy (target 12 x). Airflow's own part, "
               f"{run['tasks']['check_run']['seconds'] + total - in_tasks:.1f} s, is `check_run` (its check takes "
               "milliseconds: the first task starts `dag.test()`'s in-process API) and the scheduling between the "
               "tasks; each of rewrite, expire and clean pays a spark-submit JVM start (about 1.5 s here).")
    body = f"""
`lake_maintenance` with its defaults (`dag.test()`, a fresh process) on a table made as `make demo` makes its
table: {len(paths):,} small data files from {snapshots_before:,} commits dated 7 to 3 days ago, one row in ten deleted
by merge-on-read position deletes, and a dead writer's three files under it. Every step had work: the rewrite
compacted {xcom['rewrite']['rewritten_data_files']:,} files into {files_after} ({xcom['rewrite']['rewriter']} rewriter),
expire removed {len(xcom['expire']['expired_snapshot_ids']):,} snapshots (the table's own retention), clean
quarantined {xcom['clean'].get('orphan_file_count', 0)} orphans. The limit is the plain Arrow copy of the same data files
({copy_s:.2f} s, fastest of 3).

{markdown_table(["task", "s", "share of the run", "x the copy"], rows)}

**Reading.** {reading}
"""
    print(body)
    if not args.no_doc:
        write_section("whole_run", "The whole maintenance run vs a plain copy", "python benchmarks/whole_run.py", body,
                      target={"goal": f"the whole `lake_maintenance` run on {len(paths):,} files, every step with "
                                      "work, <= 12 x the plain copy",
                              "measured": f"{ratio:.1f} x", "met": ratio <= 12})


if __name__ == "__main__":
    main()
