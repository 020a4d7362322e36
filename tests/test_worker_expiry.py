"""The expire step in the worker (``engine="pyiceberg"``, what ``auto`` takes for small tables) and
its job (``engine="spark"``: Iceberg's ``RemoveSnapshots`` in the driver's JVM, no Spark application)
against Iceberg's ``ExpireSnapshotsSparkAction``, the judge.

The table is built once by Spark and registered a second time from the same metadata file (a
twin: same snapshot IDs, same files). Iceberg's action expires the chosen snapshots of one and
reports the files it would delete (``expireFiles()``, which commits but deletes nothing); the step
expires the same snapshots of the twin through the Airflow-free runner (its job run in the shared
session, the Spark action forbidden), deleting for real. The
files gone from disk must be exactly Iceberg's list, kind by kind, and both tables must keep the
same snapshots, refs and statistics, and read the same rows at every snapshot they keep, through
PyIceberg (which reads what the files hold) and through Spark with filters (which prune by the
manifests' metrics).
"""

from __future__ import annotations

import importlib
import os
import uuid
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, Phase, assume, example, given, settings
from hypothesis import strategies as st
from lake_checks import local_path, rows_fingerprint

from airflow_lake_provider.core.contracts import ExpireJobArgs, ExpiryOutcome
from airflow_lake_provider.core.worker_expiry import ReachableFiles, expire_in_worker, too_large, worker_refusal
from airflow_lake_provider.exceptions import LakeConfigError
from airflow_lake_provider.jobs import iceberg
from airflow_lake_provider.steps.expire import ExpireStep
from airflow_lake_provider.steps.runner import CatalogTable, run_step

# Iceberg's FileInfo types, as the step's result names them.
_KINDS = {"DATA": "data_files", "POSITION_DELETES": "position_delete_files",
          "EQUALITY_DELETES": "equality_delete_files", "Manifest": "manifests", "Manifest List": "manifest_lists",
          "Statistics Files": "statistics_files"}


def _no_job(args):
    raise AssertionError(f"a Spark job was started: {args}")


def _in_driver(spark):
    """The expire job, run in the shared session, with Iceberg's Spark action forbidden."""
    from unittest import mock

    from airflow_lake_provider.jobs import expire

    def run_job(args):
        with mock.patch.object(expire, "expire_with_spark_action", side_effect=AssertionError("the Spark action")):
            return ExpiryOutcome.from_json(expire.run(spark, "lake", args.to_json()))
    return run_job


def _files_under(location: str) -> set[str]:
    root = local_path(location)
    return {os.path.join(d, f) for d, _, files in os.walk(root) for f in files if not f.endswith(".crc")}


@dataclass(frozen=True)
class History:
    """A table's history as a recipe: its format version, the operations after a first insert, how
    many of main's last snapshots stay, and which of the older ones are expired (by position)."""

    version: int
    operations: tuple[str, ...]
    keep_last: int
    expire: tuple[bool, ...]


OPERATIONS = ("insert", "delete", "update", "merge", "rewrite_data", "drop_dangling", "rewrite_manifests", "stats",
              "tag", "branch")
#: The regression case: every kind of file an expiry meets, a tag's files kept, a branch's own commit.
EVERYTHING = History(2, ("tag", "insert", "insert", "insert", "stats", "delete", "merge", "rewrite_data",
                         "drop_dangling", "rewrite_manifests", "branch", "insert"), 2, (True,) * 16)
#: Generated histories after the regression case (derandomized: the same ones every run).
EXAMPLES = int(os.environ.get("LAKE_EXPIRY_EXAMPLES", "2"))


@st.composite
def histories(draw) -> History:
    return History(draw(st.sampled_from([1, 2])),
                   tuple(draw(st.lists(st.sampled_from(OPERATIONS), min_size=3, max_size=9))),
                   draw(st.integers(1, 3)), tuple(draw(st.lists(st.booleans(), min_size=16, max_size=16))))


