"""The operators on real tables: bad input fails before Spark, retries find their own commit,
clean policies remove exactly what they should, dry runs change nothing."""

from __future__ import annotations

import pyarrow as pa
import pytest

from demo_data import create_events_table
from airflow_lake_provider.exceptions import LakeConfigError, LakeSnapshotError, LakeTableNotFound
from airflow_lake_provider.operators.clean import IcebergCleanPolicyOperator
from airflow_lake_provider.operators.expire import IcebergExpireSnapshotsOperator
from airflow_lake_provider.operators.plan import IcebergRewritePlanOperator
from airflow_lake_provider.operators.rewrite import IcebergRewriteDataFilesOperator
from lake_checks import FakeTaskInstance, live_files, table_fingerprint


def _context(task_id: str = "rewrite", run_id: str = "manual__1") -> dict:
    return {"ti": FakeTaskInstance(task_id=task_id, run_id=run_id)}


@pytest.fixture
def small_table(lake_hook, namespace):
    name = f"{namespace}.events"
    create_events_table(lake_hook.catalog, name, days=2, commits_per_day=6, rows_per_commit=10)
    return name


# -- bad input: clear errors, before any Spark application starts ---------------------------
@pytest.mark.parametrize(
    ("operator", "kwargs", "error", "message"),
    [
        (IcebergRewritePlanOperator, {"table": "{ns}.ghost"}, LakeTableNotFound, "does not exist in catalog 'lake'"),
        (IcebergRewritePlanOperator, {"table": "events"}, LakeConfigError, "has no namespace"),
        (IcebergRewritePlanOperator, {"table": "{ns}.ev;DROP TABLE x"}, LakeConfigError, "not a valid identifier"),
        (IcebergRewritePlanOperator, {"table": "{ns}.events", "target_file_size_bytes": -5}, LakeConfigError, "target_file_size_bytes"),
        (IcebergRewritePlanOperator, {"table": "{ns}.events", "min_input_files": 0}, LakeConfigError, "min_input_files"),
        (IcebergRewritePlanOperator, {"table": "{ns}.events", "partition_filter": "day ==== 3"}, LakeConfigError, "filter"),
        (IcebergRewriteDataFilesOperator, {"table": "{ns}.events", "strategy": "shuffle"}, LakeConfigError, "strategy must be one of"),
        (IcebergRewriteDataFilesOperator, {"table": "{ns}.events", "plan": {"table": "{ns}.events", "snapshot_id": 123, "groups": [{"spec_id": 0}]}},
         LakeSnapshotError, "planned snapshot 123 is not in the history"),
        (IcebergRewriteDataFilesOperator, {"table": "{ns}.events", "options": {"min-file-size-bytes": -1}}, LakeConfigError,
         "min_file_size_bytes"),
        (IcebergRewriteDataFilesOperator, {"table": "{ns}.events", "strategy": "sort", "sort_order": "amount DESC; DROP"},
         LakeConfigError, "Cannot read sort order term"),
        (IcebergRewriteDataFilesOperator, {"table": "{ns}.events", "strategy": "zorder", "zorder_columns": ["amount", "nope"]},
         LakeConfigError, "zorder_columns names columns the table does not have: nope"),
        (IcebergRewriteDataFilesOperator, {"table": "{ns}.events", "options": {"output-spec-id": 7}},
         LakeConfigError, r"output-spec-id 7 is not a partition spec of .*: its specs are \[0, 1\] \(current: 1\)"),
        (IcebergExpireSnapshotsOperator, {"table": "{ns}.events", "override_table_retention": True, "older_than": "1d", "retain_last": 0},
         LakeConfigError, "retain_last must be an integer >= 1"),
        (IcebergExpireSnapshotsOperator, {"table": "{ns}.events", "retain_last": 3}, LakeConfigError,
         "retain_last given, but the table's own retention applies"),
        (IcebergExpireSnapshotsOperator, {"table": "{ns}.events", "override_table_retention": "maybe"}, LakeConfigError,
         "override_table_retention must be true or false"),
        (IcebergExpireSnapshotsOperator, {"table": "{ns}.events", "older_than": "yesterday-ish"}, LakeConfigError, "older_than"),
        (IcebergExpireSnapshotsOperator, {"table": "{ns}.events", "snapshot_ids": [42]}, LakeSnapshotError, "42"),
        (IcebergCleanPolicyOperator, {"table": "{ns}.events", "orphan_older_than_hours": 2}, LakeConfigError, "under the 24 h floor"),
        (IcebergCleanPolicyOperator, {"table": "{ns}.events", "policy": "KEEP_EVERYTHING"}, LakeConfigError, "KEEP_LATEST_COMMITS"),
        (IcebergCleanPolicyOperator, {"table": "{ns}.events", "retained": 0}, LakeConfigError, "retained"),
        (IcebergCleanPolicyOperator, {"table": "{ns}.events", "protected_snapshot_ids": [7]}, LakeSnapshotError, "7"),
        (IcebergRewritePlanOperator, {"table": "{ns}.events", "engine": "gpu"}, LakeConfigError, "engine must be one of"),
        (IcebergRewritePlanOperator, {"table": "{ns}.events", "scope": "everything"}, LakeConfigError, "scope"),
        (IcebergRewritePlanOperator, {"table": "{ns}.events", "max_files": 0}, LakeConfigError, "max_files"),
        (IcebergRewritePlanOperator, {"table": "{ns}.events", "max_bytes": -1}, LakeConfigError, "max_bytes"),
        (IcebergRewritePlanOperator, {"table": "{ns}.events", "delete_ratio_threshold": 1.5}, LakeConfigError, "delete_ratio_threshold"),
        (IcebergRewritePlanOperator, {"table": "{ns}.events", "target_file_size_bytes": 100 << 20, "max_file_size_bytes": 10 << 20},
         LakeConfigError, "max_file_size_bytes"),
        (IcebergRewriteDataFilesOperator, {"table": "{ns}.events", "max_commit_attempts": 0}, LakeConfigError, "max_commit_attempts"),
        (IcebergRewriteDataFilesOperator, {"table": "{ns}.events", "rewriter": "duckdb"}, LakeConfigError,
         "rewriter must be one of auto, iceberg, arrow"),
        (IcebergRewriteDataFilesOperator, {"table": "{ns}.events", "rewriter": "arrow", "strategy": "sort"},
         LakeConfigError, "rewriter 'arrow' only bin-packs; strategy 'sort' needs rewriter='auto' or 'iceberg'"),
        (IcebergRewriteDataFilesOperator, {"table": "{ns}.events", "commit_retry_backoff_seconds": -1}, LakeConfigError,
         "commit_retry_backoff_seconds"),
        (IcebergRewriteDataFilesOperator, {"table": "{ns}.events",
                                           "options": {"partial-progress.enabled": "true", "partial-progress.max-commits": 0}},
         LakeConfigError, "partial-progress.max-commits"),
        (IcebergRewriteDataFilesOperator, {"table": "{ns}.events", "dry_run": "maybe"}, LakeConfigError, "dry_run must be true or false"),
        (IcebergRewriteDataFilesOperator, {"table": "{ns}.events", "options": {"max-concurrent-file-group-rewrites": 0}},
         LakeConfigError, "max-concurrent-file-group-rewrites"),
        (IcebergExpireSnapshotsOperator, {"table": "{ns}.events", "override_table_retention": True, "retain_last": "many"},
         LakeConfigError, "retain_last"),
        (IcebergCleanPolicyOperator, {"table": "{ns}.events", "retained": "three"}, LakeConfigError, "retained"),
        (IcebergCleanPolicyOperator, {"table": "{ns}.events", "orphan_older_than_hours": -5, "force_orphan_floor": True},
         LakeConfigError, "orphan_older_than_hours"),
        (IcebergCleanPolicyOperator, {"table": "{ns}.events", "policy": "KEEP_LATEST_BY_HOURS", "retained": -1}, LakeConfigError,
         "retained"),
    ],
)
def test_bad_input_fails_clearly_before_spark(lake_hook, small_table, bad_input, operator, kwargs, error, message):
    ns = small_table.split(".")[0]
    kwargs = {k: (v.replace("{ns}", ns) if isinstance(v, str) else v) for k, v in kwargs.items()}
    if isinstance(kwargs.get("plan"), dict):
        kwargs["plan"] = {**kwargs["plan"], "table": kwargs["plan"]["table"].replace("{ns}", ns)}
    before = table_fingerprint(lake_hook.load_table(small_table)), lake_hook.load_table(small_table).current_snapshot().snapshot_id
    op = None
    with pytest.raises(error, match=message) as raised:
        op = operator(task_id="t", **kwargs)  # a literal value is refused here, at the DAG's parse
        op.execute(_context())
    assert op is None or op._job_hook is None  # no Spark application was started
    after = table_fingerprint(lake_hook.load_table(small_table)), lake_hook.load_table(small_table).current_snapshot().snapshot_id
    assert after == before
    given = ", ".join(f"{k}={v!r}" for k, v in kwargs.items() if v != small_table)  # the bad part only
    bad_input(operator.__name__, given, raised.value, table_checked=True)


