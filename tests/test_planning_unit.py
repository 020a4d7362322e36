"""Unit tests of the compaction planner: Iceberg 1.10's binpack rules on hand-made file lists,
plus the PyIceberg adapter on small real tables (SQLite catalog, no Spark)."""

from __future__ import annotations

import json
from collections import Counter

import pyarrow as pa
import pytest

from airflow_lake_provider.exceptions import LakeConfigError, LakeSnapshotError
from airflow_lake_provider.core.contracts import PlanGroup, PlanResult
from airflow_lake_provider.core.planning import (
    DataFileInfo,
    RewriteOptions,
    expected_output_files,
    plan_rewrite,
    plan_table,
    write_max_file_size,
)

# A small target keeps the arithmetic readable: min 75, max 180, writeMaxFileSize 140.
T = 100


def f(name: str, size: int, part: str | None = "a", *, spec: int = 0, deletes: int = 0, deleted_rows: int = 0,
      records: int = 100) -> DataFileInfo:
    return DataFileInfo(
        path=f"s3://wh/{name}.parquet",
        spec_id=spec,
        partition={"cat": part},
        size_bytes=size,
        record_count=records,
        delete_file_paths=tuple(f"s3://wh/{name}-del{i}.parquet" for i in range(deletes)),
        delete_record_count=deleted_rows,
    )


def opts(**kw) -> RewriteOptions:
    return RewriteOptions(target_file_size_bytes=kw.pop("target_file_size_bytes", T), **kw)


def sizes(plan: PlanResult) -> list[list[int]]:
    return [[x.size_bytes for x in g.file_details] for g in plan.groups]


# ---------------------------------------------------------------------------------------------
# Options
# ---------------------------------------------------------------------------------------------


def test_defaults_match_iceberg():
    o = RewriteOptions(target_file_size_bytes=536870912)
    assert (o.min_input_files, o.max_file_group_size_bytes) == (5, 100 * 1024**3)
    assert (o.delete_file_threshold, o.delete_ratio_threshold, o.rewrite_all) == (2**31 - 1, 0.3, False)
    r = o.resolved()
    assert r.min_file_size_bytes == 402653184  # (long) (512 MiB * 0.75)
    assert r.max_file_size_bytes == 966367641  # (long) (512 MiB * 1.80), truncated
    assert write_max_file_size(o) == 751619276  # target + (max - target) * 0.5, truncated


def test_resolved_keeps_explicit_sizes():
    r = opts(min_file_size_bytes=10, max_file_size_bytes=1000).resolved()
    assert (r.min_file_size_bytes, r.max_file_size_bytes) == (10, 1000)


def test_to_iceberg_options_spells_out_every_threshold():
    assert opts(min_input_files=2, rewrite_all=True, max_files=3).to_iceberg_options() == {
        "target-file-size-bytes": "100",
        "min-file-size-bytes": "75",
        "max-file-size-bytes": "180",
        "min-input-files": "2",
        "max-file-group-size-bytes": str(100 * 1024**3),
        "delete-file-threshold": str(2**31 - 1),
        "delete-ratio-threshold": "0.3",
        "rewrite-all": "true",
    }


def test_from_iceberg_options_round_trip():
    o = opts(min_file_size_bytes=5, delete_ratio_threshold=0.5, max_bytes=1000)
    back = RewriteOptions.from_iceberg_options(o.to_iceberg_options(), max_bytes=1000)
    assert back == o.resolved()