def _build(spark, name: str, history: History) -> list[int]:
    """The table by Spark, as ``history`` says; returns main's snapshot IDs, oldest first."""
    mode = "merge-on-read" if history.version >= 2 else "copy-on-write"
    spark.sql(f"CREATE TABLE lake.{name} (id BIGINT, day DATE, v STRING) USING iceberg PARTITIONED BY (day) "
              f"TBLPROPERTIES ('format-version'='{history.version}', 'write.delete.mode'='{mode}', "
              f"'write.update.mode'='{mode}', 'write.merge.mode'='copy-on-write')")
    sql = {
        "delete": f"DELETE FROM lake.{name} WHERE id % 7 = 0",
        "update": f"UPDATE lake.{name} SET v = 'updated' WHERE id % 5 = 1",
        "merge": f"MERGE INTO lake.{name} t USING (SELECT id FROM range(0, 10)) s ON t.id = s.id "
                 "WHEN MATCHED THEN UPDATE SET v = 'merged'",
        "rewrite_data": f"CALL lake.system.rewrite_data_files(table => '{name}', options => map('min-input-files', "
                        "'2', 'delete-file-threshold', '1'))",
        # the deletes the rewrite applied now dangle: rewritten away (v2 only)
        "drop_dangling": f"CALL lake.system.rewrite_position_delete_files(table => '{name}', "
                         "options => map('rewrite-all', 'true'))" if history.version >= 2 else None,
        "rewrite_manifests": f"CALL lake.system.rewrite_manifests('{name}')",
        "stats": f"CALL lake.system.compute_table_stats(table => '{name}')",
    }
    tags = branches = 0
    for batch, operation in enumerate(("insert", *history.operations)):
        if operation == "insert":
            spark.sql(f"INSERT INTO lake.{name} SELECT id, date_add(DATE'2026-01-01', CAST(id % 3 AS INT)), "
                      f"concat('v', id) FROM range({batch * 30}, {batch * 30 + 30})")
        elif operation == "tag":
            spark.sql(f"ALTER TABLE lake.{name} CREATE TAG t{tags}")
            tags += 1
        elif operation == "branch":
            spark.sql(f"ALTER TABLE lake.{name} CREATE BRANCH b{branches}")
            spark.sql(f"INSERT INTO lake.{name}.branch_b{branches} VALUES ({10_000 + batch}, DATE'2026-01-05', 'b')")
            branches += 1
        elif sql[operation] is not None:
            spark.sql(sql[operation]).collect()
    return [row.snapshot_id for row in spark.sql(
        f"SELECT snapshot_id FROM lake.{name}.history WHERE is_current_ancestor ORDER BY made_current_at").collect()]


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
          phases=[Phase.explicit, Phase.generate],
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@example(history=EVERYTHING, engine="pyiceberg")
@example(history=EVERYTHING, engine="spark")
@given(history=histories(), engine=st.sampled_from(["pyiceberg", "spark"]))
def test_the_worker_and_the_job_delete_what_icebergs_action_deletes_and_keep_what_it_keeps(
        spark, lake_hook, namespace, history, engine):
    name = f"{namespace}.judged_{uuid.uuid4().hex[:8]}"
    twin = f"{name}_twin"
    main_ids = _build(spark, name, history)
    catalog = lake_hook.catalog
    table = catalog.load_table(name)
    catalog.register_table(twin, table.metadata_location)
    refs = {ref_name: ref.snapshot_id for ref_name, ref in table.metadata.refs.items()}
    held = set(refs.values())
    older = main_ids[:-history.keep_last]
    expire_ids = [sid for sid, chosen in zip(older, history.expire, strict=False) if chosen and sid not in held]
    if history is EVERYTHING:  # old appends, the MERGE, the rewrites' inputs, a statistics file
        assert len(expire_ids) >= 5 and table.metadata.statistics
    assume(expire_ids)

    # Iceberg: the files its action deletes for these IDs (committed on the judged table, nothing deleted).
    action = iceberg.actions(spark).expireSnapshots(iceberg.load_table(spark, "lake", name))
    action = action.expireOlderThan(0).retainLast(1)  # as the expire job: the named IDs alone
    for sid in expire_ids:
        action = action.expireSnapshotId(sid)
    icebergs = {(info.getPath(), _KINDS[info.getType()]) for info in action.expireFiles().collectAsList()}
    if history is EVERYTHING:
        assert {kind for _, kind in icebergs} >= {"data_files", "position_delete_files", "manifests",
                                                  "manifest_lists", "statistics_files"}

    # Ours, on the twin: the step through the runner, with no job allowed.
    on_disk = _files_under(table.location())
    step = ExpireStep(table=twin, engine=engine, snapshot_ids=expire_ids)
    ran = run_step(step, CatalogTable(catalog, twin), None, _no_job if engine == "pyiceberg" else _in_driver(spark))
    gone = on_disk - _files_under(table.location())
    assert gone == {local_path(path) for path, _ in icebergs}
    expected_counts = {kind: sum(1 for _, k in icebergs if k == kind) for kind in _KINDS.values()}
    assert ran.result.deleted_files == expected_counts
    assert sorted(ran.result.expired_snapshot_ids) == sorted(expire_ids)
    assert ran.result.expired_by == ("pyiceberg" if engine == "pyiceberg" else "driver")
    assert ran.outcome.summary == (f"expired {len(expire_ids)} snapshots, deleted {len(icebergs)} files no live "
                                   "snapshot needs")

    # Both keep the same metadata, and read the same rows at every snapshot they keep.
    judged, ours = catalog.load_table(name), catalog.load_table(twin)
    assert [s.snapshot_id for s in ours.snapshots()] == [s.snapshot_id for s in judged.snapshots()]
    assert ours.metadata.refs == judged.metadata.refs and set(ours.metadata.refs) == set(refs)
    assert ours.metadata.statistics == judged.metadata.statistics
    for snapshot in judged.snapshots():
        def rows_at(t, sid=snapshot.snapshot_id):
            return rows_fingerprint(t.scan(snapshot_id=sid).to_arrow().to_pylist())
        assert rows_at(ours) == rows_at(judged)
    for where in ("id % 7 = 0", "day = DATE'2026-01-02'", "id BETWEEN 5 AND 12", "v = 'merged'", "id >= 500"):
        def rows(t, where=where):
            return sorted(spark.sql(f"SELECT * FROM lake.{t} WHERE {where}").collect())
        assert rows(twin) == rows(name), where
    for branch in (ref for ref in refs if ref.startswith("b")):
        def branch_rows(t, branch=branch):
            return sorted(spark.sql(f"SELECT * FROM lake.{t}.branch_{branch}").collect())
        assert branch_rows(twin) == branch_rows(name), branch


