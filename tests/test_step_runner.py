"""Every step through the Airflow-free runner (steps/runner.py): a PyIceberg catalog, the real PySpark
jobs in the shared session, no operator, no task instance, no DAG.

What a script or a benchmark does with the provider: plan, compact, expire, clean, convert and
restore one table, each step's result read as a user would (rows, snapshots, files on disk).
"""

from __future__ import annotations

import dataclasses
import importlib
import logging
from pathlib import Path

from demo_data import create_events_table
from airflow_lake_provider.core.contracts import PlanResult, RewriteJobArgs
from airflow_lake_provider.core.job_registry import job_for
from airflow_lake_provider.steps.clean import CleanStep
from airflow_lake_provider.steps.convert_equality_deletes import ConvertEqualityDeletesStep
from airflow_lake_provider.steps.expire import ExpireStep
from airflow_lake_provider.steps.plan import PlanStep
from airflow_lake_provider.steps.restore import RestoreQuarantineStep
from airflow_lake_provider.steps.rewrite import RewriteStep
from airflow_lake_provider.steps.runner import CatalogTable, run_step
from lake_checks import age_files, local_path, table_fingerprint

LOG = logging.getLogger("maintenance-script")


def test_a_script_runs_every_step_without_airflow(lake_hook, namespace, spark):
    catalog = lake_hook.catalog  # a plain PyIceberg catalog
    name = f"{namespace}.events"
    create_events_table(catalog, name, days=2, commits_per_day=5, rows_per_commit=10)
    reader = CatalogTable(catalog, name)
    rows = table_fingerprint(catalog.load_table(name))
    jobs: list[str] = []

    def run_job(args):  # the job in the shared session, as spark-submit would run it
        job = job_for(args)
        jobs.append(job.name)
        return job.result.from_json(importlib.import_module(job.module).run(spark, "lake", args.to_json()))

    plan_step = PlanStep(table=name, min_input_files=2, log=LOG)
    planned = run_step(plan_step, reader, None, run_job)
    plan = planned.result
    assert isinstance(plan, PlanResult) and plan.totals.files == 10 and plan.totals.groups == 2
    assert planned.after is None and jobs == []  # planned in the worker, read only

    rewrite_step = RewriteStep(table=name, plan=plan.to_json(), require_plan=True, rewriter="iceberg", log=LOG)
    unprepared = dataclasses.replace(rewrite_step)
    rewritten = run_step(rewrite_step, reader, None, run_job)
    assert rewrite_step == unprepared  # what prepare decided travelled in Prepared, not on the step
    assert jobs == ["rewrite"] and rewritten.result.rewritten_data_files == 10
    table = catalog.load_table(name)
    assert table.current_snapshot().snapshot_id == rewritten.result.snapshot_id_after
    assert table_fingerprint(table) == rows
    assert rewritten.before["data_files"] == 10 and rewritten.after["data_files"] == 2
    # What the step said (the operator's XCom ``summary``): the sentence its log ends with.
    assert rewrite_step.said[-1].startswith(f"Summary for {name}: rewrote 10 data files"), rewrite_step.said
    assert plan_step.said == [f"Plan (pyiceberg) for {name} at snapshot {plan.snapshot_id}: 2 groups, 10 files, "
                              f"{plan.totals.bytes} bytes -> about 2 files."]

    expired = run_step(ExpireStep(table=name, override_table_retention=True, older_than="0h", retain_last=1,
                                  protected_snapshot_ids=[rewritten.result.to_json()], log=LOG), reader, None, run_job)
    assert jobs == ["rewrite"] and len(expired.result.expired_snapshot_ids) == 10  # expired in the worker
    assert expired.result.deleted_files["data_files"] == 10  # the rewrite's inputs, no longer reached
    assert [s.snapshot_id for s in catalog.load_table(name).snapshots()] == [rewritten.result.snapshot_id_after]

    orphan = Path(local_path(catalog.load_table(name).location())) / "data" / "stray.parquet"
    orphan.write_bytes(b"left by a writer that died")
    age_files([str(orphan)], hours=100)
    cleaned = run_step(CleanStep(table=name, retained=1, quarantine_days=0, reference_namespaces=[namespace],
                                 log=LOG), reader, None, run_job)
    assert jobs[-1] == "clean" and cleaned.result.orphan_file_count == 1 and not orphan.exists()
    assert table_fingerprint(catalog.load_table(name)) == rows

    converted = run_step(ConvertEqualityDeletesStep(table=name, log=LOG), reader, None, run_job)
    assert jobs[-1] == "clean", "no equality deletes: no job"
    assert converted.result.converted_equality_delete_files == 0

    listed = run_step(RestoreQuarantineStep(table=name, log=LOG), reader, None, run_job)
    assert jobs[-1] == "restore_quarantine" and listed.result.runs == {}  # quarantine_days=0 moved nothing


