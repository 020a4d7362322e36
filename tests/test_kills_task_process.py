"""SIGKILL the Airflow task process itself, once in each of the four steps, on a real Airflow.

The ``airflow`` fixture's scheduler runs ``lake_kill_drill`` (plan on the Spark engine, rewrite,
expire, clean; two retries each). While a step's Spark application runs, its task process (the
parent of spark-submit) is killed outright, as the OOM killer or a lost worker would: no
``on_kill`` runs. Then: its spark-submit dies with it (the parent-death signal the job hook sets),
Airflow retries the step, the retry converges, and the table reads the same rows throughout.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time

import psutil
import pytest

import generated_pages
from airflow_lake_provider.hooks.spark_job import dies_with_task
from demo_data import create_events_table
from lake_checks import age_files, job_processes, live_files, table_fingerprint

STEPS = ("plan", "rewrite", "expire", "clean")
#: Seconds after the step's job starts (its Python driver appears under spark-submit): inside the job
#: on a fast machine and a slow one, where a fixed time after spark-submit appears was not.
KILL_AFTER_DRIVER = 0.5


def running_task(airflow, run_id: str) -> str | None:
    instances = airflow.api("GET", f"/dags/lake_kill_drill/dagRuns/{run_id}/taskInstances").json()["task_instances"]
    return next((t["task_id"] for t in instances if t["state"] == "running"), None)


def kill_task_process(airflow, run_id: str, step: str, timeout: float = 240) -> dict:
    """Wait for ``step``'s spark-submit, then SIGKILL its parent, the task process."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        # This Airflow's own: other Spark jobs on a shared machine must not be taken for the step's.
        submits = job_processes(spark_submit_only=True, under=airflow.scheduler_pid)
        if submits and running_task(airflow, run_id) == step:
            submit = submits[0]
            while submit.is_running() and not job_processes(under=submit.pid, drivers_only=True):
                time.sleep(0.05)
            time.sleep(KILL_AFTER_DRIVER)
            try:
                task_process = submit.parent()
                if task_process is None or not submit.is_running():
                    raise psutil.NoSuchProcess(submit.pid)
                os.kill(task_process.pid, signal.SIGKILL)
            except (psutil.NoSuchProcess, ProcessLookupError):
                continue  # it finished meanwhile: try the next submission (none for this step: timeout)
            gone, alive = psutil.wait_procs([submit], timeout=30)
            return {"task": step, "how": "Airflow task process (SIGKILL, no on_kill)",
                    "at": f"{KILL_AFTER_DRIVER:g}s after its job started",
                    "state": "spark-submit died with it" if not alive else "spark-submit OUTLIVED the task"}
        time.sleep(0.2)
    raise TimeoutError(f"{step}'s Spark application never ran:\n{airflow.task_states('lake_kill_drill', run_id)}")


def _child_outlives_its_killed_parent(preexec_fn) -> bool:
    """Fork a 'task process' that starts a child as the job hook does, SIGKILL it: is the child alive?"""
    read_end, write_end = os.pipe()
    task_pid = os.fork()
    if task_pid == 0:  # the task process
        try:
            child = subprocess.Popen(["sleep", "60"], start_new_session=True, preexec_fn=preexec_fn())
            os.write(write_end, str(child.pid).encode())
            time.sleep(60)
        finally:
            os._exit(0)
    child = psutil.Process(int(os.read(read_end, 32)))
    os.kill(task_pid, signal.SIGKILL)
    os.waitpid(task_pid, 0)
    time.sleep(0.5)
    try:
        alive = child.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
    if alive:
        child.kill()
    return alive


def test_spark_submit_dies_with_the_task_process():
    """The mechanism, without Spark: bound by the job hook's preexec function, the child goes with a
    killed parent; unbound (the control), it lives on."""
    assert _child_outlives_its_killed_parent(lambda: None)
    assert not _child_outlives_its_killed_parent(dies_with_task)


@pytest.mark.spark_submit
@pytest.mark.slow
def test_killing_the_task_process_of_each_step_loses_nothing_and_the_retry_converges(airflow, lake_hook, namespace):
    name = f"{namespace}.events"
    create_events_table(lake_hook.catalog, name, days=2, commits_per_day=12, rows_per_commit=10)
    table = lake_hook.load_table(name)
    # As old as production tables are: a metadata file in the table's log, past clean's floor, so its
    # Spark job lists orphans (and has a task process to kill); being referenced, it is never taken.
    age_files([table.metadata.metadata_log[0].metadata_file], hours=72)
    fingerprint = table_fingerprint(table)
    files_before = live_files(table)["DATA"]
    airflow.wait_for_dag("lake_kill_drill")

    response = airflow.api("POST", "/dags/lake_kill_drill/dagRuns", json={"logical_date": None, "conf": {"table": name}})
    assert response.status_code == 200, response.text
    run_id = response.json()["dag_run_id"]
    kills = []
    for step in STEPS:
        kills.append(kill_task_process(airflow, run_id, step))
        assert table_fingerprint(lake_hook.load_table(name)) == fingerprint  # read back after every kill
    run = airflow.wait_for_run("lake_kill_drill", run_id, timeout=900)
    assert run["state"] == "success", airflow.task_states("lake_kill_drill", run_id)

    assert [k["state"] for k in kills] == ["spark-submit died with it"] * len(STEPS), kills
    instances = airflow.api("GET", f"/dags/lake_kill_drill/dagRuns/{run_id}/taskInstances").json()["task_instances"]
    assert {t["task_id"]: t["try_number"] for t in instances} == dict.fromkeys(STEPS, 2)  # killed once, retried once

    table = lake_hook.load_table(name)
    assert table_fingerprint(table) == fingerprint
    assert live_files(table)["DATA"] < files_before
    rewrite = airflow.xcom("lake_kill_drill", run_id, "rewrite")
    history = [s.snapshot_id for s in table.snapshots()]
    assert rewrite["snapshot_id_after"] in history
    assert table.current_snapshot().snapshot_id == rewrite["snapshot_id_after"]  # expire and clean keep it current
    assert not job_processes(spark_submit_only=True, under=airflow.scheduler_pid)
    generated_pages.save("kills-task-process", {"hits": kills})