def test_from_table_properties():
    assert RewriteOptions.from_table_properties({}).target_file_size_bytes == 536870912
    props = {"write.target-file-size-bytes": "1048576"}
    assert RewriteOptions.from_table_properties(props).target_file_size_bytes == 1048576
    o = RewriteOptions.from_table_properties(props, target_file_size_bytes=2000, min_input_files=None, max_files=7)
    assert (o.target_file_size_bytes, o.min_input_files, o.max_files) == (2000, 5, 7)
    with pytest.raises(LakeConfigError, match="Unknown rewrite option.*target_size"):
        RewriteOptions.from_table_properties({}, target_size=1)
    with pytest.raises(LakeConfigError, match="write.target-file-size-bytes' must be a whole number; got 'big'"):
        RewriteOptions.from_table_properties({"write.target-file-size-bytes": "big"})


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"target_file_size_bytes": 0}, "target_file_size_bytes must be positive; got 0"),
        ({"target_file_size_bytes": -5}, "target_file_size_bytes must be positive; got -5"),
        ({"target_file_size_bytes": "abc"}, "target_file_size_bytes must be a whole number; got 'abc' (str)"),
        ({"target_file_size_bytes": 1.5}, "target_file_size_bytes must be a whole number; got 1.5 (float)"),
        ({"min_input_files": True}, "min_input_files must be a whole number; got True (bool)"),
        ({"min_input_files": 0}, "min_input_files must be positive; got 0"),
        ({"min_input_files": 2**31}, "min_input_files must be at most 2147483647"),
        ({"min_file_size_bytes": -1}, "min_file_size_bytes must be >= 0; got -1"),
        ({"min_file_size_bytes": 100}, "min_file_size_bytes (100) must be smaller than target_file_size_bytes (100)"),
        ({"min_file_size_bytes": 150}, "min_file_size_bytes (150) must be smaller than target_file_size_bytes"),
        ({"max_file_size_bytes": 100}, "max_file_size_bytes (100) must be larger than target_file_size_bytes (100)"),
        ({"max_file_size_bytes": 50}, "max_file_size_bytes (50) must be larger than target_file_size_bytes"),
        ({"max_file_group_size_bytes": 0}, "max_file_group_size_bytes must be positive"),
        ({"delete_file_threshold": -1}, "delete_file_threshold must be >= 0; got -1"),
        ({"delete_ratio_threshold": 0}, "delete_ratio_threshold must be > 0 and <= 1; got 0"),
        ({"delete_ratio_threshold": 1.5}, "delete_ratio_threshold must be > 0 and <= 1; got 1.5"),
        ({"delete_ratio_threshold": "0.3"}, "delete_ratio_threshold must be a number; got '0.3'"),
        ({"rewrite_all": "yes"}, "rewrite_all must be true or false; got 'yes'"),
        ({"max_files": -1}, "max_files must be positive; got -1"),
        ({"max_files": 0}, "max_files must be positive; got 0"),
        ({"max_bytes": -10}, "max_bytes must be positive; got -10"),
        ({"max_bytes": "1GB"}, "max_bytes must be a whole number; got '1GB' (str)"),
    ],
)
def test_validation_errors(kwargs, message):
    with pytest.raises(LakeConfigError) as err:
        RewriteOptions(**{"target_file_size_bytes": T, **kwargs}).validate()
    assert message in str(err.value)
    assert str(err.value).startswith("Invalid rewrite options: ")


def test_validation_reports_all_problems_and_planning_validates():
    with pytest.raises(LakeConfigError) as err:
        opts(min_input_files=0, max_files=-1).validate()
    assert "min_input_files" in str(err.value) and "max_files" in str(err.value)
    with pytest.raises(LakeConfigError, match="target_file_size_bytes must be positive"):
        plan_rewrite([f("x", 1)], RewriteOptions(target_file_size_bytes=0))


def test_tiny_target_fails_like_iceberg():
    # Iceberg: max = (long) (1 * 1.8) = 1, not > target 1.
    with pytest.raises(LakeConfigError, match=r"max_file_size_bytes \(1\) must be larger"):
        RewriteOptions(target_file_size_bytes=1).validate()
    RewriteOptions(target_file_size_bytes=2).validate()  # min 1, max 3: fine


# ---------------------------------------------------------------------------------------------
# Candidates, grouping, packing, keeping
# ---------------------------------------------------------------------------------------------


def test_candidates_are_files_strictly_outside_min_max():
    files = [f("a", 74), f("b", 75), f("c", 100), f("d", 180), f("e", 181), f("g", 10)]
    plan = plan_rewrite(files, opts(min_input_files=2))
    assert sizes(plan) == [[74, 181, 10]]  # scan order is kept


def test_explicit_min_max_bounds():
    files = [f("a", 20), f("b", 30), f("c", 150), f("d", 151)]
    plan = plan_rewrite(files, opts(min_file_size_bytes=30, max_file_size_bytes=150, min_input_files=2))
    assert sizes(plan) == [[20, 151]]


