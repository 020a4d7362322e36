"""When ``rewriter='auto'`` may take the Arrow rewriter (``core/arrow_rewrite.py``): pure logic, no JVM."""

from __future__ import annotations

import pytest

from airflow_lake_provider.core.arrow_rewrite import (
    arrow_ineligibility,
    dictionary_columns,
    parquet_codec,
    split_into_outputs,
    statistics_columns,
)

SCHEMA = {"fields": [{"id": 1, "name": "id", "type": "long", "required": True},
                     {"id": 2, "name": "amount", "type": "decimal(10, 2)", "required": False},
                     {"id": 3, "name": "ts", "type": "timestamptz", "required": False}]}
ELIGIBLE = {
    "strategy": "binpack", "schema": SCHEMA, "properties": {}, "format_version": 2, "current_spec_id": 1,
    "sort_order_fields": 0, "location": "file:/lake/db/t",
    "options": {"min-input-files": "5", "partial-progress.enabled": "false"},
    "planner_options": ["min-input-files", "target-file-size-bytes"],
}


def test_an_append_only_v2_table_on_local_storage_is_eligible():
    assert arrow_ineligibility(**ELIGIBLE) is None


@pytest.mark.parametrize(("change", "reason"), [
    ({"strategy": "sort"}, "strategy 'sort' sorts rows"),
    ({"format_version": 3}, "format v3 tables carry row lineage"),
    ({"options": {"output-spec-id": "0"}}, "output-spec-id names another partition spec"),
    ({"sort_order_fields": 1}, "has a sort order"),
    ({"properties": {"write.format.default": "orc"}}, "writes orc files"),
    ({"properties": {"write.parquet.compression-codec": "lz4"}}, "codec 'lz4'"),
    ({"properties": {"write.parquet.bloom-filter-enabled.column.id": "true"}}, "bloom filters"),
    ({"location": "s3://bucket/db/t"}, "not on a local file system"),
    ({"properties": {"write.data.path": "s3://bucket/data"}}, "not on a local file system"),
    ({"options": {"shuffle-partitions-per-file": "2"}}, "options ['shuffle-partitions-per-file'] are for Iceberg's"),
    ({"schema": {"fields": [{"id": 1, "name": "attrs", "type": {"type": "struct", "fields": []}}]}},
     "column 'attrs' has type struct, which Arrow does not rewrite here"),
    ({"schema": {"fields": [{"id": 1, "name": "key", "type": "uuid"}]}}, "column 'key' has type uuid"),
])
def test_each_difference_is_named(change, reason):
    found = arrow_ineligibility(**{**ELIGIBLE, **change})
    assert found is not None and reason in found, found


def test_the_worker_leaves_unknown_options_to_the_job():
    """Before a JVM the planner's options are unknown: the job checks them."""
    assert arrow_ineligibility(**{**ELIGIBLE, "options": {"any-option": "1"}, "planner_options": None}) is None


def test_codec_and_level_follow_icebergs_writer():
    # No property (tables PyIceberg creates): Iceberg's writer takes gzip (Java catalogs set zstd on create).
    assert parquet_codec({}) == ("gzip", 6)
    assert parquet_codec({"write.parquet.compression-codec": "zstd"}) == ("zstd", 3)  # parquet-mr's level
    assert parquet_codec({"write.parquet.compression-codec": "gzip", "write.parquet.compression-level": "9"}) == (
        "gzip", 9)
    assert parquet_codec({"write.parquet.compression-codec": "uncompressed"}) == ("none", None)
    assert parquet_codec({"write.parquet.compression-codec": "lz4"}) is None


def test_floats_and_columns_the_table_disables_are_written_without_a_dictionary():
    columns = [("id", "long"), ("d", "double"), ("f", "float"), ("name", "string"), ("tag", "string")]
    properties = {"write.parquet.dict-encoding-enabled.column.tag": "false"}
    assert dictionary_columns(properties, columns) == ["id", "name"]
    assert statistics_columns(columns) == ["id", "name", "tag"]  # floats: no footer statistics either


def test_files_are_split_into_outputs_of_about_equal_input_bytes():
    assert split_into_outputs([10, 10, 10, 10], 1) == [0, 0, 0, 0]
    assert split_into_outputs([10, 10, 10, 10], 2) == [0, 0, 1, 1]
    assert split_into_outputs([30, 5, 5, 10, 10], 2) == [0, 1, 1, 1, 1]  # the first file is half the bytes
    assert split_into_outputs([], 3) == []


def test_auto_leaves_a_clusters_compaction_to_its_executors():
    from airflow_lake_provider.core.arrow_rewrite import cluster_reason

    assert cluster_reason("local[*]") is None and cluster_reason("local[2]") is None
    reason = cluster_reason("spark://127.0.0.1:7077")
    assert reason is not None and "cluster (spark)" in reason and "127.0.0.1" not in reason
    assert "cluster (yarn)" in cluster_reason("yarn") and "cluster (k8s)" in cluster_reason("k8s://https://api:443")
