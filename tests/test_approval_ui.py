"""Approval for big deletions in a real browser (Debian's chromium driven by playwright) against the
real Airflow of the ``airflow`` fixture: a run of ``lake_approval`` (tests/dags) pauses at its
expiry's approval gate; the Required Actions page shows what would go; Approve expires the
snapshots, Reject (a second run, a second table) leaves every snapshot and file where it was."""

from __future__ import annotations

import pytest

from demo_data import create_events_table
from lake_checks import files_on_disk, table_fingerprint
from browser import log_in

pytestmark = [pytest.mark.spark_submit, pytest.mark.slow]

DAG_ID = "lake_approval"


def _trigger(airflow, table: str) -> str:
    response = airflow.api("POST", f"/dags/{DAG_ID}/dagRuns", json={"logical_date": None, "conf": {"table": table}})
    assert response.status_code == 200, response.text
    return response.json()["dag_run_id"]


def _state(airflow, run_id: str, task_id: str) -> str | None:
    return airflow.api("GET", f"/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/{task_id}").json().get("state")


def _wait_for_the_gate(airflow, run_id: str) -> None:
    airflow.wait_for(lambda: _state(airflow, run_id, "approve_expire") == "awaiting_input", 300,
                     f"the expiry's approval gate of {run_id} to wait for input", interval=3,
                     diagnose=lambda: airflow.task_states(DAG_ID, run_id))
    assert _state(airflow, run_id, "expire") is None  # nothing deleted while it waits
    # A person answers after the scheduler took in the paused try's exit (airflow_stack.py says why).
    airflow.wait_for_executor_report(DAG_ID, run_id, "approve_expire")


def _answer(page, airflow, run_id: str, choice: str, snapshots: int, screenshot=None) -> None:
    page.goto(f"{airflow.base_url}/dags/{DAG_ID}/runs/{run_id}/tasks/approve_expire/required_actions")
    page.get_by_text("would delete").first.wait_for(timeout=60_000)
    text = page.inner_text("body")
    assert f"{snapshots} snapshots" in text, text[:3000]
    assert "12 data and delete files" in text, text[:3000]
    assert "It asks because" in text
    if screenshot:
        page.screenshot(path=str(screenshot), full_page=True)
    page.get_by_role("button", name=choice, exact=True).click()
    # The answer Airflow recorded is the one clicked (a click lost or landing elsewhere fails here, not later).
    detail = airflow.wait_for(lambda: _answered(airflow, run_id), 120, f"the answer to {run_id}'s gate", interval=2)
    assert detail["chosen_options"] == [choice], detail


def _answered(airflow, run_id: str) -> dict | None:
    detail = airflow.api("GET", f"/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/approve_expire/-1/hitlDetails").json()
    return detail if detail.get("response_received") else None


def _explain(airflow, run_id: str) -> str:
    """What a run's gate and expiry did, for a failed assertion."""
    return "\n".join([airflow.task_states(DAG_ID, run_id),
                      *(airflow.task_log(DAG_ID, run_id, task)[-6000:] for task in ("approve_expire", "expire"))])


def _table(lake_hook, namespace: str, name: str):
    """12 small appends, then one overwrite with the same rows (PyIceberg, no Spark): the 12 small
    files are held only by the older snapshots, which the gate's expiry would delete."""
    table = f"{namespace}.{name}"
    create_events_table(lake_hook.catalog, table, days=2, commits_per_day=6, rows_per_commit=10)
    loaded = lake_hook.load_table(table)
    loaded.overwrite(loaded.scan().to_arrow())
    return table


def test_a_person_approves_one_big_expiry_and_rejects_another(airflow, lake_hook, namespace, page, output_dir):
    approved, rejected = _table(lake_hook, namespace, "approved"), _table(lake_hook, namespace, "rejected")
    rejected_before = ([s.snapshot_id for s in lake_hook.load_table(rejected).snapshots()],
                       files_on_disk(lake_hook.load_table(rejected)))
    fingerprint = table_fingerprint(lake_hook.load_table(approved))
    airflow.wait_for_dag(DAG_ID)
    older = len(rejected_before[0]) - 1  # every snapshot but the current one goes
    run_approve, run_reject = _trigger(airflow, approved), _trigger(airflow, rejected)
    log_in(page, airflow)

    _wait_for_the_gate(airflow, run_approve)
    _answer(page, airflow, run_approve, "Approve", older, screenshot=output_dir / "approval-required-action.png")
    run = airflow.wait_for_run(DAG_ID, run_approve)
    assert run["state"] == "success", airflow.task_states(DAG_ID, run_approve)
    assert _state(airflow, run_approve, "expire") == "success", _explain(airflow, run_approve)
    table = lake_hook.load_table(approved)
    assert [s.snapshot_id for s in table.snapshots()] == [table.current_snapshot().snapshot_id], \
        _explain(airflow, run_approve)
    assert table_fingerprint(table) == fingerprint
    approval = airflow.xcom(DAG_ID, run_approve, "approve_expire")
    assert approval["approved_by"] == airflow.USER and len(approval["snapshot_ids"]) == older

    _wait_for_the_gate(airflow, run_reject)
    _answer(page, airflow, run_reject, "Reject", older)
    run = airflow.wait_for_run(DAG_ID, run_reject)
    assert run["state"] == "success", airflow.task_states(DAG_ID, run_reject)
    for task_id in ("expire", "clean_preview", "approve_clean", "clean"):
        assert _state(airflow, run_reject, task_id) == "skipped", task_id
    table = lake_hook.load_table(rejected)
    # Every snapshot and every file is still there (the lease's commits add metadata files, nothing goes).
    assert [s.snapshot_id for s in table.snapshots()] == rejected_before[0]
    assert rejected_before[1] <= files_on_disk(table)
    import generated_pages
    generated_pages.save_figure("approval", (
        f"Approval: in a browser, Approve let an expiry over the threshold remove {older} snapshots with rows "
        f"unchanged; Reject left the other table's {len(rejected_before[0])} snapshots and {len(rejected_before[1])} "
        "files exactly as they were (`tests/test_approval_ui.py`)"))