def test_groups_per_partition_sorted_by_partition_json():
    files = [f("b1", 10, "b"), f("a1", 10, "a"), f("b2", 10, "b"), f("n1", 10, None), f("a2", 10, "a"),
             f("n2", 10, None), f("c1", 10, "c")]
    plan = plan_rewrite(files, opts(min_input_files=2))
    # '"' sorts before 'n': named partitions first, the null partition last; lone "c" is dropped
    assert [g.partition for g in plan.groups] == [{"cat": "a"}, {"cat": "b"}, {"cat": None}]
    assert [[x.path.split("/")[-1] for x in g.file_details] for g in plan.groups] == [
        ["a1.parquet", "a2.parquet"], ["b1.parquet", "b2.parquet"], ["n1.parquet", "n2.parquet"]
    ]


def test_groups_per_spec_without_current_spec():
    files = [f("s0a", 10, spec=0), f("s0b", 10, spec=0), f("s1a", 10, spec=1), f("s1b", 10, spec=1)]
    plan = plan_rewrite(files, opts(min_input_files=2))
    assert [(g.spec_id, g.files) for g in plan.groups] == [(0, 2), (1, 2)]


def test_other_specs_are_lumped_into_the_current_specs_null_partition():
    # Iceberg's groupByPartition: files of a non-current spec go to an all-null partition of the
    # current spec, together with current-spec files whose partition values are all null.
    old = [DataFileInfo(f"old{i}", 0, {}, 10, 1) for i in range(2)]
    current = [f("new-null", 10, None, spec=1), f("new-a1", 10, "a", spec=1), f("new-a2", 10, "a", spec=1)]
    plan = plan_rewrite(old + current, opts(min_input_files=2), current_spec_id=1, current_partition_fields=["cat"])
    by_partition = {json.dumps(g.partition): [x.path for x in g.file_details] for g in plan.groups}
    assert by_partition == {
        '{"cat": "a"}': ["s3://wh/new-a1.parquet", "s3://wh/new-a2.parquet"],
        '{"cat": null}': ["old0", "old1", "s3://wh/new-null.parquet"],
    }
    assert {g.spec_id for g in plan.groups} == {1}
    assert plan.groups[1].file_details[0].spec_id == 0  # files keep their own spec


def test_bin_packing_splits_at_max_file_group_size_in_order():
    files = [f(str(i), s) for i, s in enumerate([40, 40, 30, 50, 60, 200, 10])]
    plan = plan_rewrite(files, opts(min_input_files=1, max_file_group_size_bytes=100))
    # bins: [40,40] [30,50] [60] [200] [10]; single files only survive when > max (180)
    assert sizes(plan) == [[40, 40], [30, 50], [200]]


def test_bin_packing_closes_a_group_at_max_file_group_input_files():
    files = [f(str(i), 10) for i in range(7)]
    plan = plan_rewrite(files, opts(min_input_files=3, max_file_group_input_files=3))
    assert sizes(plan) == [[10, 10, 10], [10, 10, 10]]  # the seventh file's group of one is dropped
    assert opts(max_file_group_input_files=3).to_iceberg_options()["max-file-group-input-files"] == "3"
    assert "max-file-group-input-files" not in opts().to_iceberg_options()  # uncapped: not sent (Iceberg < 1.12)
    with pytest.raises(LakeConfigError, match="max_file_group_input_files must be positive"):
        opts(max_file_group_input_files=0).validate()


def test_bin_packing_fills_to_exactly_the_max():
    files = [f(str(i), s) for i, s in enumerate([50, 50, 1, 60, 40])]
    plan = plan_rewrite(files, opts(min_input_files=2, max_file_group_size_bytes=100))
    assert sizes(plan) == [[50, 50], [1, 60]]  # 1+60+40 > 100 -> [40] alone, dropped


def test_min_input_files_keeps_or_drops():
    four = [f(str(i), 10) for i in range(4)]
    assert plan_rewrite(four, opts()).is_empty  # default 5
    assert sizes(plan_rewrite(four, opts(min_input_files=4))) == [[10, 10, 10, 10]]
    # a single small file is never enough, whatever min_input_files says
    assert plan_rewrite([f("x", 10)], opts(min_input_files=1)).is_empty


