"""The lake_maintenance DAG end to end: real Airflow (dag.test), real Spark, real Iceberg."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from demo_data import create_events_table
from airflow_lake_provider.core.coercion import snapshot_ids
from airflow_lake_provider.links import SparkHistoryLink
from conftest import load_dag
from lake_checks import (
    FakeTaskInstance,
    age_files,
    files_on_disk,
    live_file_paths,
    live_files,
    local_path,
    table_fingerprint,
)

pytestmark = pytest.mark.spark_submit


def test_the_group_wires_each_step_to_its_own_groups_tasks():
    """No Spark: the task ids, edges and XComArgs of two groups, one nested, and the shipped DAG's ids."""
    from airflow.sdk import DAG, TaskGroup

    from airflow_lake_provider.exceptions import LakeConfigError
    from airflow_lake_provider.task_group import lake_maintenance_group

    with DAG("two_groups", schedule=None) as dag:
        first = lake_maintenance_group(table="db.events")
        with TaskGroup("outer"):
            second = lake_maintenance_group(table="{{ params.t }}", group_id="orders")
        with pytest.raises(LakeConfigError, match="give a group_id"):
            lake_maintenance_group(table="{{ params.t }}")
    assert first.group_id == "db_events" and second.rewrite.task_id == "outer.orders.rewrite"
    for group in (first, second):
        assert group.rewrite.plan.operator is group.plan
        assert group.expire.protected_snapshot_ids.operator is group.rewrite
        assert [arg.operator for arg in group.clean.protected_snapshot_ids] == [group.rewrite, group.expire]
        # The lease reaches expire and clean by a pull, not an edge: only all_success tasks may follow a setup.
        assert group.clean.upstream_task_ids == {group.rewrite.task_id, group.expire.task_id}
        assert group.plan.upstream_task_ids == {group.acquire_lease.task_id}
        # The group's leaves are its last step; the lease's release is its teardown.
        assert [task.task_id for task in group.get_leaves()] == [group.clean.task_id]
        assert group.release_lease.is_teardown and group.acquire_lease.is_setup
    assert len(dag.task_ids) == 12  # each group: acquire_lease, the four steps, release_lease
    dag.validate()  # what the DAG processor checks (a setup is followed only by all_success tasks)
    shipped = load_dag("lake_maintenance.py", "lake_maintenance")
    assert set(shipped.task_ids) == {"check_run", "acquire_lease", "plan", "rewrite", "expire", "clean", "release_lease"}


PROTECTED = "protected (pending work of an upstream task)"


def _protected(result: dict) -> set[int]:
    """The snapshots an expire or clean step held as protected: its ``kept`` reasons say so."""
    return {int(sid) for sid, reason in result["kept"].items() if PROTECTED in reason}


