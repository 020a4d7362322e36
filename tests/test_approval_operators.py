"""The approval gate on real tables: what it counts is what Iceberg then deletes; under the threshold the
deletion runs unattended; the deleting step removes no snapshot and no orphan the approval did not name.

The deleting steps run their real PySpark job (Iceberg's actions) in the shared Spark session, in
place of a spark-submit of the same job (seconds instead of ~20 s each); the operators, the
decisions and the gate are the ones a DAG runs.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from demo_data import create_events_table
from airflow_lake_provider.core.approval import DeletionThreshold
from airflow_lake_provider.core.job_registry import job_for
from airflow_lake_provider.exceptions import LakeConfigError
from airflow_lake_provider.jobs import clean as clean_job
from airflow_lake_provider.jobs import expire as expire_job
from airflow_lake_provider.operators.approval import LakeDeletionApprovalOperator
from airflow_lake_provider.operators.clean import IcebergCleanPolicyOperator
from airflow_lake_provider.operators.expire import IcebergExpireSnapshotsOperator
from lake_checks import FakeTaskInstance, files_on_disk, table_fingerprint

JOBS = {"expire": expire_job, "clean": clean_job}


def _in_shared_session(operator, spark):
    """The operator's Spark job, run in the shared session rather than submitted."""
    def run_job(args):
        job = job_for(args)
        return job.result.from_json(JOBS[job.name].run(spark, "lake", args.to_json()))

    operator.run_job = run_job
    return operator


def _context(task_id: str) -> dict:
    return {"ti": FakeTaskInstance(task_id=task_id)}


@pytest.fixture
def compacted_table(lake_hook, namespace, spark):
    """12 small appends, then a compaction: the 12 small files are held only by the older snapshots."""
    name = f"{namespace}.events"
    create_events_table(lake_hook.catalog, name, days=2, commits_per_day=6, rows_per_commit=10)
    spark.sql(f"CALL lake.system.rewrite_data_files(table => '{name}', options => map('min-input-files', '2'))")
    table = lake_hook.load_table(name)
    old = [s.snapshot_id for s in table.snapshots() if s.snapshot_id != table.current_snapshot().snapshot_id]
    return name, old


def test_under_the_threshold_expiry_runs_unattended_and_deletes_what_the_gate_counted(lake_hook, spark,
                                                                                     compacted_table, capfd):
    name, old = compacted_table
    fingerprint = table_fingerprint(lake_hook.load_table(name))
    preview = IcebergExpireSnapshotsOperator(task_id="expire_preview", table=name, snapshot_ids=old,
                                             dry_run=True).execute(_context("expire_preview"))
    gate = LakeDeletionApprovalOperator(task_id="approve_expire", table=name, step="expire", preview=preview,
                                        threshold=DeletionThreshold(max_files=20, max_bytes=10**6))
    counted = gate.deletion_preview()
    assert counted.snapshot_file_count == 12 and counted.live_file_count == 2  # 12 small files -> 2
    approval = gate.execute(_context("approve_expire"))  # returns at once: no HITL request
    log = capfd.readouterr().out
    assert f"The expire of {name} runs unattended: 12 files" in log
    assert "under the threshold of 20 files or 976.6 KiB" in log
    assert approval["approved_by"] == "threshold" and sorted(approval["snapshot_ids"]) == sorted(old)

    before = files_on_disk(lake_hook.load_table(name))
    result = _in_shared_session(IcebergExpireSnapshotsOperator(
        task_id="expire", table=name, snapshot_ids=old, approved=approval), spark).execute(_context("expire"))
    table = lake_hook.load_table(name)
    assert sorted(result["expired_snapshot_ids"]) == sorted(old)
    assert [s.snapshot_id for s in table.snapshots()] == [table.current_snapshot().snapshot_id]
    gone = before - files_on_disk(table)
    assert {urlsplit(p).path for p in counted.snapshot_files} == {p for p in gone if p.endswith(".parquet")}
    assert result["deleted_files"]["data_files"] == counted.snapshot_file_count
    assert result["deleted_files"]["manifests"] + result["deleted_files"]["manifest_lists"] == \
        counted.metadata_file_count
    assert table_fingerprint(table) == fingerprint