def test_enough_content_and_too_much_content():
    # two files over the target together: kept despite min_input_files
    assert sizes(plan_rewrite([f("a", 60), f("b", 41)], opts())) == [[60, 41]]
    assert plan_rewrite([f("a", 60), f("b", 40)], opts()).is_empty  # exactly the target is not "more"
    # one file over the max is rewritten alone (split into right-sized files)
    plan = plan_rewrite([f("big", 400)], opts())
    assert sizes(plan) == [[400]] and plan.groups[0].expected_output_files == 4


def test_a_single_file_with_too_many_deletes_is_kept():
    files = [f("ok", 100, deletes=2), f("fine", 120)]
    plan = plan_rewrite(files, opts(delete_file_threshold=2))
    assert sizes(plan) == [[100]] and plan.groups[0].delete_files == 2
    assert plan_rewrite(files, opts(delete_file_threshold=3)).is_empty


def test_delete_ratio_threshold():
    at = f("at", 100, deletes=1, deleted_rows=30, records=100)
    below = f("below", 100, deletes=1, deleted_rows=29, records=100)
    assert sizes(plan_rewrite([at], opts())) == [[100]]  # 30% >= 0.3
    assert plan_rewrite([below], opts()).is_empty
    assert sizes(plan_rewrite([below], opts(delete_ratio_threshold=0.29))) == [[100]]
    # more deleted rows than records is capped at 100%; no delete files means no ratio
    assert sizes(plan_rewrite([f("x", 100, deletes=1, deleted_rows=500)], opts(delete_ratio_threshold=1))) == [[100]]
    assert plan_rewrite([f("y", 100, deleted_rows=50)], opts()).is_empty
    # an empty data file: 0/0 is NaN in Java, never >= threshold
    assert plan_rewrite([f("z", 100, deletes=1, deleted_rows=0, records=0)], opts()).is_empty


def test_a_file_with_deletes_pulls_its_whole_group_in():
    files = [f("small", 10), f("del", 100, deletes=3)]
    plan = plan_rewrite(files, opts(delete_file_threshold=3))
    assert sizes(plan) == [[10, 100]]


def test_rewrite_all_takes_every_file_and_every_group():
    files = [f("a", 100), f("b", 120, "b"), f("c", 10, "c")]
    plan = plan_rewrite(files, opts(rewrite_all=True, max_file_group_size_bytes=150))
    assert sizes(plan) == [[100], [120], [10]]
    files = [f("a", 100), f("b", 100)]
    assert sizes(plan_rewrite(files, opts(rewrite_all=True, max_file_group_size_bytes=150))) == [[100], [100]]


def test_delete_files_are_counted_once_per_group_and_plan():
    shared = ("s3://wh/pos-del.parquet",)
    files = [DataFileInfo(f"p{i}", 0, {"cat": "a"}, 10, 5, shared, 1) for i in range(5)]
    plan = plan_rewrite(files, opts())
    assert plan.groups[0].delete_files == 1
    assert plan.to_json()["totals"]["delete_files"] == 1


# ---------------------------------------------------------------------------------------------
# expected_output_files: SizeBasedFileRewritePlanner.expectedOutputFiles by hand
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("input_size", "kwargs", "expected"),
    [
        (50, {}, 1),  # under the target
        (100, {}, 1),  # exact: remainder 0, average 100 < 110
        (180, {}, 2),  # remainder 80 > min 75: keep the remainder file
        (170, {}, 2),  # remainder 70 <= 75, but one 170 file would be >= 110: round up
        (1050, {}, 10),  # remainder 50 <= 75, average 105 < min(110, 140): round down
        (1099, {}, 11),  # remainder 99 > 75
        (1001, {"min_file_size_bytes": 0}, 11),  # any remainder > 0 is a valid file
        (1030, {"max_file_size_bytes": 104}, 11),  # writeMax 102: average 103 is too big
        (1020, {"max_file_size_bytes": 104}, 11),  # average 102 is not < writeMax 102: round up
        (1010, {"max_file_size_bytes": 104}, 10),  # average 101 < 102: round down
    ],
)
def test_expected_output_files(input_size, kwargs, expected):
    assert expected_output_files(input_size, opts(**kwargs)) == expected