# -- the rewrite: exactly the planned partitions, retries that do not redo work -------------
@pytest.mark.spark_submit
def test_rewrite_touches_only_planned_partitions_and_a_retry_finds_its_commit(lake_hook, small_table):
    plan = IcebergRewritePlanOperator(task_id="plan", table=small_table, partition_filter="day = '2026-01-01'").execute(_context("plan"))
    assert plan["totals"]["files"] == 6 and plan["totals"]["partitions"] == 1
    table = lake_hook.load_table(small_table)
    fingerprint = table_fingerprint(table)

    rewrite = IcebergRewriteDataFilesOperator(task_id="rewrite", table=small_table, plan=plan)
    context = _context()
    first = rewrite.execute(context)
    assert first["snapshot_id_before"] == plan["snapshot_id"]
    assert first["rewritten_data_files"] == 6 and first["added_data_files"] == 1
    table = lake_hook.load_table(small_table)
    assert live_files(table)["DATA"] == 7  # the other day's 6 files were not planned, not touched
    assert table_fingerprint(table) == fingerprint

    # The same task tried again (same run, same task id): it finds its own commit.
    again = IcebergRewriteDataFilesOperator(task_id="rewrite", table=small_table, plan=plan).execute(context)
    assert again["recovered_from_earlier_try"] is True
    assert again["committed_snapshot_ids"] == first["committed_snapshot_ids"]
    assert again["rewritten_data_files"] == 6
    assert lake_hook.load_table(small_table).current_snapshot().snapshot_id == first["snapshot_id_after"]


