"""A healthy table's maintenance run vs one raw procedure run; a fleet of tables vs rewriting every one.

1. **Healthy table** (2 files, nothing to compact): the maintenance steps as the
   ``lake_maintenance`` DAG runs them (plan; rewrite skipped on an empty plan; expire older
   than 120 h; clean keeping 10 commits), in this process, counting the spark-submits they
   start; then clean's orphan-file scan alone (the one step that always needs Spark). Against
   one plain spark-submit of ``CALL rewrite_data_files`` on the same table.
2. **Fleet**: 50 tables (``--tables N``), one in ten needing compaction. The
   ``lake_fleet_maintenance`` DAG through ``dag.test()`` (plans every table without a JVM,
   rewrites only those with work), against a loop of plain spark-submits of
   ``rewrite_data_files``, one per table, on identical copies (registered on the same metadata).

Run: ``python benchmarks/fleet.py [--tables 10]`` (50 tables: about 15 minutes on 2 cores,
most of it the loop).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

from common import (REPO, RESULTS, JvmCounter, context, lake_hook, machine, markdown_table, private_lake,
                    raw_spark_submit, timed, write_section)

REWRITE_OPTIONS = {"min-input-files": "5"}


def healthy_run(hook) -> dict:
    from demo_data import create_events_table
    from airflow_lake_provider.operators.clean import IcebergCleanPolicyOperator
    from airflow_lake_provider.operators.expire import IcebergExpireSnapshotsOperator
    from airflow_lake_provider.operators.plan import IcebergRewritePlanOperator
    from airflow_lake_provider.operators.rewrite import IcebergRewriteDataFilesOperator

    name = "bench.healthy"
    create_events_table(hook.catalog, name, days=2, commits_per_day=1, rows_per_commit=1000)

    def steps():
        plan = IcebergRewritePlanOperator(task_id="plan", table=name).execute(context("plan"))
        if plan["groups"]:  # the DAG skips the rewrite task on an empty plan
            IcebergRewriteDataFilesOperator(task_id="rewrite", table=name, plan=plan).execute(context("rewrite"))
        IcebergExpireSnapshotsOperator(task_id="expire", table=name, older_than="120h", override_table_retention=True).execute(context("expire"))
        IcebergCleanPolicyOperator(task_id="clean", table=name, remove_orphans=False).execute(context("clean"))
        return plan

    with JvmCounter() as run_jvms:
        run_s, plan = timed(steps)
    assert not plan["groups"]
    with JvmCounter() as orphan_jvms:
        orphan_s, _ = timed(IcebergCleanPolicyOperator(task_id="clean", table=name, orphan_older_than_hours=72).execute,
                            context("clean"))
    raw_s, raw = raw_spark_submit("procedure", json.dumps(REWRITE_OPTIONS), name)
    assert int(raw["results"][0]["rewritten_data_files_count"]) == 0
    return {"run_s": run_s, "run_jvms": run_jvms.count, "orphan_s": orphan_s, "orphan_jvms": orphan_jvms.count,
            "raw_s": raw_s}


DAG_RUN = """
import importlib.util, time
from airflow.sdk import DAG
from airflow_lake_provider.hooks import spark_job
count = {"jvms": 0}
original = spark_job._SparkSubmitHook.submit
def submit(hook, *a, **k):
    count["jvms"] += 1
    return original(hook, *a, **k)
spark_job._SparkSubmitHook.submit = submit
spec = importlib.util.spec_from_file_location("fleet_dag", sys.argv[1])
module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)
dag = next(v for v in vars(module).values() if isinstance(v, DAG))
started = time.perf_counter()
run = dag.test(run_conf={"tables": json.loads(sys.argv[2])})
seconds = time.perf_counter() - started
instances = run.get_task_instances()
states = [(ti.task_id, str(ti.state)) for ti in instances]
durations = {}
for ti in instances:  # where the run's time went, by task id (mapped instances summed)
    durations[ti.task_id] = durations.get(ti.task_id, 0.0) + (ti.end_date - ti.start_date).total_seconds()
print(json.dumps({"seconds": seconds, "jvms": count["jvms"], "state": str(run.state), "tasks": states,
                  "task_seconds": durations, "task_instances": len(instances)}))
