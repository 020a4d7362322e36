"""The maintenance group's outcome is the run's outcome, through the real scheduler.

One DAG run per outcome of ``before >> group >> after`` (tests/dags/lake_outcomes.py), all
triggered at once: success, nothing to do, plan refused, a step failing, the lease busy (wait then
free, wait timed out, skip, fail), dry run, approval rejected, approval timed out. For each: the
run's state, the state of ``after`` (the user's task after the group), whether the lease was given
back, and what the XCom says. The table is saved for docs/your-own-dag.md (``make docs``).
"""

from __future__ import annotations


import pytest

from airflow_lake_provider.core.lease import LeaseSettings
from airflow_lake_provider.hooks.lease import TableLeaseHook
from demo_data import create_events_table

OTHER_RUN = "elsewhere/other_dag/manual__1"


def _scenarios(namespace: str) -> list[dict]:
    """name, DAG, conf, the table it needs, and what a user must see."""
    hard = {"override_table_retention": True, "older_than": "0h", "retain_last": 1}
    return [
        {"name": "success", "dag": "lake_outcomes", "table": "small_files", "conf": hard,
         "run": "success", "after": "success", "release": "success"},
        {"name": "nothing to do (a healthy table)", "dag": "lake_outcomes", "table": "healthy",
         "conf": {"min_input_files": 1000}, "run": "success", "after": "success", "release": "success"},
        {"name": "plan refused", "dag": "lake_outcomes", "table": "equality_deletes",
         "conf": {"partition_filter": "event_id < 25", **hard},
         "run": "failed", "after": "upstream_failed", "release": "success"},
        {"name": "a step failing (expire: retain_last without the override)", "dag": "lake_outcomes",
         "table": "healthy", "conf": {"min_input_files": 1000, "retain_last": 1},
         "run": "failed", "after": "upstream_failed", "release": "success"},
        {"name": "lease busy, on_busy=wait, freed while waiting", "dag": "lake_outcomes", "table": "healthy",
         "conf": {"min_input_files": 1000}, "held": "until_rescheduled",
         "run": "success", "after": "success", "release": "success"},
        {"name": "lease busy, on_busy=wait, timed out", "dag": "lake_outcomes", "table": "healthy",
         "conf": {"min_input_files": 1000, "wait_timeout_seconds": 4}, "held": "throughout",
         "run": "failed", "after": "upstream_failed", "release": "upstream_failed"},
        {"name": "lease busy, on_busy=skip", "dag": "lake_outcomes", "table": "healthy",
         "conf": {"min_input_files": 1000, "on_busy": "skip"}, "held": "throughout",
         "run": "success", "after": "skipped", "release": "skipped"},
        {"name": "lease busy, on_busy=fail", "dag": "lake_outcomes", "table": "healthy",
         "conf": {"min_input_files": 1000, "on_busy": "fail"}, "held": "throughout",
         "run": "failed", "after": "upstream_failed", "release": "upstream_failed"},
        {"name": "dry run", "dag": "lake_outcomes", "table": "small_files", "conf": {"dry_run": True, **hard},
         "run": "success", "after": "success", "release": "success"},
        {"name": "approval rejected", "dag": "lake_outcomes_gated", "table": "overwritten",
         "conf": {"min_input_files": 1000, **hard}, "reject": True,
         "run": "success", "after": "skipped", "release": "success"},
        {"name": "approval timed out", "dag": "lake_outcomes_gated_timeout", "table": "overwritten",
         "conf": {"min_input_files": 1000, **hard},
         "run": "failed", "after": "upstream_failed", "release": "success"},
    ]


def _make_table(kind: str, name: str, lake_hook, spark) -> None:
    if kind == "healthy":  # one file per partition: nothing to compact; four snapshots to expire
        create_events_table(lake_hook.catalog, name, days=4, commits_per_day=1, rows_per_commit=10)
    else:
        create_events_table(lake_hook.catalog, name, days=2, commits_per_day=4, rows_per_commit=10)
    if kind == "overwritten":  # the small files are held only by older snapshots: expiry would delete them
        table = lake_hook.load_table(name)
        table.overwrite(table.scan().to_arrow())
    if kind == "equality_deletes":
        from equality_deletes import commit_equality_deletes

        commit_equality_deletes(spark, name, [{"event_id": 1}], partition_path="day=2026-01-01")