def test_the_runner_hands_a_prepared_steps_job_its_args(lake_hook, namespace):
    """The job runner gets the args prepare made, and nothing runs for a dry run."""
    name = f"{namespace}.dry"
    create_events_table(lake_hook.catalog, name, days=1, commits_per_day=3, rows_per_commit=5)
    reader = CatalogTable(lake_hook.catalog, name)
    seen = []
    dry = run_step(RewriteStep(table=name, dry_run=True, log=LOG), reader, None, seen.append)
    assert seen == [] and dry.result.dry_run and dry.after == dry.before

    def refuse(args):
        seen.append(args)
        raise RuntimeError("no Spark here")

    try:
        run_step(RewriteStep(table=name, log=LOG), reader, None, refuse)
    except RuntimeError:
        pass
    assert isinstance(seen[0], RewriteJobArgs) and seen[0].table == name


def test_the_fleet_runs_without_airflow_leases_busy_tables_and_failed_batch_items(lake_hook, namespace):
    """steps/fleet.py without Spark: each table planned once (a missing one fails alone), each rewrite
    leased first (a table another run holds is left, busy), one batch job for the prepared tables, a
    failed item fails its table and gives its lease back, a dry run hands its lease on."""
    from airflow_lake_provider.core.contracts import AirflowRun, BatchItemOutcome, BatchJobResult
    from airflow_lake_provider.core.lease import LeaseSettings
    from airflow_lake_provider.hooks.lease import HeldLeases, TableLeaseHook
    from airflow_lake_provider.steps.fleet import plan_fleet, rewrite_fleet

    a, b, held, missing = (f"{namespace}.{t}" for t in ("a", "b", "held", "missing"))
    for name in (a, b, held):
        create_events_table(lake_hook.catalog, name, days=1, commits_per_day=4, rows_per_commit=5)
    hook = TableLeaseHook(lake_hook)
    other, _ = hook.try_acquire(held, "elsewhere/d/r", LeaseSettings(ttl_seconds=600))

    def no_job(args):
        raise AssertionError(f"no job expected: {args}")

    planned = plan_fleet([a, missing, b, held, a], {"min_input_files": 2}, data_interval=(None, None),
                         reader_of=lake_hook.table_reader, run=None, run_job=no_job, log=LOG)
    assert [p["table"] for p in planned.results] == [a, b, held] and all(p["groups"] for p in planned.results)
    assert list(planned.failures) == [missing] and "does not exist" in planned.failures[missing]
    assert planned.failed("plan") is not None and "1 of 4 tables were not maintained by plan" in str(
        planned.failed("plan"))

    batches = []

    def failing_batch(args):
        batches.append([job.args["table"] for job in args.jobs])
        return BatchJobResult(outcomes=[BatchItemOutcome(status="failed", error_class="Boom", message="no Spark")
                                        for _ in args.jobs])

    run = AirflowRun(dag_id="fleet", run_id="r1", task_id="rewrite")
    lease = LeaseSettings(on_busy="skip", holder="dep")
    work = [{"table": p["table"], "plan": p} for p in planned.results]
    leases = HeldLeases(hook, LOG)
    failed = rewrite_fleet(work, None, lease=lease, leases=leases, release_leases=True,
                           reader_of=lake_hook.table_reader, run=run, run_job=failing_batch, log=LOG)
    assert batches == [[a, b]] and failed.results == [] and failed.changed == []
    assert failed.failures == {a: "Boom: no Spark", b: "Boom: no Spark"}
    assert list(failed.busy) == [held] and "elsewhere/d/r" in failed.busy[held]
    assert leases.held() == [] and not hook.load(a)[1].held and hook.load(held)[1].record.token == other.token

    dry = rewrite_fleet(work[:1], {"dry_run": True}, lease=lease, leases=leases, release_leases=False,
                        reader_of=lake_hook.table_reader, run=run, run_job=no_job, log=LOG)
    assert [r["table"] for r in dry.results] == [a] and dry.results[0]["dry_run"] and not dry.failures
    assert dry.results[0]["lease"]["holder"] == "dep/fleet/r1" and [c.table for c in dry.changed] == [a]
    assert hook.release(leases.of(a)).startswith("Released") and hook.release(other).startswith("Released")