def test_expected_output_files_iceberg_doc_example():
    gib = 1024**3
    o = RewriteOptions(target_file_size_bytes=gib)
    assert expected_output_files(int(10.1 * gib), o) == 10  # 10 files of 1.01 GB, not 11


def test_plan_expected_output_files_total():
    files = [f(str(i), 60) for i in range(5)]  # 300 bytes -> 3 files of 100
    d = plan_rewrite(files, opts()).to_json()
    assert d["groups"][0]["expected_output_files"] == 3 and d["expected_output_files"] == 3


# ---------------------------------------------------------------------------------------------
# Budget
# ---------------------------------------------------------------------------------------------


def _backlog() -> list[DataFileInfo]:
    files = []
    for p, count in (("a", 6), ("b", 3), ("c", 5), ("d", 2), ("e", 4)):
        files += [f(f"{p}{i}", 10, p) for i in range(count)]
    return files


def test_budget_skips_groups_that_do_not_fit_and_keeps_order():
    plan = plan_rewrite(_backlog(), opts(min_input_files=2, max_files=9))
    # groups a(6) b(3) c(5) d(2) e(4): a, b fit (9); c, d, e would overflow
    assert [(g.partition["cat"], g.files) for g in plan.groups] == [("a", 6), ("b", 3)]
    assert plan.skipped_by_budget == 3
    plan = plan_rewrite(_backlog(), opts(min_input_files=2, max_files=8))
    assert [(g.partition["cat"], g.files) for g in plan.groups] == [("a", 6), ("d", 2)]
    plan = plan_rewrite(_backlog(), opts(min_input_files=2, max_bytes=45))  # a=60 b=30 c=50 d=20 e=40 bytes
    assert [(g.partition["cat"], g.bytes) for g in plan.groups] == [("b", 30)] and plan.skipped_by_budget == 4


def test_budget_runs_converge():
    files = _backlog()
    o = opts(min_input_files=2, max_files=7, max_bytes=70)
    runs = []
    while True:
        plan = plan_rewrite(files, o)
        if plan.is_empty:
            break
        d = plan.to_json()["totals"]
        assert d["files"] <= 7 and d["bytes"] <= 70
        done = {x.path for g in plan.groups for x in g.file_details}
        files = [x for x in files if x.path not in done]  # the rewrite "removed" them
        runs.append(sorted(g.partition["cat"] for g in plan.groups))
        assert len(runs) < 10
    assert plan.skipped_by_budget == 0 and files == []
    assert runs == [["a"], ["b", "d"], ["c"], ["e"]]


def test_budget_takes_the_partitions_with_most_files_and_deletes_per_byte_first():
    files = ([f(f"big{i}", 40, "big") for i in range(3)]            # 3 files, 120 bytes: 0.025 per byte
             + [f(f"tiny{i}", 2, "tiny") for i in range(6)]          # 6 files, 12 bytes: 0.5 per byte
             + [f(f"del{i}", 10, "del", deletes=1) for i in range(2)])  # 2 files + 2 deletes, 20 bytes: 0.2
    plan = plan_rewrite(files, opts(min_input_files=2, max_bytes=40))
    assert [g.partition["cat"] for g in plan.groups] == ["del", "tiny"]  # plan order, chosen by benefit
    assert plan.skipped_by_budget == 1
    plan = plan_rewrite(files, opts(min_input_files=2, max_files=7))
    assert [g.partition["cat"] for g in plan.groups] == ["tiny"]  # del (2) would make 8


def test_budget_takes_a_partition_with_all_its_groups_or_not_at_all():
    # Partition a packs into two groups (group size 50); the rewrite is scoped by partition, so
    # taking one of them would rewrite both and break the budget.
    files = [f(f"a{i}", 10, "a") for i in range(8)] + [f(f"b{i}", 10, "b") for i in range(3)]
    plan = plan_rewrite(files, opts(min_input_files=2, max_file_group_size_bytes=50, max_files=6))
    assert [(g.partition["cat"], g.files) for g in plan.groups] == [("b", 3)]
    assert plan.skipped_by_budget == 2
    plan = plan_rewrite(files, opts(min_input_files=2, max_file_group_size_bytes=50, max_files=11))
    assert sorted(g.partition["cat"] for g in plan.groups) == ["a", "a", "b"]