def test_a_writer_committing_meanwhile_makes_the_worker_try_again(spark, lake_hook, namespace):
    """A writer's commit between the worker's read and its commit: the commit is refused by its
    asserted refs (nothing expired on stale metadata), the worker reads again and expires."""
    from demo_data import create_events_table

    name = f"{namespace}.raced"
    table = create_events_table(lake_hook.catalog, name, days=1, commits_per_day=5, rows_per_commit=3)
    ids = [s.snapshot_id for s in table.snapshots()]
    args = ExpireJobArgs(table=name, snapshot_ids=ids[:2], refs={"main": ids[-1]}).validate()
    catalog_commit = table.catalog.commit_table
    writes = []

    def a_writer_first(tbl, requirements, updates):
        if not writes:  # the writer's own commit comes through here too: once
            writes.append(name)
            writer = lake_hook.load_table(name)
            writer.append(writer.scan().to_arrow().slice(0, 2))
        return catalog_commit(tbl, requirements, updates)

    table.catalog.commit_table = a_writer_first  # type: ignore[method-assign]
    try:
        done = expire_in_worker(table, args, ReachableFiles(table.io))
    finally:
        del table.catalog.commit_table
    assert len(done.lost_commits) == 1 and done.outcome is not None
    after = lake_hook.load_table(name)
    assert done.outcome.expired_snapshot_ids == sorted(ids[:2])
    assert done.outcome.snapshot_id_after == after.current_snapshot().snapshot_id not in ids  # the writer's
    assert [s.snapshot_id for s in after.snapshots()][:3] == ids[2:]
    assert after.scan().to_arrow().num_rows == 17  # 15 written, 2 appended by the writer, none lost


def test_what_the_worker_leaves_to_the_job_is_said_before_anything_changes(lake_hook, namespace):
    from demo_data import create_events_table

    name = f"{namespace}.refused"
    table = create_events_table(lake_hook.catalog, name, days=1, commits_per_day=3, rows_per_commit=2,
                                properties={"gc.enabled": "false"})
    ids = [s.snapshot_id for s in table.snapshots()]
    assert worker_refusal(table.metadata, ids).startswith("gc.enabled=false")
    assert worker_refusal(table.metadata.model_copy(update={"format_version": 3}), ids).startswith("format v3")
    on_s3 = table.metadata.model_copy(update={"location": "s3://bucket/ns/t", "properties": {}})
    assert worker_refusal(on_s3, ids).startswith("a table on s3:// (deleting through PyArrow's file system")
    step = ExpireStep(table=name, engine="pyiceberg", snapshot_ids=ids[:1])
    with pytest.raises(LakeConfigError, match=r"engine='pyiceberg' cannot expire .*gc.enabled=false.*engine='auto'"):
        run_step(step, CatalogTable(lake_hook.catalog, name), None, _no_job)
    assert [s.snapshot_id for s in lake_hook.load_table(name).snapshots()] == ids  # untouched
    # auto hands it to the job, with the same IDs.
    jobs = []
    run_step(ExpireStep(table=name, snapshot_ids=ids[:1]), CatalogTable(lake_hook.catalog, name), None,
             lambda args: jobs.append(args) or ExpiryOutcome(expired_snapshot_ids=ids[:1]))
    assert [job.snapshot_ids for job in jobs] == [ids[:1]]


