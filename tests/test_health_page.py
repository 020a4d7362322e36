"""The Lake health page: its figures against real tables (pure parts), and the page itself in a
real Airflow UI, in a real browser, with a screenshot kept under test-output/."""

from __future__ import annotations

import requests
import pytest
from demo_data import create_events_table

from airflow_lake_provider.core.health_page import (
    TableReport,
    order_reports,
    run_rows,
    size_histogram,
    table_report,
    table_results,
)

MIB = 1024 * 1024


def test_file_sizes_fall_in_buckets_relative_to_the_target():
    histogram = size_histogram([1_000, 2 * MIB, 100 * MIB, 300 * MIB, 500 * MIB, 900 * MIB], target=512 * MIB)
    assert histogram.total == 6 and len(histogram.labels) == len(histogram.counts) == 7
    assert histogram.counts == (2, 0, 1, 0, 1, 1, 1)
    assert histogram.labels[0] == "< 8.0 MiB" and histogram.labels[-1] == ">= 768 MiB"


def test_unhealthy_and_unreadable_tables_come_first():
    reports = [TableReport("db.ok", "c", score=98), TableReport("db.bad", "c", score=40),
               TableReport("db.gone", "c", error="NoSuchTableError"), TableReport("db.meh", "c", score=80)]
    assert [r.table for r in order_reports(reports)] == ["db.gone", "db.bad", "db.meh", "db.ok"]
    assert [r.state for r in order_reports(reports)] == ["unreadable", "unhealthy", "fair", "healthy"]


def test_runs_are_grouped_newest_first_with_what_each_step_did():
    rows = [{"dag_id": "d", "run_id": "r1", "task_id": "plan", "when": 1, "value": {"totals": {"files": 6}, "groups": [1]}},
            {"dag_id": "d", "run_id": "r1", "task_id": "g.rewrite", "when": 2,
             "value": {"rewritten_data_files": 6, "added_data_files": 1}, "said": ["Summary for db.t: rewrote 6."]},
            {"dag_id": "d", "run_id": "r2", "task_id": "plan", "when": 3, "value": {"dry_run": True}}]
    runs = run_rows(rows)
    assert [r["run_id"] for r in runs] == ["r2", "r1"]
    assert runs[1]["steps"] == ["plan: 1 groups, 6 files to compact", "rewrite: 6 -> 1 data files"]
    assert (runs[1]["said"], runs[0]["said"]) == (["Summary for db.t: rewrote 6."], [])


def test_a_fleet_steps_list_counts_for_each_of_its_tables():
    """A fleet step's XCom lists one result per table; a single-table step's is the result itself."""
    fleet = [{"table": "db.a", "rewritten_data_files": 6}, {"table": "db.b", "rewritten_data_files": 3}, None]
    assert [r["table"] for r in table_results(fleet)] == ["db.a", "db.b"]
    assert table_results({"table": "db.a", "totals": {}}) == [{"table": "db.a", "totals": {}}]
    assert table_results("not a result") == [] and table_results({"no": "table"}) == []


def test_a_maintained_table_shows_sizes_before_and_after_its_last_maintenance(lake_hook, namespace):
    name = f"{namespace}.events"
    table = create_events_table(lake_hook.catalog, name, days=1, commits_per_day=5, rows_per_commit=5)
    untouched = table_report(table, table_name=name, lake_conn_id="lake_default")
    assert untouched.commits == [] and untouched.after is None and untouched.now.total == 5
    # A maintenance commit: the five files replaced by one, with the airflow.* properties every step's commit has.
    with table.transaction() as tx:
        tx.overwrite(table.scan().to_arrow(), snapshot_properties={"airflow.dag-id": "d", "airflow.run-id": "r",
                                                                   "airflow.task-id": "rewrite"})
    report = table_report(lake_hook.load_table(name), table_name=name, lake_conn_id="lake_default")
    assert report.before.total == 5 and report.after.total == 1 and report.now.total == 1
    assert {(c.dag_id, c.run_id, c.task_id) for c in report.commits} == {("d", "r", "rewrite")}
    assert 0 <= report.score <= 100 and report.snapshots == 7


@pytest.mark.spark_submit
def test_the_page_shows_a_compacted_table_with_its_run_in_the_airflow_ui(airflow, lake_hook, namespace, page,
                                                                        output_dir):
    from browser import log_in

    name = f"{namespace}.events"
    create_events_table(lake_hook.catalog, name, days=1, commits_per_day=6, rows_per_commit=5)
    response = airflow.api("POST", "/dags/lake_asset_producer/dagRuns", json={"logical_date": None,
                                                                             "conf": {"table": name}})
    run_id = response.json()["dag_run_id"]
    assert airflow.wait_for_run("lake_asset_producer", run_id, timeout=600)["state"] == "success"

    # Not signed in: refused.
    assert requests.get(f"{airflow.base_url}/lake-health/", timeout=30).status_code in (401, 403)

    log_in(page, airflow)
    page.goto(f"{airflow.base_url}/lake-health/")
    card = page.locator(f'[data-table="{name}"]')
    card.wait_for(timeout=120_000)
    text = card.inner_text()
    assert "Before the last maintenance (6 data files)" in text and "After the last maintenance (1 data files)" in text
    assert "rewrite: 6 -> 1 data files" in text
    assert "the embedded lake (no connection lake_default)" in text  # the stack defines no lake connection
    score = int(card.locator(".score").get_attribute("data-score"))
    assert score == lake_report_score(lake_hook, name)
    assert card.locator("svg").count() == 3
    link = card.locator(f'a[href="/dags/lake_asset_producer/runs/{run_id}"]')
    assert link.count() == 1
    card.scroll_into_view_if_needed()
    page.screenshot(path=str(output_dir / "lake-health-page.png"), full_page=False)
    card.screenshot(path=str(output_dir / "lake-health-card.png"))

    # The Browse menu leads to it inside the Airflow UI.
    page.goto(f"{airflow.base_url}/plugin/lake-health")
    frame = page.frame_locator("iframe")
    frame.locator(f'[data-table="{name}"]').wait_for(timeout=120_000)
    page.screenshot(path=str(output_dir / "lake-health-in-airflow.png"))


def lake_report_score(lake_hook, name: str) -> int:
    return table_report(lake_hook.load_table(name), table_name=name, lake_conn_id="lake_default").score