"""


def _compacted(hook, names: list[str]) -> int:
    """Tables whose current snapshot is a compaction made by the fleet DAG."""
    return sum(1 for name in names
               if (hook.load_table(name).current_snapshot().summary or {}).get("airflow.dag-id") == "lake_fleet_maintenance")


#: The fleet DAG as it was before one task per step (one plan task and one Spark application per
#: table), run from git beside today's for the breakdown; the operators it uses are still shipped.
PER_TABLE_DAG_REVISION = "7cc2498"


def _run_dag(dag_file: Path, names: list[str]) -> dict:
    """``dag.test()`` of a fleet DAG file on ``names``, in a fresh process: its time, JVMs and tasks.
    The file's folder is the DAGs folder (``dag.test()`` records the DAG from there)."""
    env = {**os.environ, "AIRFLOW__CORE__DAGS_FOLDER": str(dag_file.parent)}
    out = subprocess.run([sys.executable, "-c", "import json, sys\n" + DAG_RUN, str(dag_file), json.dumps(names)],
                         capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-4000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def fleet(hook, n_tables: int, root: Path, *, skip_loop: bool = False, per_table: bool = True) -> dict:
    """Identical copies of the fleet (registered on the same metadata) for each contender."""
    from demo_data import create_events_table

    names = []
    for i in range(n_tables):
        name = f"bench.fleet_{i:02d}"
        busy = i % 10 == 0  # one table in ten has 16 small files
        create_events_table(hook.catalog, name, days=2, commits_per_day=8 if busy else 1, rows_per_commit=10 if busy else 500)
        for copy in ("loop", "pertable"):
            hook.catalog.register_table(f"bench.{copy}_{i:02d}", hook.load_table(name).metadata_location)
        names.append(name)

    subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"], check=True, capture_output=True, env=os.environ.copy())
    figures = {"busy": sum(1 for i in range(n_tables) if i % 10 == 0)}
    if per_table:  # the earlier shape first, on its own copies
        old = root / "per-table" / "lake_fleet_maintenance.py"
        old.parent.mkdir(parents=True)
        old.write_text(subprocess.run(["git", "-C", str(REPO), "show",
                                       f"{PER_TABLE_DAG_REVISION}:dags/lake_fleet_maintenance.py"],
                                      check=True, capture_output=True, text=True).stdout)
        copies = [f"bench.pertable_{i:02d}" for i in range(n_tables)]
        per = _run_dag(old, copies)
        figures["per_table"] = {"seconds": per["seconds"], "jvms": per["jvms"], "state": per["state"],
                                "task_seconds": per["task_seconds"], "task_instances": per["task_instances"],
                                "compacted": _compacted(hook, copies)}
    current = root / "dags" / "lake_fleet_maintenance.py"
    current.parent.mkdir()
    current.symlink_to(REPO / "dags" / "lake_fleet_maintenance.py")
    dag = _run_dag(current, names)
    figures.update({"dag_s": dag["seconds"], "dag_jvms": dag["jvms"], "dag_state": dag["state"],
                    "dag_rewritten": _compacted(hook, names), "task_seconds": dag["task_seconds"],
                    "task_instances": dag["task_instances"]})

    loop_s = loop_busy_s = 0.0
    loop_rewritten = 0
    for i in range(0 if skip_loop else n_tables):
        seconds, raw = raw_spark_submit("procedure", json.dumps(REWRITE_OPTIONS), f"bench.loop_{i:02d}")
        loop_s += seconds
        loop_busy_s += seconds if i % 10 == 0 else 0.0
        loop_rewritten += int(int(raw["results"][0]["rewritten_data_files_count"]) > 0)
        print(f"loop {i + 1}/{n_tables}: {loop_s:.0f} s", flush=True)
    figures.update({"loop_s": loop_s, "loop_busy_s": loop_busy_s, "loop_jvms": n_tables,
                    "loop_rewritten": loop_rewritten})
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=50)
    parser.add_argument("--skip-fleet", action="store_true")
    parser.add_argument("--profile", action="store_true",
                        help="run the fleet DAGs only (no loop) and print where their time went; writes nothing")
    parser.add_argument("--no-per-table", action="store_true", help="leave out the earlier per-table DAG")
    parser.add_argument("--render", action="store_true", help="rewrite the doc sections from the last run's figures")
    args = parser.parse_args()
    command = "python benchmarks/fleet.py" + (f" --tables {args.tables}" if args.tables != 50 else "")

    figures = RESULTS / "figures" / "fleet.json"
    if args.render:  # rewrite the sections from the figures of the last run, measuring nothing
        saved = json.loads(figures.read_text())
        render(saved["command"], saved["healthy"], saved.get("fleet"), saved.get("tables", 50), saved["measured_at"])
        return
    started = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    if args.profile:
        with private_lake("fleet") as root:
            hook = lake_hook()
            hook.catalog.create_namespace_if_not_exists("bench")
            print(json.dumps(fleet(hook, args.tables, root, skip_loop=True, per_table=not args.no_per_table), indent=1))
        return
    with private_lake("fleet") as root:
        hook = lake_hook()
        hook.catalog.create_namespace_if_not_exists("bench")
        h = healthy_run(hook)
        print(h, flush=True)
        f = None if args.skip_fleet else fleet(hook, args.tables, root, per_table=not args.no_per_table)
        print(f, flush=True)
    figures.parent.mkdir(parents=True, exist_ok=True)
    figures.write_text(json.dumps({"command": command, "tables": args.tables, "healthy": h, "fleet": f,
                                   "measured_at": f"{started} ({machine()})"}, indent=1))
    render(command, h, f, args.tables)