@pytest.mark.spark_submit
def test_rewrite_refuses_a_plan_whose_snapshot_was_rolled_back(lake_hook, small_table):
    table = lake_hook.load_table(small_table)
    parent = table.current_snapshot().parent_snapshot_id
    plan = IcebergRewritePlanOperator(task_id="plan", table=small_table).execute(_context("plan"))
    table.manage_snapshots().rollback_to_snapshot(parent).commit()
    op = IcebergRewriteDataFilesOperator(task_id="rewrite", table=small_table, plan=plan)
    with pytest.raises(LakeSnapshotError, match="no longer an ancestor of the current snapshot"):
        op.execute(_context())
    assert op._job_hook is None


# -- clean policies on a hand-built history with a tag ------------------------------------
def _history_table(lake_hook, namespace):
    """Eight commits alternating over partitions a/b (c only in commit 1), a tag on commit 2."""
    schema = pa.schema([pa.field("event_id", pa.int64(), nullable=False), pa.field("p", pa.string(), nullable=False)])
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import IdentityTransform
    from pyiceberg.types import LongType, NestedField, StringType

    iceberg_schema = Schema(NestedField(1, "event_id", LongType(), required=True), NestedField(2, "p", StringType(), required=True))
    table = lake_hook.catalog.create_table(
        f"{namespace}.hist", schema=iceberg_schema,
        partition_spec=PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "p")),
    )
    partitions = ["c", "a", "b", "a", "b", "a", "b", "a"]
    for i, p in enumerate(partitions):
        table.append(pa.table({"event_id": [i], "p": [p]}, schema=schema))
    table = lake_hook.load_table(f"{namespace}.hist")
    ids = [s.snapshot_id for s in table.snapshots()]
    table.manage_snapshots().create_tag(ids[1], "audit-2026").commit()
    return f"{namespace}.hist", ids


@pytest.mark.spark_submit
@pytest.mark.parametrize(
    ("policy", "retained", "expected_removed"),
    [
        # last version of each partition: a->7, b->6, c->0; tag keeps 1; 2,3,4,5 go. The one policy that
        # reads the table's files; KEEP_LATEST_COMMITS and KEEP_LATEST_BY_HOURS are decided from the
        # snapshot list alone, tested in test_retention_unit.py (two spark-submits each saved here).
        ("KEEP_LATEST_FILE_VERSIONS", 1, [2, 3, 4, 5]),
    ],
)
def test_clean_policies_remove_exactly_the_expected_snapshots(lake_hook, namespace, capfd, policy, retained,
                                                              expected_removed):
    name, ids = _history_table(lake_hook, namespace)
    # The policy alone (these snapshots are minutes old: the table's own 5 days would keep them all).
    dry = IcebergCleanPolicyOperator(task_id="clean", table=name, policy=policy, retained=retained, dry_run=True,
                                     override_table_retention=True).execute({})
    assert sorted(dry["would_expire_snapshot_ids"]) == sorted(ids[i] for i in expected_removed)
    assert [s.snapshot_id for s in lake_hook.load_table(name).snapshots()] == ids  # dry run changed nothing

    # The expire step before it (a dry run: no Spark), handed over as a template renders it.
    expire = IcebergExpireSnapshotsOperator(task_id="expire", table=name, dry_run=True).execute({})
    result = IcebergCleanPolicyOperator(task_id="clean", table=name, policy=policy, retained=retained,
                                        override_table_retention=True, expire_result=str(expire)).execute({})
    remaining = [s.snapshot_id for s in lake_hook.load_table(name).snapshots()]
    assert sorted(result["expired_snapshot_ids"]) == sorted(ids[i] for i in expected_removed)
    assert remaining == [sid for i, sid in enumerate(ids) if i not in expected_removed]
    assert ids[1] in remaining  # the tagged snapshot is a savepoint
    assert lake_hook.load_table(name).scan().to_arrow().num_rows == 8
    # What expire and clean together keep, stated once in the result and in the log.
    together = result["effective_retention"]
    assert together["snapshots"].startswith(
        "on main, those kept both by the table's retention [the last 1 (min-snapshots-to-keep, Iceberg default) and "
        "those younger than 5d (max-snapshot-age-ms, Iceberg default)] and by clean policy KEEP_LATEST_FILE_VERSIONS=1 "
        "[the snapshots holding the last 1 versions of every partition]")
    assert together["files"].endswith("unreferenced (orphan) files younger than 72 h")
    assert together["statement"] in capfd.readouterr().out