# ---------------------------------------------------------------------------------------------
# Serialisation
# ---------------------------------------------------------------------------------------------


def test_to_json_from_json_round_trip_is_json():
    files = [
        f("a1", 10, "a", deletes=1, deleted_rows=3),
        f("a2", 20, "a"),
        DataFileInfo("old", 0, {}, 5, 1),
        f("b1", 30, "b", spec=1),
        f("b2", 40, "b", spec=1),
    ]
    plan = plan_rewrite(files, opts(min_input_files=2, max_files=100), table="ns.t", snapshot_id=42,
                        current_spec_id=1, current_partition_fields=["cat"])
    d = plan.to_json()
    text = json.dumps(d)
    back = PlanResult.from_json(json.loads(text))
    assert back.to_json() == d
    assert back == plan
    assert RewriteOptions.from_iceberg_options(back.options, max_files=back.budget.max_files) == \
        opts(min_input_files=2, max_files=100).resolved()
    assert d["table"] == "ns.t" and d["snapshot_id"] == 42 and d["skipped_by_budget"] == 0
    assert d["totals"] == {"groups": 2, "files": 5, "bytes": 105, "delete_files": 1, "partitions": 2}
    g = d["groups"][0]
    assert {k: g[k] for k in ("spec_id", "partition", "files", "bytes", "delete_files", "expected_output_files")} == {
        "spec_id": 1, "partition": {"cat": "b"}, "files": 2, "bytes": 70, "delete_files": 0, "expected_output_files": 1,
    }
    # spec-0 files are lumped under the current spec's null partition and keep their own spec
    lumped = d["groups"][1]
    assert (lumped["spec_id"], lumped["partition"], lumped["files"], lumped["delete_files"]) == (1, {"cat": None}, 3, 1)
    assert [p for g in d["groups"] for p in g["file_paths"]] == [x.path for g in plan.groups for x in g.file_details]
    assert d["options"]["min-input-files"] == "2" and d["budget"] == {"max_files": 100, "max_bytes": None}


def test_from_json_with_paths_only():
    d = {"table": "t", "snapshot_id": None, "options": {"target-file-size-bytes": "100"},
         "groups": [{"spec_id": 0, "partition": {"cat": "a"}, "file_paths": ["x", "y"], "expected_output_files": 1}]}
    plan = PlanResult.from_json(d)
    assert [x.path for x in plan.groups[0].file_details] == ["x", "y"] and plan.snapshot_id is None
    assert plan.groups[0].file_paths == ("x", "y")
    assert PlanGroup.from_json(plan.groups[0].to_json()) == plan.groups[0]


def test_without_files_keeps_the_sums():
    plan = plan_rewrite([f("a1", 10, deletes=1), f("a2", 20)], opts(min_input_files=2), table="t")
    summary = plan.without_files()
    assert summary.totals == plan.totals and summary.groups[0].delete_files == 1
    assert "file_paths" not in summary.to_json()["groups"][0] and summary.groups[0].file_paths is None
    assert {k: v for k, v in plan.to_json()["groups"][0].items() if not k.startswith("file_")} == \
        summary.to_json()["groups"][0]


def test_empty_plan():
    plan = plan_rewrite([], opts(), table="t")
    assert plan.is_empty
    d = plan.to_json()
    assert d["groups"] == [] and d["totals"]["files"] == 0 and d["expected_output_files"] == 0


# ---------------------------------------------------------------------------------------------
# plan_table on real PyIceberg tables
# ---------------------------------------------------------------------------------------------


@pytest.fixture()
def catalog(tmp_path):
    from pyiceberg.catalog.sql import SqlCatalog

    cat = SqlCatalog("t", uri=f"sqlite:///{tmp_path}/c.db", warehouse=f"file://{tmp_path}/wh")
    cat.create_namespace("ns")
    return cat


def _schema():
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField, StringType

    return Schema(NestedField(1, "id", LongType(), required=False), NestedField(2, "category", StringType(), required=False))


def _batch(start: int, n: int, category: str) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64()), "category": [category] * n})


