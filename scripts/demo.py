"""`make demo`: a table with many small files and merge-on-read deletes in the embedded lake,
then the `lake_maintenance` DAG on it, then a before/after summary.

Safe to run twice: the demo table is rebuilt from scratch each time.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEMO_TABLE = "demo.events"


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


def _run_maintenance(dag_file: Path, table: str) -> list[str]:
    """Run the DAG in-process with dag.test() and return the snapshot ID chain from XCom."""
    import importlib.util

    from airflow.sdk import DAG

    spec = importlib.util.spec_from_file_location("lake_maintenance_dag", dag_file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    dag = next(v for v in vars(module).values() if isinstance(v, DAG))
    print(f"demo: running DAG {dag.dag_id!r} on {table} (dag.test(), one Spark job per heavy task)...")
    run = dag.test(run_conf={"table": table, "orphan_older_than_hours": 72})
    if run.state != "success":
        raise SystemExit(f"demo: the DAG run ended {run.state}; see the log above.")
    lines = []
    for task_id in ("plan", "rewrite", "expire", "clean"):
        value = run.get_task_instance(task_id).xcom_pull(task_ids=task_id) or {}
        parts = []
        for key, item in value.items():
            if "snapshot" not in key:
                continue
            if isinstance(item, list):
                shown = ", ".join(str(i) for i in item[:2]) + (f", ... ({len(item)} in all)" if len(item) > 2 else "")
                parts.append(f"{key}=[{shown}]")
            else:
                parts.append(f"{key}={item}")
        lines.append(f"{task_id:<8} " + "  ".join(parts))
    return lines


def run_demo(hook, catalog_label: str) -> int:
    """Build the demo table through ``hook``, run the maintenance DAG on it, print before and after."""
    from demo_data import create_events_table
    from airflow_lake_provider.core.health import table_health
    from airflow_lake_provider.hooks.spark_job import LakeSparkJobHook
    from airflow_lake_provider.core.contracts import SqlJobArgs

    print(f"demo: {catalog_label} (catalog '{hook.config.name}')")
    create_events_table(hook.catalog, DEMO_TABLE, days=4, commits_per_day=40, rows_per_commit=40)
    print("demo: deleting some rows with merge-on-read deletes (one Spark job)...")
    LakeSparkJobHook(lake_hook=hook).run(SqlJobArgs(statements=[f"DELETE FROM {hook.config.name}.{DEMO_TABLE} WHERE event_id % 10 = 3"])
    )
    before = table_health(hook.load_table(DEMO_TABLE)).to_dict()
    print(_fmt_health("before", before))

    _ensure_airflow_db()
    chain = _run_maintenance(REPO / "dags" / "lake_maintenance.py", DEMO_TABLE)
    after = table_health(hook.load_table(DEMO_TABLE)).to_dict()
    print()
    print(_fmt_health("before", before))
    print(_fmt_health("after", after))
    print("snapshot chain from XCom:")
    for line in chain:
        print(f"  {line}")
    return 0


def main() -> int:
    from airflow_lake_provider.hooks.lake import IcebergLakeHook

    hook = IcebergLakeHook()
    return run_demo(hook, f"embedded lake at {hook.config.uri}")


if __name__ == "__main__":
    sys.exit(main())
