"""The pure parts of the never-orphan check: one key per file whatever its spelling, the name
rules, the table's own files and the reason sentences (no Spark)."""

from __future__ import annotations

import pytest

from airflow_lake_provider.core.orphan_guard import (
    CandidateIndex,
    file_key,
    is_version_hint,
    own_table_guard,
    referenced_by,
)


@pytest.mark.parametrize("spellings", [
    ["file:///lake/t/data/x.parquet", "file:/lake/t/data/x.parquet", "/lake/t/data/x.parquet",
     "/lake//t/data/x.parquet"],
    ["s3://bucket/t/x.parquet", "s3a://bucket/t/x.parquet", "s3n://Bucket/t/x.parquet", "s3://bucket//t/x.parquet"],
    ["/lake/t/data/name=a%2Fb/x.parquet", "/lake/t/data/name=a/b/x.parquet"],  # decoded: kept either way
    ["/lake/t/data/name=a%20b/x.parquet", "file:/lake/t/data/name=a b/x.parquet"],
    ["/lake/t/metadata/", "/lake/t/metadata"],
])
def test_every_spelling_of_one_file_has_one_key(spellings):
    assert len({file_key(path) for path in spellings}) == 1


@pytest.mark.parametrize("one, other", [
    ("s3://bucket/t/x.parquet", "s3://other/t/x.parquet"),  # another bucket
    ("s3://bucket/t/x.parquet", "/bucket/t/x.parquet"),  # another store
    ("hdfs://nn/t/x.parquet", "s3://nn/t/x.parquet"),
    ("/lake/t/x.parquet", "/lake/t/x.parquet.crc"),
    ("/lake/t/name=a+b/x.parquet", "/lake/t/name=a b/x.parquet"),  # '+' is not decoded as a space
])
def test_different_files_keep_different_keys(one, other):
    assert file_key(one) != file_key(other)


def test_the_version_hint_is_known_by_name():
    assert is_version_hint("file:/lake/t/metadata/version-hint.text")
    assert not is_version_hint("/lake/t/metadata/version-hint.text.tmp")


def test_the_candidate_index_matches_any_spelling_and_offers_every_name_form():
    index = CandidateIndex(["file:/lake/t/data/a%20b.parquet", "file:/lake/t/data/y.parquet"])
    assert index.match("file:///lake/t/data/a b.parquet") == ["file:/lake/t/data/a%20b.parquet"]
    assert index.match("/lake/other/y.parquet") == [] and index.match(None) == []
    assert {"a b.parquet", "a%20b.parquet", "y.parquet"} <= set(index.names())
    assert not CandidateIndex([])


def test_the_tables_own_files_each_with_why_and_nothing_else():
    candidates = ["file:/t/metadata/00003-a.metadata.json", "file:/t/metadata/00001-a.metadata.json",
                  "file:/t/metadata/1-s.stats", "file:/t/metadata/partition-stats-1-p.parquet",
                  "file:/t/metadata/version-hint.text", "file:/t/data/orphan.parquet",
                  "file:/t/metadata/00000-a.metadata.json"]
    kept = own_table_guard(candidates, current_metadata="file:///t/metadata/00003-a.metadata.json",
                           metadata_log=["file:///t/metadata/00001-a.metadata.json"],
                           statistics={"file:///t/metadata/1-s.stats": 1},
                           partition_statistics={"file:///t/metadata/partition-stats-1-p.parquet": 1})
    assert kept == {
        "file:/t/metadata/00003-a.metadata.json": "the table's current metadata file",
        "file:/t/metadata/00001-a.metadata.json":
            "a metadata file in the table's metadata log (write.metadata.previous-versions-max)",
        "file:/t/metadata/1-s.stats": "the table's statistics file (Puffin) of snapshot 1",
        "file:/t/metadata/partition-stats-1-p.parquet": "the table's partition-statistics file of snapshot 1",
        "file:/t/metadata/version-hint.text": "the table's version hint (metadata/version-hint.text)",
    }  # a metadata file that fell off the log, and the dead writer's file, are orphans


def test_reasons_name_the_table_and_the_kind():
    assert referenced_by("ns.copy", "data") == "referenced by table ns.copy (data file)"
    assert referenced_by("ns.copy", "manifest_list") == "referenced by table ns.copy (manifest list)"