def test_two_groups_in_one_dag_compact_keep_rows_and_each_protect_their_own_rewrite(
        airflow_db, lake_hook, spark, namespace):
    """Two lake_maintenance_groups (one nested in another group) in one DAG, on two real tables.

    Each group's expire and clean protect exactly their own rewrite's snapshots, wired through
    XComArgs; with the hard-coded ``task_ids='rewrite'`` of before, neither would protect anything.
    """
    name, other = f"{namespace}.events", f"{namespace}.orders"
    create_events_table(lake_hook.catalog, name, days=4, commits_per_day=10, rows_per_commit=20)
    create_events_table(lake_hook.catalog, other, days=2, commits_per_day=6, rows_per_commit=10)
    # Merge-on-read deletes from another engine, like a real writer would leave them.
    spark.sql(f"DELETE FROM lake.{name} WHERE event_id % 10 = 3")
    table = lake_hook.load_table(name)
    rows_before, checksum_before = table_fingerprint(table)
    other_before = table_fingerprint(lake_hook.load_table(other))
    files_before = live_files(table)
    deletes_before = live_file_paths(table)["POSITION_DELETES"]
    snapshot_before = table.current_snapshot().snapshot_id
    assert files_before["DATA"] == 40 and files_before["POSITION_DELETES"] > 0
    assert deletes_before <= files_on_disk(table)

    stray = Path(local_path(table.location())) / "data" / "stray-from-a-dead-writer.parquet"
    stray.write_bytes(b"no snapshot references this")
    age_files([str(stray)], hours=100)

    dag = load_dag("lake_two_tables.py", "lake_two_tables")
    run = dag.test(run_conf={"events": name, "orders": other})
    assert run.state == "success"
    groups = {"events": "events.", "orders": "sales.orders."}
    xcoms = {group: {step: run.get_task_instance(prefix + step).xcom_pull(task_ids=prefix + step)
                     for step in ("plan", "rewrite", "expire", "clean")} for group, prefix in groups.items()}
    xcom = xcoms["events"]

    table = lake_hook.load_table(name)
    files_after = live_files(table)
    # A small fraction of the files: one per day partition.
    assert files_after["DATA"] == 4
    # No dangling or small position-delete files left behind.
    assert files_after["POSITION_DELETES"] == 0 and files_after["EQUALITY_DELETES"] == 0
    # Same rows, deleted rows stay deleted.
    assert table_fingerprint(table) == (rows_before, checksum_before)
    assert not [r for r in table.scan(selected_fields=("event_id",)).to_arrow().to_pylist() if r["event_id"] % 10 == 3]

    # Snapshot IDs through XCom match the table's history.
    history = {s.snapshot_id for s in table.snapshots()}
    assert xcom["plan"]["snapshot_id"] == snapshot_before
    assert xcom["plan"]["totals"]["files"] == 40
    assert xcom["rewrite"]["snapshot_id_before"] == snapshot_before
    assert xcom["rewrite"]["rewritten_data_files"] == 40 and xcom["rewrite"]["added_data_files"] == 4
    assert xcom["rewrite"]["failed_groups"] == []
    assert xcom["rewrite"]["snapshot_id_after"] in history
    # Its data commit (made before the position-delete commit, still referencing every old delete file) is
    # expired in the same run; the last commit, by which a retried rewrite recognises its work, stays.
    data_commit, *_, last_commit = xcom["rewrite"]["committed_snapshot_ids"]
    assert last_commit in history and data_commit not in history
    assert data_commit in xcom["expire"]["expired_snapshot_ids"]
    assert table.current_snapshot().snapshot_id == xcom["rewrite"]["snapshot_id_after"]
    summary = table.snapshot_by_id(last_commit).summary
    assert summary["airflow.dag-id"] == "lake_two_tables" and summary["airflow.task-id"] == "events.rewrite"
    # Expiry removed the old history but not what the rewrite produced.
    assert snapshot_before in xcom["expire"]["expired_snapshot_ids"]
    assert not set(xcom["expire"]["expired_snapshot_ids"]) & history
    assert xcom["expire"]["deleted_files"]["data_files"] == 40
    # One run reclaims the space: the rewritten data and delete files are gone from storage too, and
    # what is left under data/ is exactly what the current snapshot reads.
    assert xcom["expire"]["deleted_files"]["position_delete_files"] == len(deletes_before)
    assert not deletes_before & files_on_disk(table)
    live = live_file_paths(table)
    assert {p for p in files_on_disk(table) if "/data/" in p} == live["DATA"] | live["POSITION_DELETES"]
    # The group's per-step settings reached the jobs: the rewrite ran with the Iceberg option given, and
    # clean deleted the orphan at once (quarantine_days=0) instead of moving it to a quarantine.
    assert xcom["rewrite"]["options"]["max-concurrent-file-group-rewrites"] == "1"
    assert xcom["clean"]["quarantine_days"] == 0 and xcom["clean"]["quarantine_run"] is None
    assert xcom["clean"]["orphan_file_count"] == 1 and not stray.exists()

    # The other table, in the nested group: compacted too, its rows intact.
    orders = lake_hook.load_table(other)
    assert xcoms["orders"]["rewrite"]["rewritten_data_files"] == 12 and live_files(orders)["DATA"] == 2
    assert table_fingerprint(orders) == other_before
    # Each group's expire and clean protected exactly their own rewrite's snapshots (and clean its expire's),
    # and those are still in their own table's history after keeping only 1 snapshot of main.
    for group, own in xcoms.items():
        rewrite_ids = set(snapshot_ids(own["rewrite"]))
        other_group = xcoms["orders" if group == "events" else "events"]
        assert rewrite_ids and not rewrite_ids & set(snapshot_ids(other_group["rewrite"])), group
        assert _protected(own["expire"]) == rewrite_ids, group
        assert _protected(own["clean"]) == set(snapshot_ids([own["rewrite"], own["expire"]])), group
        kept = {s.snapshot_id for s in lake_hook.load_table(own["plan"]["table"]).snapshots()}
        assert rewrite_ids <= kept, group

    # Running it again is idempotent: nothing left to do, so no new snapshot and the same rows. The skipped
    # rewrites hand on nothing to protect (their XComArg resolves to None) and expiry and clean still run.
    # Without the events group's orphan listing this time (a Spark application that could only take files
    # over the 72 h floor, and run 1 took the one there was): the clean still runs, without a JVM.
    history_before = [s.snapshot_id for s in table.snapshots()]
    current_before = table.current_snapshot().snapshot_id
    again = dag.test(run_conf={"events": name, "orders": other, "remove_orphans": False})
    assert again.state == "success"
    for prefix in groups.values():
        assert again.get_task_instance(prefix + "rewrite").state == "skipped"
        assert {again.get_task_instance(prefix + step).state for step in ("expire", "clean")} == {"success"}
        assert not _protected(again.get_task_instance(prefix + "expire").xcom_pull(task_ids=prefix + "expire"))
        assert again.get_task_instance(prefix + "clean").xcom_pull(task_ids=prefix + "clean")["orphan_older_than_ms"] \
            is None
    table = lake_hook.load_table(name)
    assert table.current_snapshot().snapshot_id == current_before
    assert {s.snapshot_id for s in table.snapshots()} <= set(history_before)  # expiry may still trim history
    assert table_fingerprint(table) == (rows_before, checksum_before)