def test_auto_leaves_a_history_whose_manifest_lists_are_long_to_the_job(lake_hook, namespace, monkeypatch):
    # Appends carry every earlier manifest on: 6 commits, lists of 1 to 6 entries, 21 together.
    from demo_data import create_events_table

    name = f"{namespace}.long_lists"
    table = create_events_table(lake_hook.catalog, name, days=1, commits_per_day=6, rows_per_commit=2)
    ids = [s.snapshot_id for s in table.snapshots()]
    monkeypatch.setattr("airflow_lake_provider.core.worker_expiry.AUTO_SPARK_MIN_LIST_ENTRIES", 21)
    assert too_large(table, ReachableFiles(table.io)) is None
    monkeypatch.setattr("airflow_lake_provider.core.worker_expiry.AUTO_SPARK_MIN_LIST_ENTRIES", 5)
    assert too_large(table, ReachableFiles(table.io)) == "manifest lists of over 21 entries together (Spark from 5)"
    jobs = []
    run_step(ExpireStep(table=name, snapshot_ids=ids[:1]), CatalogTable(lake_hook.catalog, name), None,
             lambda args: jobs.append(args) or ExpiryOutcome(expired_snapshot_ids=ids[:1]))
    assert [job.snapshot_ids for job in jobs] == [ids[:1]]
    assert [s.snapshot_id for s in lake_hook.load_table(name).snapshots()] == ids  # the worker changed nothing


def test_clean_expires_its_policys_snapshots_in_the_worker_and_lists_orphans_only_when_one_can_be(
        spark, lake_hook, namespace):
    """The clean step's policy removes snapshots: the worker expires them; Iceberg's orphan listing
    (the clean job, here in the shared session) runs only when a file is old enough to be an orphan,
    and its result carries both."""
    from demo_data import create_events_table
    from lake_checks import age_files, table_fingerprint

    from airflow_lake_provider.core.job_registry import job_for
    from airflow_lake_provider.steps.clean import CleanStep

    catalog = lake_hook.catalog
    name = f"{namespace}.cleaned"
    create_events_table(catalog, name, days=1, commits_per_day=6, rows_per_commit=4)
    rows = table_fingerprint(catalog.load_table(name))
    ids = [s.snapshot_id for s in catalog.load_table(name).snapshots()]
    jobs = []

    def run_job(args):
        job = job_for(args)
        jobs.append(args)
        return job.result.from_json(importlib.import_module(job.module).run(spark, "lake", args.to_json()))

    def clean(retained):
        return run_step(CleanStep(table=name, retained=retained, override_table_retention=True, quarantine_days=0,
                                  reference_namespaces=[namespace]), CatalogTable(catalog, name), None, run_job)

    # Nothing under the table is old: the worker expires, no job at all.
    first = clean(retained=4)
    assert jobs == [] and sorted(first.result.expired_snapshot_ids) == sorted(ids[:2])
    assert first.result.deleted_files["manifest_lists"] == 2 and first.result.orphan_file_count == 0
    assert first.outcome.summary == "removed 2 snapshots (KEEP_LATEST_COMMITS) and 0 orphan files"

    # A dead writer's file, aged: the worker expires, the job lists orphans only, the result has both.
    stray = os.path.join(local_path(catalog.load_table(name).location()), "data", "stray.parquet")
    with open(stray, "wb") as out:
        out.write(b"left by a writer that died")
    age_files([stray], hours=100)
    second = clean(retained=2)
    assert [(job.snapshot_ids, job.removed_refs, job.refs) for job in jobs] == [([], [], None)]
    assert sorted(second.result.expired_snapshot_ids) == sorted(ids[2:4])
    assert second.result.orphan_file_count == 1 and not os.path.exists(stray)
    assert [s.snapshot_id for s in catalog.load_table(name).snapshots()] == ids[4:]
    assert table_fingerprint(catalog.load_table(name)) == rows
