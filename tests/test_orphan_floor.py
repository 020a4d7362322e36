"""The orphan floor, proven with files of a concurrent in-flight writer (a separate process).

* Files that writer wrote but has not committed yet are unreferenced and young: the clean step
  keeps them, and the writer's later commit of them succeeds and reads back.
* Files referenced only by a tag or only by a branch are kept even when older than the floor.
* Unreferenced files older than the floor (a writer that died) are deleted: the control.
"""

from __future__ import annotations


import pytest

from demo_data import create_events_table
from airflow_lake_provider.operators.clean import IcebergCleanPolicyOperator
from test_concurrency_matrix import writer  # noqa: F401 - the other-writer process fixture
from lake_checks import age_files, files_on_disk, local_path

pytestmark = pytest.mark.spark_submit


def test_orphan_floor_keeps_young_and_referenced_files_of_an_in_flight_writer(lake_hook, namespace, writer):  # noqa: F811
    name = f"{namespace}.events"
    create_events_table(lake_hook.catalog, name, days=1, commits_per_day=3, rows_per_commit=10)
    table = lake_hook.load_table(name)
    tagged_snapshot = table.current_snapshot().snapshot_id
    tagged_files = {local_path(t.file.file_path) for t in table.scan().plan_files()}
    table.manage_snapshots().create_tag(tagged_snapshot, "audit-v1").create_branch(tagged_snapshot, "staging").commit()

    # The in-flight writer: files written, not committed (young, unreferenced).
    in_flight = writer("stage_files", table=name, token="in-flight", start_id=5000, rows=7, day="2026-01-01")
    # The same writer commits another batch to the branch only.
    branch_files = writer("stage_files", table=name, token="branch", start_id=6000, rows=5, day="2026-01-01")
    writer("commit_staged", table=name, token="branch", branch="staging")
    # A writer that died long ago: unreferenced and old.
    dead = writer("stage_files", table=name, token="dead", start_id=7000, rows=3, day="2026-01-01")
    # Main moves on: every row deleted, so the tagged files are held by the tag (and branch) alone.
    table = lake_hook.load_table(name)
    table.delete("event_id >= 0")
    table = lake_hook.load_table(name)
    assert table.scan().to_arrow().num_rows == 0

    # Everything is old now except the in-flight writer's files.
    age_files(files_on_disk(table) - {local_path(p) for p in in_flight}, hours=96)
    age_files(dead, hours=96)

    # Other tables are no concern here (tests/test_orphan_references.py): the session's catalog is large.
    result = IcebergCleanPolicyOperator(task_id="clean", table=name, retained=1, orphan_older_than_hours=24,
                                        reference_namespaces=[namespace]).execute({})
    deleted = {local_path(p) for p in result["orphan_files"]}
    assert deleted == {local_path(p) for p in dead}  # the control: old unreferenced files do go
    on_disk = files_on_disk(lake_hook.load_table(name))
    assert {local_path(p) for p in in_flight} <= on_disk  # young: kept although unreferenced
    assert {local_path(p) for p in branch_files} <= on_disk  # held by the branch
    assert tagged_files <= on_disk  # held by the tag and the branch

    # The in-flight writer now commits: its files are all there, the rows read back.
    writer("commit_staged", table=name, token="in-flight")
    table = lake_hook.load_table(name)
    assert sorted(r["event_id"] for r in table.scan().to_arrow().to_pylist()) == list(range(5000, 5007))
    assert table.scan(snapshot_id=tagged_snapshot).to_arrow().num_rows == 30
    assert table.scan(snapshot_id=table.refs()["staging"].snapshot_id).to_arrow().num_rows == 35
