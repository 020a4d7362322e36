"""OpenLineage: the steps' events name the table as OpenLineage names Iceberg tables, carry the
maintenance figures, link the Spark job to the task, hold no secret, and nothing breaks without
the provider."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from demo_data import create_events_table

from airflow_lake_provider.core.naming import location_dataset

_RUN = """
import importlib.util, json, os, sys
path = os.path.join(os.environ["AIRFLOW__CORE__DAGS_FOLDER"], "lake_lineage.py")
spec = importlib.util.spec_from_file_location("lake_lineage_dag", path)
module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)
run = module.dag.test(run_conf={"table": sys.argv[1]})
# A file, not stdout: the lineage listener's thread logs to stdout and can land inside a printed line.
with open(sys.argv[2], "w") as out:
    json.dump({"state": str(run.state), "xcom": {t: run.get_task_instance(t).xcom_pull(task_ids=t)
                                                 for t in ("plan", "rewrite")}}, out, default=str)
"""


def _run_dag(table: str, env: dict, result_file: Path) -> tuple[dict, str]:
    done = subprocess.run([sys.executable, "-c", _RUN, table, str(result_file)], capture_output=True, text=True,
                          env=env, timeout=600)
    output = done.stdout + done.stderr
    assert done.returncode == 0 and result_file.exists(), output[-5000:]
    return json.loads(result_file.read_text()), output


@pytest.mark.spark_submit
def test_events_name_the_table_carry_the_figures_and_link_the_spark_job(lake_hook, namespace, tmp_path, airflow_db):
    name = f"{namespace}.events"
    table = create_events_table(lake_hook.catalog, name, days=1, commits_per_day=4, rows_per_commit=5)
    events_file = tmp_path / "openlineage.jsonl"
    # By default the listener emits from a forked child, which inherits the task's connection to its
    # supervisor: under dag.test() the START child never returned and was killed after execution_timeout
    # (each task waited it out, no START event). execute_in_thread (docs/lineage.md) emits in-process.
    env = {**os.environ, "AIRFLOW__OPENLINEAGE__NAMESPACE": "lake-tests", "AIRFLOW__OPENLINEAGE__EXECUTION_TIMEOUT": "120",
           "AIRFLOW__OPENLINEAGE__EXECUTE_IN_THREAD": "True",
           "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps({"type": "file", "log_file_path": str(events_file),
                                                          "append": True})}
    outcome, output = _run_dag(name, env, tmp_path / "result.json")
    (tmp_path / "dag-test-output.txt").write_text(output)
    assert outcome["state"] == "success", output[-5000:]
    xcom = outcome["xcom"]

    deadline = time.monotonic() + 60  # events may be written by a forked emitter
    events: list[dict] = []
    while time.monotonic() < deadline:
        events = [json.loads(line) for line in events_file.read_text().splitlines()] if events_file.exists() else []
        if sum(1 for e in events if e["eventType"] == "COMPLETE" and e["job"]["name"].endswith(".rewrite")) >= 1:
            break
        time.sleep(1)
    by_task = {(e["job"]["name"].rsplit(".", 1)[-1], e["eventType"]): e for e in events}
    assert {("plan", "START"), ("plan", "COMPLETE"), ("rewrite", "START"), ("rewrite", "COMPLETE")} <= set(by_task), \
        sorted(by_task)

    # The table, named by its location, with a symlink to its catalog name.
    expected = location_dataset(table.location())
    rewrite = by_task[("rewrite", "COMPLETE")]
    (output_dataset,) = rewrite["outputs"]
    assert (output_dataset["namespace"], output_dataset["name"]) == (expected.namespace, expected.name)
    (symlink,) = output_dataset["facets"]["symlinks"]["identifiers"]
    assert symlink["name"] == name and symlink["type"] == "TABLE"
    assert [(d["namespace"], d["name"]) for d in rewrite["inputs"]] == [(expected.namespace, expected.name)]
    assert by_task[("plan", "COMPLETE")]["outputs"] == []  # the plan only reads
    start = by_task[("rewrite", "START")]  # named before the step read anything: the same dataset
    assert [(d["namespace"], d["name"]) for d in start["outputs"]] == [(expected.namespace, expected.name)]

    # The facet carries the step's figures, as its XCom has them.
    facet = rewrite["run"]["facets"]["lakeMaintenance"]
    assert facet["step"] == "rewrite" and facet["table"] == name
    figures = facet["figures"]
    assert figures["snapshot_id_before"] == xcom["rewrite"]["snapshot_id_before"] == xcom["plan"]["snapshot_id"]
    assert figures["snapshot_id_after"] == xcom["rewrite"]["snapshot_id_after"]
    assert figures["rewritten_data_files"] == 4 and figures["before"]["data_files"] == 4
    assert figures["after"]["data_files"] == 1

    # Spark's driver got the parent job: this task's OpenLineage job and run.
    run_id = rewrite["run"]["runId"]
    assert f"Its OpenLineage parent: job lake-tests/lake_lineage.rewrite, run {run_id}." in output

    # No catalog secret anywhere in the events (the embedded lake has none; check the connection's shape).
    assert "password" not in events_file.read_text().lower()


def test_without_the_provider_the_steps_run_unchanged(lake_hook, namespace):
    """A subprocess where importing the OpenLineage provider fails: lineage is None, no Spark parent settings."""
    probe = """
import sys, builtins
real = builtins.__import__
def refuse(name, *args, **kwargs):
    if name.startswith("airflow.providers.openlineage") or name.startswith("openlineage"):
        raise ImportError(f"{name} is not installed")
    return real(name, *args, **kwargs)
builtins.__import__ = refuse
from airflow_lake_provider import lineage
from airflow_lake_provider.operators.plan import IcebergRewritePlanOperator
assert not lineage.openlineage_enabled()
assert lineage.spark_parent_properties({"ti": object()}) == {}
op = IcebergRewritePlanOperator(task_id="plan", table=sys.argv[1], min_input_files=2)
assert op.get_openlineage_facets_on_start() is None
sys.path.insert(0, sys.argv[2])
from lake_checks import FakeTaskInstance
result = op.execute({"ti": FakeTaskInstance(task_id="plan"), "params": {}})
print("PLANNED", result["totals"]["files"])
"""
    name = f"{namespace}.events"
    create_events_table(lake_hook.catalog, name, days=1, commits_per_day=3, rows_per_commit=5)
    done = subprocess.run([sys.executable, "-c", probe, name, str(Path(__file__).parent)], capture_output=True, text=True, env=os.environ.copy(),
                          timeout=300)
    assert done.returncode == 0 and "PLANNED 3" in done.stdout, (done.stdout + done.stderr)[-4000:]