def test_dag_on_a_healthy_table_skips_the_rewrite(airflow_db, lake_hook, namespace, capfd):
    name = f"{namespace}.tidy"
    create_events_table(lake_hook.catalog, name, days=2, commits_per_day=1, rows_per_commit=100)
    snapshot_before = lake_hook.load_table(name).current_snapshot().snapshot_id

    dag = load_dag("lake_maintenance.py", "lake_maintenance")
    run = dag.test(run_conf={"table": name, "dry_run": True})
    assert run.state == "success"
    assert run.get_task_instance("rewrite").state == "skipped"
    # The skipped rewrite left a None result: expire and clean read it, and no error line says "XCom not found".
    assert "XCom not found" not in capfd.readouterr().out
    assert run.get_task_instance("plan").xcom_pull(task_ids="plan")["groups"] == []
    assert lake_hook.load_table(name).current_snapshot().snapshot_id == snapshot_before

    # A stale conf key (the name before older_than) fails the run in its first task, before the lease or any step.
    stale = dag.test(run_conf={"table": name, "expire_older_than_hours": 1})
    assert stale.state == "failed" and stale.get_task_instance("check_run").state == "failed"
    assert {stale.get_task_instance(task).state for task in ("acquire_lease", "plan", "expire")} == {"upstream_failed"}
    assert lake_hook.load_table(name).current_snapshot().snapshot_id == snapshot_before


def test_an_unknown_conf_key_is_named_with_the_closest_param(bad_input):
    from airflow_lake_provider.core.run_conf import unknown_conf_keys

    params = ("table", "older_than", "retain_last", "dry_run")
    assert unknown_conf_keys({"table": "db.t", "dry_run": True}, params, dag_id="lake_maintenance") is None
    assert unknown_conf_keys(None, params, dag_id="lake_maintenance") is None
    refusal = unknown_conf_keys({"table": "db.t", "retain_lats": 2, "zzz": 1}, params, dag_id="lake_maintenance")
    assert refusal.startswith("The run's conf has 'retain_lats' (did you mean 'retain_last'?), 'zzz', which "
                              "lake_maintenance does not know")
    assert "Its keys are the params: dry_run, older_than, retain_last, table." in refusal
    bad_input("lake_maintenance conf (first task check_run)", "{'retain_lats': 2, 'zzz': 1}", refusal)


