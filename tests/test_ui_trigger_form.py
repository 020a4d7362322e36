"""The params form of ``lake_maintenance`` in a real browser (Debian's chromium driven by playwright),
against the real Airflow of the ``airflow`` fixture: log in, open the trigger form, see a bad table
name refused with the field named, fill in a table, submit, see the run succeed, then find what its
steps said on the Lake health page."""

from __future__ import annotations

import re
from urllib.parse import unquote

import pytest

from demo_data import create_events_table
from browser import log_in
from lake_checks import live_files, table_fingerprint

pytestmark = [pytest.mark.spark_submit, pytest.mark.slow]


def _open_trigger_form(page, airflow):
    page.goto(f"{airflow.base_url}/dags/lake_maintenance")
    page.get_by_role("button", name="Trigger Dag").click()
    dialog = page.get_by_role("dialog")
    dialog.locator("input[name=element_table]").wait_for()
    return dialog


def _manual_runs(airflow) -> list[dict]:
    return airflow.api("GET", "/dags/lake_maintenance/dagRuns", params={"limit": 100}).json()["dag_runs"]


def test_trigger_form_runs_lake_maintenance(airflow, lake_hook, namespace, page, output_dir):
    name = f"{namespace}.events"
    create_events_table(lake_hook.catalog, name, days=2, commits_per_day=6, rows_per_commit=10)
    fingerprint = table_fingerprint(lake_hook.load_table(name))
    log_in(page, airflow)

    # The form shows what an operator needs at 2 a.m.: titles, descriptions, defaults.
    dialog = _open_trigger_form(page, airflow)
    form = dialog.inner_text()
    for text in ("Table", "The table to maintain, as namespace.table", "Minimum input files", "Clean policy",
                 "KEEP_LATEST_COMMITS", "Orphan files older than (hours)", "Dry run"):
        assert text in form, text

    # A table name that is not namespace.table is refused (the API answers 400) and the dialog names the
    # field (Airflow's form marks only missing values itself, not a pattern); no run starts.
    runs_before = len(_manual_runs(airflow))
    dialog.locator("input[name=element_table]").fill("events; DROP TABLE x")
    dialog.get_by_test_id("trigger-dag-submit").click()
    page.get_by_text("Failed to Trigger").first.wait_for(timeout=30_000)
    dialog.get_by_text("Invalid input for param table").wait_for(timeout=30_000)
    assert "'title': 'Table'" in dialog.inner_text()
    assert len(_manual_runs(airflow)) == runs_before

    # The real thing: fill in the table, keep the defaults, submit.
    dialog = _open_trigger_form(page, airflow)
    dialog.locator("input[name=element_table]").fill(name)
    dialog.screenshot(path=str(output_dir / "trigger-form-filled.png"))
    dialog.get_by_test_id("trigger-dag-submit").click()
    page.wait_for_url(re.compile(r".*/dags/lake_maintenance/runs/.+"), timeout=30_000)
    run_id = unquote(page.url.rsplit("/runs/", 1)[1])
    run = airflow.wait_for_run("lake_maintenance", run_id)
    assert run["state"] == "success", airflow.logs()
    assert run["conf"]["table"] == name

    # What the browser shows once it is done: every task a success.
    page.reload()
    for task_id in ("plan", "rewrite", "expire", "clean"):
        row = page.get_by_role("row").filter(has=page.get_by_role("link", name=task_id, exact=True))
        row.get_by_text("Success").wait_for(timeout=30_000)
    page.screenshot(path=str(output_dir / "run-succeeded.png"), full_page=True)

    table = lake_hook.load_table(name)
    assert live_files(table)["DATA"] == 2  # 12 small files, one per day
    assert table_fingerprint(table) == fingerprint

    # The Lake health page shows the run with what each step said: the sentences its task log holds.
    page.goto(f"{airflow.base_url}/lake-health/")
    card = page.locator(f'[data-table="{name}"]')
    card.wait_for(timeout=120_000)
    said = card.locator("details.said[open]")
    assert said.count() == 1, card.inner_text()  # the newest run's, unfolded
    shown = said.inner_text()
    for task_id in ("plan", "rewrite", "expire", "clean"):
        sentences = airflow.xcom("lake_maintenance", run_id, task_id, key="summary")
        log = airflow.task_log("lake_maintenance", run_id, task_id)
        assert sentences and sentences[-1].startswith(f"Summary for {name}: " if task_id != "plan" else "Plan ("), (
            task_id, sentences)
        for sentence in sentences:
            assert sentence in shown, (task_id, sentence, shown)
            assert sentence.splitlines()[0] in log, (task_id, sentence)
    card.screenshot(path=str(output_dir / "lake-health-after-a-form-run.png"))
