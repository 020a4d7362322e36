"""`make demo`: a table with many small files and merge-on-read deletes in the embedded lake,
then the `lake_maintenance` DAG on it, then a before/after summary.

Safe to run twice: the demo table is rebuilt from scratch each time.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _ensure_airflow_db() -> None:
    home = Path(os.environ["AIRFLOW_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    marker = home / ".lake-demo-db-ready"
    if not marker.exists():
        print("demo: initialising the Airflow metadata database (first run only)...")
        subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"], check=True, capture_output=True)
        marker.touch()


def _fmt_health(label: str, health: dict) -> str:
    return (
        f"{label:<7} data files {health['data_files']:>5}  avg size {health['average_file_bytes']:>10,} B  "
        f"delete files {health['delete_files']:>4}  snapshots {health['snapshots']:>4}  records {health['records']:>6} (deleted {health['delete_records']})"
    )


@contextlib.contextmanager
def _output_to(log: Path):
    """Send everything the run prints (the task logs, Spark's) to ``log``; the demo keeps its own lines."""
    sys.stdout.flush(), sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with log.open("w") as sink:
        os.dup2(sink.fileno(), 1), os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            sys.stdout.flush(), sys.stderr.flush()
            os.dup2(saved[0], 1), os.dup2(saved[1], 2)


#: A record of the captured run: time, level, then the message, its logger and key=value pairs.
_RECORD = re.compile(r"^(?P<timestamp>\d{4}-\d\d-\d\dT[\d:.]+Z) \[(?P<level>\w+)\s*\] ")
#: The message and its logger (the last ``[dotted.name]``; a message may hold brackets of its own).
_EVENT = re.compile(r"^(?P<event>.*\S)\s+\[(?P<logger>[\w.]+)\](?: .*)?$", re.S)
_TASK_START = re.compile(r"^\[DAG TEST\] starting task_id=(?P<task_id>\S+)")


def _task_logs(log: Path) -> dict[str, list[dict]]:
    """Each task's records in the captured run (dag.test() marks where a task starts and ends), as the
    structured lines of Airflow's task logs: ``{timestamp, level, event, logger}``."""
    tasks: dict[str, list[dict]] = {}
    current: list[dict] | None = None
    for line in log.read_text().splitlines():
        record = _RECORD.match(line)
        if record is None:
            if current:  # a message's next line
                current[-1]["event"] += "\n" + line
            continue
        text = line[record.end():]
        if (start := _TASK_START.match(text)) is not None:
            current = tasks.setdefault(start["task_id"], [])
        elif text.startswith("[DAG TEST] end task"):
            current = None
        elif current is not None:
            current.append({"timestamp": record["timestamp"], "level": record["level"], "event": text})
    for records in tasks.values():
        for item in records:
            if (parts := _EVENT.match(item["event"])) is not None:
                item.update(event=parts["event"], logger=parts["logger"])
    return tasks


def _keep_task_logs(run, log: Path) -> None:
    """Write each task's part of the run's log where Airflow's UI reads task logs: dag.test() runs the
    tasks in this process, which writes no task log of its own."""
    from airflow.configuration import conf
    from airflow.utils.log.file_task_handler import FileTaskHandler

    folder = conf.get("logging", "base_log_folder")
    handler = FileTaskHandler(base_log_folder=folder)
    records = _task_logs(log)
    for ti in run.get_task_instances():
        path = Path(folder) / handler._render_filename(ti, ti.try_number)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(item) + "\n" for item in records.get(ti.task_id, ())))


def _run_maintenance(dag_file: Path, table: str, log: Path) -> list[str]:
    """Run the DAG in-process with dag.test(), its logs into ``log``; the tasks' states and what each said."""
    import importlib.util
    import time

    from airflow.sdk import DAG

    spec = importlib.util.spec_from_file_location("lake_maintenance_dag", dag_file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    dag = next(v for v in vars(module).values() if isinstance(v, DAG))
    print(f"demo: running DAG {dag.dag_id!r} on {table} with its defaults (task logs: {log})...")
    started = time.monotonic()
    with _output_to(log):
        run = dag.test(run_conf={"table": table})
    states = {ti.task_id: ti.state for ti in sorted(run.get_task_instances(), key=lambda ti: str(ti.start_date))}
    print(f"demo: the run ended {run.state} in {time.monotonic() - started:.0f} s: "
          + ", ".join(f"{task} {state}" for task, state in states.items()))
    _keep_task_logs(run, log)
    if run.state != "success":
        raise SystemExit(f"demo: see {log} for why.")
    from airflow_lake_provider.plugins.lake_health import said_in_run

    return [sentence for said in said_in_run(dag.dag_id, run.run_id).values() for sentence in said]


def run_demo(hook, catalog_label: str) -> int:
    """Build the demo table through ``hook``, run the maintenance DAG on it, print before and after."""
    from airflow_lake_provider.core.contracts import SqlJobArgs
    from airflow_lake_provider.core.health import table_health
    from airflow_lake_provider.demo import DEMO_TABLE, build_demo_table
    from airflow_lake_provider.hooks.spark_job import LakeSparkJobHook

    print(f"demo: {catalog_label} (catalog '{hook.config.name}')")
    log = Path(os.environ["AIRFLOW_HOME"]) / "demo-run.log"
    _, orphans, history = build_demo_table(hook.catalog)
    print(f"demo: wrote {DEMO_TABLE}: {history} (python -m airflow_lake_provider.demo)")
    print("demo: deleting every tenth row with merge-on-read deletes (one Spark job)...")
    with _output_to(log.with_name("demo-setup.log")):
        LakeSparkJobHook(lake_hook=hook).run(SqlJobArgs(statements=[
            f"DELETE FROM {hook.config.name}.{DEMO_TABLE} WHERE event_id % 10 = 3"]))
    if orphans:
        print(f"demo: {len(orphans)} files of a writer that died 4 days ago lie under the table (orphans)")
    before = table_health(hook.load_table(DEMO_TABLE)).to_dict()

    _ensure_airflow_db()
    said = _run_maintenance(REPO / "dags" / "lake_maintenance.py", DEMO_TABLE, log)
    after = table_health(hook.load_table(DEMO_TABLE)).to_dict()
    print("What the steps said (the same sentences are in their task logs and on the Lake health page):")
    for message in said:
        print("  " + message.replace("\n", "\n  "))
    print(_fmt_health("before", before))
    print(_fmt_health("after", after))
    print(f"Next: the run and its task logs in the UI (`AIRFLOW_HOME={os.environ['AIRFLOW_HOME']} airflow api-server`,\n"
          "then DAG lake_maintenance), the table on its Lake health page (Browse), the settings in docs/operators/.")
    return 0


def main() -> int:
    from airflow_lake_provider.hooks.lake import IcebergLakeHook

    hook = IcebergLakeHook()
    return run_demo(hook, f"embedded lake at {hook.config.uri}")


if __name__ == "__main__":
    sys.exit(main())