def test_dry_run_shows_the_plan_and_what_would_go_and_changes_nothing(airflow_db, lake_hook, namespace, monkeypatch):
    # A Spark connection that names its history server: the Spark task links to its application.
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps(
        {"conn_type": "spark", "host": "local[*]", "extra": {"history_server_url": "http://127.0.0.1:18080/"}}))
    name = f"{namespace}.events"
    create_events_table(lake_hook.catalog, name, days=2, commits_per_day=8, rows_per_commit=10)
    table = lake_hook.load_table(name)
    before = (table_fingerprint(table), live_files(table), [s.snapshot_id for s in table.snapshots()])

    dag = load_dag("lake_maintenance.py", "lake_maintenance")
    run = dag.test(run_conf={"table": name, "dry_run": True, "override_table_retention": True, "older_than": "0h", "retain_last": 1,
                             "policy": "KEEP_LATEST_COMMITS", "retained": 4, "plan_settings": {"engine": "spark"}})
    assert run.state == "success"
    xcom = {task: run.get_task_instance(task).xcom_pull(task_ids=task) for task in ("plan", "rewrite", "expire", "clean")}

    # What a real run would do, shown...
    assert xcom["plan"]["totals"]["files"] == 16 and xcom["plan"]["totals"]["groups"] == 2
    assert xcom["rewrite"]["dry_run"] is True and xcom["rewrite"]["committed_snapshot_ids"] == []
    snapshots = before[2]
    assert sorted(xcom["expire"]["would_expire_snapshot_ids"]) == sorted(snapshots[:-1])  # all but the current
    assert sorted(xcom["clean"]["would_expire_snapshot_ids"]) == sorted(snapshots[:-4])  # all but the last 4 commits
    assert xcom["expire"]["expired_snapshot_ids"] == [] and xcom["clean"]["expired_snapshot_ids"] == []
    # The plan's Spark application is linked from its task; clean's job started none (its dry run is metadata).
    link = run.get_task_instance("plan").xcom_pull(task_ids="plan", key=SparkHistoryLink().xcom_key)
    assert re.fullmatch(r"http://127\.0\.0\.1:18080/history/local-\d+/jobs/", link), link
    assert not run.get_task_instance("clean").xcom_pull(task_ids="clean", key=SparkHistoryLink().xcom_key)
    # ...and nothing done.
    table = lake_hook.load_table(name)
    assert (table_fingerprint(table), live_files(table), [s.snapshot_id for s in table.snapshots()]) == before