def _states(airflow, dag_id: str, run_id: str) -> dict[str, str]:
    response = airflow.api("GET", f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances", params={"limit": 100})
    return {ti["task_id"]: ti["state"] for ti in response.json()["task_instances"]}


def _lease_column(airflow, scenario: dict, states: dict[str, str], holder: str | None) -> str:
    if holder:
        return "still the other run's"
    if states.get("acquire_lease") != "success":
        return "none taken"
    lease = airflow.xcom(scenario["dag"], scenario["run_id"], "acquire_lease")
    return "none taken (a dry run changes nothing)" if lease["token"] is None else "taken, given back"


def _xcom_summary(airflow, scenario: dict, run_id: str, states: dict[str, str]) -> str:
    """What a user reads in the XCom of the run, in a few words."""
    dag_id = scenario["dag"]
    parts = []
    if states.get("plan") == "success":
        plan = airflow.xcom(dag_id, run_id, "plan")
        parts.append(f"plan: {plan['totals']['groups']} file groups")
    if states.get("plan") == "failed":
        parts.append(f"plan `refused`: \"{airflow.xcom(dag_id, run_id, 'plan', key='refused')[:60]}...\"")
    if states.get("rewrite") == "success":
        rewrite = airflow.xcom(dag_id, run_id, "rewrite")
        parts.append("rewrite: the same snapshot before and after (dry run)" if rewrite.get("dry_run") else
                     f"rewrite: `snapshot_id_before` -> `snapshot_id_after`, {len(rewrite['committed_snapshot_ids'])} "
                     "commit(s)")
    if states.get("expire") == "success":
        expire = airflow.xcom(dag_id, run_id, "expire")
        parts.append(f"expire: {len(expire['would_expire_snapshot_ids'])} snapshots would go (dry run)"
                     if expire.get("dry_run") else f"expire: {len(expire['expired_snapshot_ids'])} snapshots expired")
    if states.get("approve_expire") in ("success", "failed"):
        parts.append("approve_expire: rejected" if states.get("expire") == "skipped" else
                     "approve_expire: no answer in time")
    return "; ".join(parts) or "none"


@pytest.mark.slow
@pytest.mark.spark_submit
def test_every_outcome_of_the_group_is_the_runs_outcome(airflow, lake_hook, spark, namespace):
    import generated_pages

    leases = TableLeaseHook(lake_hook)
    scenarios = _scenarios(namespace)
    for i, scenario in enumerate(scenarios):
        scenario["table_name"] = name = f"{namespace}.t{i}"
        _make_table(scenario["table"], name, lake_hook, spark)
        scenario["current_before"] = lake_hook.load_table(name).current_snapshot().snapshot_id
        if scenario.get("held"):
            scenario["other"], _ = leases.try_acquire(name, OTHER_RUN, LeaseSettings(ttl_seconds=900))
    for dag_id in {s["dag"] for s in scenarios}:
        airflow.wait_for_dag(dag_id)
    for scenario in scenarios:
        response = airflow.api("POST", f"/dags/{scenario['dag']}/dagRuns",
                               json={"logical_date": None, "conf": {"table": scenario["table_name"], **scenario["conf"]}})
        assert response.ok, response.text
        scenario["run_id"] = response.json()["dag_run_id"]

    # The waiting run gives its worker slot back between asks (up_for_reschedule); then the other run lets go.
    waiting = next(s for s in scenarios if s.get("held") == "until_rescheduled")
    airflow.wait_for(lambda: _states(airflow, waiting["dag"], waiting["run_id"]).get("acquire_lease")
                     == "up_for_reschedule", 300, "the waiting acquire_lease to be rescheduled",
                     diagnose=lambda: airflow.task_states(waiting["dag"], waiting["run_id"]))
    leases.release(waiting["other"])
    # A person rejects the gated expiry through Airflow's HITL API.
    rejected = next(s for s in scenarios if s.get("reject"))
    gate = f"/dags/{rejected['dag']}/dagRuns/{rejected['run_id']}/taskInstances/approve_expire/-1/hitlDetails"
    airflow.wait_for(lambda: _states(airflow, rejected["dag"], rejected["run_id"]).get("approve_expire") == "awaiting_input",
                     300, "the approval gate to wait for a person",
                     diagnose=lambda: airflow.task_states(rejected["dag"], rejected["run_id"]))
    # A person answers after the scheduler took in the paused try's exit (airflow_stack.py says why).
    airflow.wait_for_executor_report(rejected["dag"], rejected["run_id"], "approve_expire")
    response = airflow.api("PATCH", gate, json={"chosen_options": ["Reject"], "params_input": {}})
    assert response.ok, response.text

    rows, wrong = [], []
    for scenario in scenarios:
        run = airflow.wait_for_run(scenario["dag"], scenario["run_id"], timeout=600)
        states = _states(airflow, scenario["dag"], scenario["run_id"])
        name = scenario["table_name"]
        lease_state = leases.load(name)[1]
        observed = {"run": run["state"], "after": states.get("after"), "release": states.get("release_lease")}
        expected = {key: scenario[key] for key in observed}
        if observed != expected:
            wrong.append((scenario["name"], observed, states))
            continue
        assert states["before"] == "success"
        # The lease: given back by this run, or, when the other run held it throughout, still the other run's.
        holder = lease_state.record.holder if lease_state.held else None
        assert holder == (OTHER_RUN if scenario.get("held") == "throughout" else None), scenario["name"]
        table = lake_hook.load_table(name)
        if scenario["name"] == "success":
            rewrite = airflow.xcom(scenario["dag"], scenario["run_id"], "rewrite")
            assert rewrite["snapshot_id_before"] == scenario["current_before"]
            assert table.current_snapshot().snapshot_id == rewrite["snapshot_id_after"]
            assert {s.snapshot_id for s in table.snapshots()} >= {rewrite["snapshot_id_after"]}
        elif scenario["run"] == "failed" or scenario["name"] in ("dry run", "approval rejected", "lease busy, on_busy=skip"):
            assert table.current_snapshot().snapshot_id == scenario["current_before"], scenario["name"]
            assert len(table.snapshots()) > 1, scenario["name"]  # nothing expired either
        rows.append({"scenario": scenario["name"], **observed,
                     "lease": _lease_column(airflow, scenario, states, holder),
                     "xcom": _xcom_summary(airflow, scenario, scenario["run_id"], states)})
    assert not wrong, "\n".join(map(str, wrong))
    generated_pages.save("task-group-outcomes", rows)


def outcome_table(rows: list[dict]) -> str:
    """The table of docs/your-own-dag.md, from what the test observed."""
    lines = ["| outcome | run state | task after the group | `release_lease` | lease | XCom |",
             "|---|---|---|---|---|---|"]
    for row in rows:
        lines.append(f"| {row['scenario']} | {row['run']} | {row['after']} | {row['release']} | {row['lease']} | "
                     f"{row['xcom']} |")
    return "\n".join(lines)
