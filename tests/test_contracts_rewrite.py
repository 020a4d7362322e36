"""The plan and rewrite steps' contracts: what the plan hands the rewrite, what the rewrite keeps of it.

The operator tests run real operators on a real table in dry-run mode or with an empty plan: no
Spark application starts, the result still says which options the rewrite would run with.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from demo_data import create_events_table
from airflow_lake_provider.core.contracts import (
    CleanResult, PartitionPredicates, PlanGroup, PlannedPartition, PlanResult, RestoreQuarantineResult, RewriteJobArgs,
    RewriteResult, SparkPlanJobArgs, SparkPlanJobResult,
)
from airflow_lake_provider.core.planning import RewriteOptions
from airflow_lake_provider.exceptions import LakeConfigError
from airflow_lake_provider.operators.plan import IcebergRewritePlanOperator
from airflow_lake_provider.operators.rewrite import IcebergRewriteDataFilesOperator
from lake_checks import FakeTaskInstance

MiB, GiB = 1024**2, 1024**3


def _context(task_id: str) -> dict:
    return {"ti": FakeTaskInstance(task_id=task_id)}


@pytest.fixture
def events(lake_hook, namespace) -> str:
    name = f"{namespace}.events"
    create_events_table(lake_hook.catalog, name, days=2, commits_per_day=6, rows_per_commit=10)
    return name


# -- the options merge: the rewrite overrides what it is given, keeps the rest of the plan ----
def test_a_size_override_keeps_every_other_choice_the_plan_made(events):
    plan = IcebergRewritePlanOperator(
        task_id="plan", table=events, target_file_size_bytes=64 * MiB, min_input_files=10,
        max_file_group_size_bytes=GiB, delete_file_threshold=3,
    ).execute(_context("plan"))
    rewrite = IcebergRewriteDataFilesOperator(
        task_id="rewrite", table=events, plan=plan, options={"target-file-size-bytes": 128 * MiB}, dry_run=True)
    options = rewrite.execute(_context("rewrite"))["options"]
    assert options["target-file-size-bytes"] == str(128 * MiB)
    # The plan's choices that the rewrite was not given stay (Iceberg's defaults: 5, 100 GiB, 2^31-1).
    assert options["min-input-files"] == "10"
    assert options["max-file-group-size-bytes"] == str(GiB)
    assert options["delete-file-threshold"] == "3"
    # The plan derived min/max from its target (75 % / 180 %): they follow the new target.
    assert options["min-file-size-bytes"] == str(int(128 * MiB * 0.75))
    assert options["max-file-size-bytes"] == str(int(128 * MiB * 1.8))


def test_sizes_the_plan_set_itself_stay_when_only_the_target_changes(events):
    plan = IcebergRewritePlanOperator(
        task_id="plan", table=events, target_file_size_bytes=64 * MiB, min_file_size_bytes=MiB,
    ).execute(_context("plan"))
    rewrite = IcebergRewriteDataFilesOperator(
        task_id="rewrite", table=events, plan=plan,
        options={"target-file-size-bytes": 128 * MiB, "min-input-files": 2}, dry_run=True)
    options = rewrite.execute(_context("rewrite"))["options"]
    assert (options["target-file-size-bytes"], options["min-input-files"]) == (str(128 * MiB), "2")
    assert options["min-file-size-bytes"] == str(MiB)  # explicit in the plan: kept
    assert options["max-file-size-bytes"] == str(int(128 * MiB * 1.8))  # derived in the plan: follows


def test_merged_keeps_what_is_not_given_and_moves_only_derived_sizes():
    planned = RewriteOptions.from_iceberg_options(RewriteOptions(
        target_file_size_bytes=1000, max_file_size_bytes=5000, min_input_files=10, max_file_group_size_bytes=GiB,
        delete_ratio_threshold=0.5, rewrite_all=True).to_iceberg_options())
    merged = planned.merged(target_file_size_bytes=2000, min_input_files=None, max_file_size_bytes=None)
    assert merged.to_iceberg_options() == {
        **planned.to_iceberg_options(),
        "target-file-size-bytes": "2000",
        "min-file-size-bytes": "1500",  # was 750, derived from 1000: follows the target
        "max-file-size-bytes": "5000",  # set by the plan: stays
    }
    assert planned.merged() == planned and planned.merged(min_input_files=2).min_input_files == 2
    with pytest.raises(LakeConfigError, match="Unknown rewrite option.*target_size"):
        planned.merged(target_size=1)


# -- templated values reach the rewrite typed -----------------------------------------------
def test_a_templated_false_dry_run_is_false(events):
    empty = IcebergRewritePlanOperator(task_id="plan", table=events, min_input_files=1000).execute(_context("plan"))
    assert empty["groups"] == []
    rewrite = IcebergRewriteDataFilesOperator(
        task_id="rewrite", table=events, plan=empty, dry_run="False",
        zorder_columns="['event_id', 'amount']", strategy="zorder", max_commit_attempts="5",
        commit_retry_backoff_seconds="0.5", options="{'partial-progress.max-commits': '4'}")
    result = rewrite.execute(_context("rewrite"))
    assert result["dry_run"] is False  # the empty plan, not a dry run, left the table alone
    assert rewrite._job_hook is None and result["committed_snapshot_ids"] == []
    assert rewrite.zorder_columns == ["event_id", "amount"] and rewrite.max_commit_attempts == 5
    assert result["options"]["partial-progress.max-commits"] == "4"


def test_a_templated_none_plan_is_no_plan(events):
    rewrite = IcebergRewriteDataFilesOperator(task_id="rewrite", table=events, plan="None", dry_run="true")
    result = rewrite.execute(_context("rewrite"))
    assert result["dry_run"] is True and result["planned_snapshot_id"] is None
    assert result["options"]["min-input-files"] == "5"  # the table's defaults: no plan gave others


# -- the contracts themselves: JSON round trips and validation ------------------------------
def test_the_plan_round_trips_through_its_contract(events):
    plan = IcebergRewritePlanOperator(task_id="plan", table=events, include_file_paths=True).execute(_context("plan"))
    typed = PlanResult.from_json(json.loads(json.dumps(plan)))
    assert typed.to_json() == plan
    assert set(plan) == {"table", "snapshot_id", "groups", "totals", "expected_output_files", "options", "budget",
                         "skipped_by_budget", "engine", "scope"}
    assert typed.groups[0].file_paths and typed.scope.partition_filter is None and typed.engine == "pyiceberg"
    without_paths = PlanGroup(spec_id=0, partition={"day": 1}, files=2).to_json()
    assert "file_paths" not in without_paths and "file_details" not in without_paths


def test_rewrite_job_args_round_trip_and_defaults():
    args = RewriteJobArgs(table="ns.t", planned_snapshot_id=7, partitions=(PlannedPartition(0, {"day": 3}),),
                          strategy="sort", sort_order="amount DESC NULLS LAST", options={"output-spec-id": "0"})
    back = RewriteJobArgs.from_json(json.loads(json.dumps(args.to_json())))
    assert back == args and back.partitions[0].partition == {"day": 3} and back.output_spec_id == 0
    bare = RewriteJobArgs.from_json({"table": "ns.t"})
    assert (bare.max_attempts, bare.retry_backoff_seconds, bare.partitions) == (3, 2.0, None)
    assert IcebergRewriteDataFilesOperator(task_id="r", table="ns.t").max_commit_attempts == bare.max_attempts


@pytest.mark.parametrize(("changes", "message"), [
    ({"strategy": "shuffle"}, "strategy must be one of binpack, sort, zorder"),
    ({"strategy": "zorder"}, "strategy 'zorder' needs zorder_columns"),
    ({"strategy": "sort", "sort_order": "amount SIDEWAYS"}, "Cannot read sort order term 'amount SIDEWAYS'"),
    ({"max_attempts": 0}, "max_commit_attempts must be a whole number from 1 to 10"),
    ({"max_attempts": 11}, "max_commit_attempts must be a whole number from 1 to 10"),
    ({"retry_backoff_seconds": 301}, "commit_retry_backoff_seconds must be a number of seconds from 0 to 300"),
    ({"options": {"partial-progress.max-commits": "0"}}, "options['partial-progress.max-commits'] must be a whole number >= 1"),
])
def test_rewrite_job_args_refuse_what_spark_would_fail_on(changes, message):
    with pytest.raises(LakeConfigError, match=re.escape(message)):
        RewriteJobArgs(table="ns.t", **changes).validate()


def test_a_recovered_result_counts_the_earlier_commits_like_the_job():
    args = RewriteJobArgs(table="ns.t", planned_snapshot_id=1, options={"output-spec-id": "0"})
    data = {"operation": "replace", "deleted-data-files": "6", "added-data-files": "1", "removed-files-size": "600",
            "removed-delete-files": "2", "removed-equality-delete-files": "1"}
    deletes = {"operation": "replace", "removed-delete-files": "3", "added-delete-files": "1", "removed-files-size": "90"}
    result = RewriteResult.recovered(args, 1, [(10, data), (11, deletes)])
    assert result.to_json() == {
        **RewriteResult.nothing_done(args, 1, dry_run=False).to_json(),
        "committed_snapshot_ids": [10, 11], "snapshot_id_after": 11, "rewritten_data_files": 6,
        "added_data_files": 1, "rewritten_bytes": 600, "removed_delete_files": 4, "removed_equality_delete_files": 1,
        "recovered_from_earlier_try": True,
    }
    assert RewriteResult.from_json(json.loads(json.dumps(result.to_json()))) == result


def test_spark_plan_job_args_and_result_round_trip():
    args = SparkPlanJobArgs(table="ns.t", snapshot_id=5, options={"target-file-size-bytes": "100"},
                            predicates=PartitionPredicates(inclusive="spec_id = 0", strict="false"))
    assert SparkPlanJobArgs.from_json(json.loads(json.dumps(args.to_json()))) == args
    refused = SparkPlanJobResult(unaligned_files=3)
    assert SparkPlanJobResult.from_json(refused.to_json()) == refused and refused.plan is None


def test_the_rewrite_doc_gives_use_starting_sequence_number_the_default_the_job_uses():
    """One default, the job's (``SAFE_OPTION_DEFAULTS``), not Iceberg's true, wherever the page names one."""
    from airflow_lake_provider.jobs.rewrite import SAFE_OPTION_DEFAULTS

    text = " ".join((Path(__file__).resolve().parent.parent / "docs" / "operators" / "rewrite.md").read_text().split())
    default = SAFE_OPTION_DEFAULTS["use-starting-sequence-number"]
    assert default == "false"
    option = r"`?use[-_]starting[-_]sequence[-_]number`?"
    stated = re.findall(rf"{option}\s*\(default (\w+)\)", text, re.I)  # `use-starting-sequence-number` (default X)
    stated += re.findall(rf"{option}=(\w+),\s*# the default", text, re.I)  # the example's comment
    stated += re.findall(rf"default \({option}=(\w+)\)", text, re.I)  # the operator's default (...=X)
    assert stated and {value.lower() for value in stated} == {default}, stated


@pytest.mark.parametrize(("doc", "contracts"), [
    ("plan.md", (PlanResult, PlanGroup)),
    ("rewrite.md", (RewriteResult,)),
    ("clean.md", (CleanResult,)),
    ("restore.md", (RestoreQuarantineResult,)),
])
def test_the_docs_list_every_xcom_key_of_the_contracts(doc, contracts):
    text = (Path(__file__).resolve().parent.parent / "docs" / "operators" / doc).read_text()
    xcom = text.split("## XCom `return_value`", 1)[1].split("\n## ", 1)[0]  # not the settings' table
    documented = set(re.findall(r"^\| `([a-z_]+)` \|", xcom, re.M))
    keys = {f.name for contract in contracts for f in dataclasses.fields(contract)}
    assert documented == keys