def test_dag_honours_the_tables_own_retention_unless_overridden(airflow_db, lake_hook, namespace):
    """The form's defaults keep what the table's owner asked for; the override applies only when ticked."""
    name = f"{namespace}.kept"
    create_events_table(lake_hook.catalog, name, days=1, commits_per_day=12, rows_per_commit=5)
    table = lake_hook.load_table(name)
    ids = [s.snapshot_id for s in table.snapshots()]
    with table.transaction() as tx:  # the owner: at least 5 snapshots and 30 days of time travel
        tx.set_properties({"history.expire.min-snapshots-to-keep": "5",
                           "history.expire.max-snapshot-age-ms": str(30 * 24 * 3600 * 1000)})
    table.manage_snapshots().create_tag(ids[0], "stale", max_ref_age_ms=1).create_tag(ids[2], "release").commit()
    fingerprint = table_fingerprint(lake_hook.load_table(name))
    dag = load_dag("lake_maintenance.py", "lake_maintenance")
    no_rewrite = {"table": name, "min_input_files": 50}  # 12 files: below it, so only retention is at work

    run = dag.test(run_conf=no_rewrite)  # every retention field at its default
    assert run.state == "success"
    expire, clean = (run.get_task_instance(t).xcom_pull(task_ids=t) for t in ("expire", "clean"))
    table = lake_hook.load_table(name)
    assert [s.snapshot_id for s in table.snapshots()] == ids  # nothing expired: the table keeps 30 days
    assert set(table.refs()) == {"main", "release"}  # the tag past its max-ref-age-ms is removed, as Iceberg would
    assert expire["retention_source"] == "table" and expire["removed_refs"] == ["stale"]
    assert expire["removed_ref_reasons"]["stale"].startswith(
        "tag stale removed: max-ref-age-ms=1 (1ms, tag stale's own setting) exceeded")
    assert expire["kept"][str(ids[-5])] == "kept: branch main, within min-snapshots-to-keep=5 (table property)"
    assert expire["kept"][str(ids[0])] == "kept: branch main, younger than max-snapshot-age-ms=2592000000 (30d, table property)"
    assert expire["kept"][str(ids[2])].startswith("kept: head of tag release; branch main, younger than")
    # The clean policy (last 10 commits) would remove two; the table's retention keeps them.
    assert clean["expired_snapshot_ids"] == [] and clean["retention_source"] == "table"
    assert clean["kept"][str(ids[1])].endswith("the table's retention keeps it though clean policy "
                                               "KEEP_LATEST_COMMITS=10 would not")

    # A value without the switch is refused with a sentence before any JVM, and the table is left as it was
    # (the expire task of a run fails with it; its place in a run is the one shown above).
    from airflow_lake_provider.exceptions import LakeConfigError
    from airflow_lake_provider.operators.expire import IcebergExpireSnapshotsOperator

    with pytest.raises(LakeConfigError, match="retain_last given, but the table's own retention applies"):
        IcebergExpireSnapshotsOperator(task_id="expire", table=name, retain_last=2).execute(
            {"ti": FakeTaskInstance(task_id="expire")})
    assert [s.snapshot_id for s in lake_hook.load_table(name).snapshots()] == ids

    table.manage_snapshots().create_tag(ids[3], "stale2", max_ref_age_ms=1).commit()
    run = dag.test(run_conf={**no_rewrite, "override_table_retention": True, "retain_last": 2,
                             "older_than": "0h", "retained": 2})
    assert run.state == "success"
    expire = run.get_task_instance("expire").xcom_pull(task_ids="expire")
    table = lake_hook.load_table(name)
    # The override applies to main: its 2 newest stay; the release tag's snapshot stays; the expired tag
    # stale2 and its snapshot go in the same commit. main stays, rows are intact.
    assert [s.snapshot_id for s in table.snapshots()] == [ids[2], ids[-2], ids[-1]]
    assert set(table.refs()) == {"main", "release"} and table.refs()["main"].snapshot_id == ids[-1]
    assert expire["retention_source"] == "override" and expire["removed_refs"] == ["stale2"]
    assert sorted(expire["expired_snapshot_ids"]) == sorted(set(ids) - {ids[2], ids[-2], ids[-1]})
    assert expire["kept"][str(ids[-2])] == "kept: branch main, within min-snapshots-to-keep=2 (override: retain_last)"
    assert expire["removed"][str(ids[3])] == (
        "removed: on branch main, past min-snapshots-to-keep=2 (override: retain_last) and older than "
        "max-snapshot-age-ms=0 (0ms, override: older_than)")
    assert table_fingerprint(table) == fingerprint


def test_every_shipped_and_test_dag_file_loads_as_the_dag_processor_loads_it():
    """A DAG file the DAG processor refuses (an import error, a setup/teardown rule broken) never
    runs: every file of dags/ and tests/dags/ must load with no import error."""
    from airflow.dag_processing.dagbag import DagBag

    from conftest import DAGS_FOLDER

    bag = DagBag(dag_folder=str(DAGS_FOLDER))
    assert bag.import_errors == {}
    assert {"lake_maintenance", "lake_fleet_maintenance", "lake_outcomes", "lake_two_tables"} <= set(bag.dag_ids)