def render(command: str, h: dict, f: dict | None, tables: int, measured_at: str | None = None) -> None:
    """The two doc sections from the figures (``measured_at`` when they come from a saved run)."""
    write_section("healthy", "A healthy table's maintenance run vs one raw procedure run", command, f"""
{markdown_table(["run", "wall s", "JVMs started", "ratio to the raw run"], [
    ["plan, (rewrite skipped), expire, clean without orphan scan", f"{h['run_s']:.2f}", h["run_jvms"],
     f"**{h['run_s'] / h['raw_s']:.3f}**"],
    ["clean's orphan-file scan (72 h floor)", f"{h['orphan_s']:.1f}", h["orphan_jvms"], f"{h['orphan_s'] / h['raw_s']:.2f}"],
    ["raw spark-submit of `CALL rewrite_data_files` (finds nothing)", f"{h['raw_s']:.1f}", 1, "1"],
])}

**Reading.** On a healthy table every step decides from metadata in the worker (metadata file,
manifest list, manifests): milliseconds, growing with the table's file count (see planning),
and no JVM. The raw procedure pays a JVM start to find the same nothing. The one step that
needs Spark whatever the table's state is clean's orphan-file scan (it lists the table's
storage and compares it with every snapshot's files): run it on a slower cadence than
compaction (`remove_orphans=False` turns it off for a run).
""", measured_at=measured_at, target={"goal": "healthy table's run without a JVM <= 0.1 x one raw procedure run",
         "measured": f"{h['run_s'] / h['raw_s']:.3f} x ({h['run_jvms']} JVMs)",
         "met": h["run_s"] / h["raw_s"] <= 0.1 and h["run_jvms"] == 0})
    if f is None:
        return
    loop = f["loop_s"]
    rows = []
    if f.get("per_table"):
        per = f["per_table"]
        rows.append([f"`lake_fleet_maintenance` as of {PER_TABLE_DAG_REVISION} (a plan task and a Spark application "
                     f"per table) via `dag.test()` (run {per['state']})", f"{per['seconds']:.1f}",
                     per["task_instances"], per["jvms"], per["compacted"], f"{per['seconds'] / loop:.3f}"])
    rows += [
        [f"`lake_fleet_maintenance` now (one task per step, one Spark application per batch) via `dag.test()` "
         f"(run {f['dag_state']})", f"{f['dag_s']:.1f}", f.get("task_instances", "-"), f["dag_jvms"],
         f["dag_rewritten"], f"**{f['dag_s'] / loop:.3f}**"],
        ["loop: a raw spark-submit of `rewrite_data_files` per table", f"{loop:.1f}", "-", f["loop_jvms"],
         f["loop_rewritten"], "1"],
    ]
    if f.get("loop_busy_s"):
        rows.append([f"the loop's submits for the {f['busy']} tables needing work only (paying for them alone)",
                     f"{f['loop_busy_s']:.1f}", "-", f["busy"], f["busy"], f"{f['loop_busy_s'] / loop:.3f}"])
    breakdown = []
    for label, seconds in (("earlier", (f.get("per_table") or {}).get("task_seconds")), ("now", f.get("task_seconds"))):
        if seconds:
            top = sorted(seconds.items(), key=lambda item: -item[1])
            breakdown.append(f"- {label}: " + ", ".join(f"`{task}` {value:.1f} s" for task, value in top))
    write_section("fleet", f"A fleet of {tables} tables, {f['busy']} needing work", command, f"""
{markdown_table(["run", "wall s", "task runs", "JVMs started", "tables compacted", "ratio to the loop"], rows)}

Where each DAG's time went (sum of its task instances' run times, mapped ones added up; the rest
of the wall time is `dag.test()` scheduling between tasks):

{chr(10).join(breakdown)}

**Reading.** The loop pays a JVM start for every table. The earlier DAG's time went mostly to
its rewrites, one spark-submit per table with work (a JVM start each, more than the compaction
of 16 small files itself), then to one Airflow task run per table for planning (the PyIceberg
plans take milliseconds; a task run's rendering, state and XCom rows do not, and in a real
deployment each is a process too) and to scheduling between its many task runs. Now the tables
with work share one Spark application (the `batch` job runs their rewrites one after another:
one JVM start plus the rewrites), all plans are one task, and the run has a handful of task runs.
`list_tables` costs the same in both: it is the first task of the run and carries `dag.test()`'s
start-up. The five tables needing work, each with its own raw submit, cost the loop's last row:
the DAG now maintains the whole fleet for less than that. Under a real scheduler the batches of
`tables_per_application` run side by side up to the pool's bound.
""", measured_at=measured_at, target={"goal": "fleet DAG <= 0.15 x rewrite-everything loop",
                                      "measured": f"{f['dag_s'] / loop:.3f} x", "met": f["dag_s"] / loop <= 0.15})


if __name__ == "__main__":
    main()