def test_the_step_removes_no_snapshot_the_approval_did_not_name(lake_hook, spark, compacted_table, capfd):
    """The table moved on while a person read the list: the fresh decision wants more than was approved."""
    name, old = compacted_table
    approved_ids, newer = old[:4], old[4:]
    preview = IcebergExpireSnapshotsOperator(task_id="expire_preview", table=name, snapshot_ids=approved_ids,
                                             dry_run=True).execute(_context("expire_preview"))
    approval = LakeDeletionApprovalOperator(
        task_id="approve_expire", table=name, step="expire", preview=preview,
        threshold={"max_files": "100"}).execute(_context("approve_expire"))
    capfd.readouterr()
    result = _in_shared_session(IcebergExpireSnapshotsOperator(
        task_id="expire", table=name, snapshot_ids=old, approved=approval), spark).execute(_context("expire"))
    log = capfd.readouterr().out
    remaining = {s.snapshot_id for s in lake_hook.load_table(name).snapshots()}
    assert sorted(result["expired_snapshot_ids"]) == sorted(approved_ids)
    assert set(newer) <= remaining and not set(approved_ids) & remaining
    assert f"Not in the approval by threshold, kept for the next run to decide: snapshots {newer}" in log
    assert result["kept"][str(newer[0])] == "kept: not in the approval given for this run (the next run decides again)"

    # An approval wired to the wrong table removes nothing.
    other = dict(approval, table="elsewhere.events")
    with pytest.raises(LakeConfigError, match="was for the expire of elsewhere.events; nothing was removed"):
        IcebergExpireSnapshotsOperator(task_id="expire", table=name, snapshot_ids=newer,
                                       approved=other).execute(_context("expire"))
    assert {s.snapshot_id for s in lake_hook.load_table(name).snapshots()} == remaining


def test_clean_takes_only_the_approved_orphans(lake_hook, spark, compacted_table):
    name, _ = compacted_table
    table = lake_hook.load_table(name)
    data_dir = Path(urlsplit(table.location()).path) / "data"
    week_ago = time.time() - 7 * 24 * 3600

    def orphan(file_name: str) -> Path:
        path = data_dir / file_name
        path.write_bytes(b"left by a killed writer")
        os.utime(path, (week_ago, week_ago))
        return path

    first = orphan("orphan-1.parquet")
    clean_args = dict(table=name, policy="KEEP_LATEST_COMMITS", retained=100)
    preview = _in_shared_session(IcebergCleanPolicyOperator(task_id="clean_preview", dry_run=True, **clean_args),
                                 spark).execute(_context("clean_preview"))
    assert preview["orphan_files"] == [f"file:{first}"] or [urlsplit(p).path for p in preview["orphan_files"]] == [str(first)]
    approval = LakeDeletionApprovalOperator(task_id="approve_clean", table=name, step="clean", preview=preview,
                                            threshold=DeletionThreshold(max_files=5)).execute(_context("approve_clean"))
    assert len(approval["orphan_files"]) == 1

    second = orphan("orphan-2.parquet")  # found after the approval: waits for the next run
    result = _in_shared_session(IcebergCleanPolicyOperator(task_id="clean", approved=approval, **clean_args),
                                spark).execute(_context("clean"))
    assert result["orphan_file_count"] == 1
    assert not first.exists() and second.exists()


def test_the_gate_refuses_a_result_that_was_not_a_dry_run(lake_hook, compacted_table, bad_input):
    name, old = compacted_table
    gate = LakeDeletionApprovalOperator(task_id="approve_expire", table=name, step="expire",
                                        preview={"would_expire_snapshot_ids": old, "dry_run": False},
                                        threshold=DeletionThreshold(max_files=1))
    with pytest.raises(LakeConfigError, match="not a dry run: the files are gone already") as raised:
        gate.execute(_context("approve_expire"))
    bad_input("LakeDeletionApprovalOperator", "preview = a result that was not a dry run", raised.value,
              table_checked=True)
    with pytest.raises(LakeConfigError, match="guards one of expire, clean; got step 'rewrite'") as raised:
        LakeDeletionApprovalOperator(task_id="approve", table=name, step="rewrite", preview={},
                                     threshold=DeletionThreshold(max_files=1))
    bad_input("LakeDeletionApprovalOperator", "step='rewrite'", raised.value)
    assert len(list(lake_hook.load_table(name).snapshots())) == len(old) + 1