@pytest.fixture()
def events(catalog):
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.transforms import IdentityTransform

    spec = PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "category"))
    table = catalog.create_table("ns.events", schema=_schema(), partition_spec=spec)
    for i, (category, commits) in enumerate((("a", 6), ("b", 3), ("c", 5))):
        for j in range(commits):
            table.append(_batch(1000 * i + 10 * j, 10, category))
    return catalog.load_table("ns.events")


def _files_per_partition(table) -> Counter:
    files = table.inspect.files()
    return Counter(row["category"] for row in files.column("partition").to_pylist())


def test_plan_table_matches_the_tables_files(events):
    assert _files_per_partition(events) == {"a": 6, "b": 3, "c": 5}
    plan = plan_table(events, table_name="ns.events")  # default target 512 MiB: every file is small
    assert plan.snapshot_id == events.current_snapshot().snapshot_id
    assert plan.options["target-file-size-bytes"] == "536870912"
    assert [(g.partition, g.files) for g in plan.groups] == [({"category": "a"}, 6), ({"category": "c"}, 5)]
    live = set(events.inspect.files().column("file_path").to_pylist())
    assert {x.path for g in plan.groups for x in g.file_details} <= live
    for g in plan.groups:
        assert g.spec_id == 0 and g.expected_output_files == 1
        assert all(x.record_count == 10 and x.size_bytes > 0 for x in g.file_details)

    plan = plan_table(events, RewriteOptions.from_table_properties(events.properties, min_input_files=3))
    assert [g.files for g in plan.groups] == [6, 3, 5]
    assert plan.to_json()["totals"]["files"] == events.inspect.files().num_rows


def test_plan_table_filter_and_snapshot(events):
    o = RewriteOptions.from_table_properties(events.properties, min_input_files=2)
    plan = plan_table(events, o, partition_filter="category = 'b'")
    assert [(g.partition, g.files) for g in plan.groups] == [({"category": "b"}, 3)]
    # an older snapshot: after the first 4 commits only partition a (4 files) existed
    old = events.history()[3].snapshot_id
    plan = plan_table(events, o, snapshot_id=old)
    assert plan.snapshot_id == old and [g.files for g in plan.groups] == [4]
    with pytest.raises(LakeSnapshotError):
        plan_table(events, o, snapshot_id=123)


@pytest.mark.parametrize(
    ("text", "message"),
    [("category = ", "Invalid partition_filter 'category = ': it does not parse \\(at char"), ("nope = 'a'", "Could not find field with name nope")],
)
def test_plan_table_invalid_filter(events, text, message):
    with pytest.raises(LakeConfigError, match=message):
        plan_table(events, partition_filter=text)


def test_plan_table_target_from_table_property_and_budget(events):
    with events.transaction() as tx:
        tx.set_properties({"write.target-file-size-bytes": "1048576"})
    plan = plan_table(events, RewriteOptions.from_table_properties(events.properties, max_files=5))
    assert plan.options["target-file-size-bytes"] == "1048576"
    assert [g.files for g in plan.groups] == [5] and plan.skipped_by_budget == 1


def test_plan_table_without_snapshot(catalog):
    table = catalog.create_table("ns.empty", schema=_schema())
    plan = plan_table(table, table_name="ns.empty")
    assert plan.is_empty and plan.snapshot_id is None and plan.table == "ns.empty"


def test_plan_table_partition_evolution_lumps_old_files(catalog):
    from pyiceberg.transforms import IdentityTransform

    table = catalog.create_table("ns.evolving", schema=_schema())  # unpartitioned (spec 0)
    for j in range(3):
        table.append(_batch(10 * j, 10, "a"))
    table.update_spec().add_field("category", IdentityTransform(), "category").commit()
    table = catalog.load_table("ns.evolving")
    for j in range(2):
        table.append(_batch(100 + 10 * j, 10, "b"))
    plan = plan_table(table, RewriteOptions.from_table_properties(table.properties, min_input_files=2))
    spec_id = table.spec().spec_id
    assert [(g.spec_id, g.partition, g.files) for g in plan.groups] == [
        (spec_id, {"category": "b"}, 2),
        (spec_id, {"category": None}, 3),  # the unpartitioned files, as one group like Iceberg
    ]
    assert {x.spec_id for x in plan.groups[1].file_details} == {0}
    assert json.loads(json.dumps(plan.to_json()))["totals"]["files"] == 5
