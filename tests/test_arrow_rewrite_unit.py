"""When ``rewriter='auto'`` may take the Arrow rewriter (``core/arrow_rewrite.py``): pure logic, no JVM."""

from __future__ import annotations

import pytest

from airflow_lake_provider.core.object_storage import s3_options_from_file_io, s3_options_from_s3a, s3_path
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


def test_a_v2_table_on_local_storage_or_s3_is_eligible():
    assert arrow_ineligibility(**ELIGIBLE) is None
    assert arrow_ineligibility(**{**ELIGIBLE, "location": "s3a://bucket/db/t",
                                  "properties": {"write.data.path": "s3://other/data"}}) is None


def test_s3_options_are_the_ones_the_tables_fileio_uses():
    """pyarrow reaches S3 with S3FileIO's properties (a vended credential for the location winning) or
    Hadoop's S3A settings (per bucket first), never with a second configuration."""
    properties = {"s3.endpoint": "http://127.0.0.1:8333", "s3.access-key-id": "AK", "s3.secret-access-key": "SK",
                  "s3.path-style-access": "true", "client.region": "eu-west-1"}
    vended = [("s3://lake/", {"s3.access-key-id": "ASIA1", "s3.secret-access-key": "S1", "s3.session-token": "T1"}),
              ("s3://lake/db/t", {"s3.access-key-id": "ASIA2", "s3.secret-access-key": "S2", "s3.session-token": "T2"}),
              ("s3://other/", {"s3.access-key-id": "ASIA3", "s3.secret-access-key": "S3"})]
    assert s3_options_from_file_io(properties, "s3://lake/db/t/data/f.parquet", vended) == {
        "endpoint_override": "127.0.0.1:8333", "scheme": "http", "region": "eu-west-1",
        "access_key": "ASIA2", "secret_key": "S2", "session_token": "T2"}
    # Virtual-host addressing where S3FileIO would use it; the default chain where no key is named.
    assert s3_options_from_file_io({"s3.endpoint": "https://s3.example.com"}, "s3://b/k") == {
        "endpoint_override": "s3.example.com", "scheme": "https", "force_virtual_addressing": True}
    hadoop = {"fs.s3a.endpoint": "127.0.0.1:9000", "fs.s3a.connection.ssl.enabled": "false",
              "fs.s3a.path.style.access": "true", "fs.s3a.access.key": "AK", "fs.s3a.secret.key": "SK",
              "fs.s3a.bucket.special.access.key": "AK2", "fs.s3a.bucket.special.secret.key": "SK2"}
    assert s3_options_from_s3a(hadoop.get, "lake") == {"endpoint_override": "127.0.0.1:9000", "scheme": "http",
                                                      "access_key": "AK", "secret_key": "SK"}
    assert s3_options_from_s3a(hadoop.get, "special")["access_key"] == "AK2"
    assert s3_path("s3a://lake/db/t/data/f.parquet") == "lake/db/t/data/f.parquet"


@pytest.mark.parametrize(("change", "reason"), [
    ({"strategy": "sort"}, "strategy 'sort' sorts rows"),
    ({"format_version": 3}, "format v3 tables carry row lineage"),
    ({"options": {"output-spec-id": "0"}}, "output-spec-id names another partition spec"),
    ({"sort_order_fields": 1}, "has a sort order"),
    ({"properties": {"write.format.default": "orc"}}, "writes orc files"),
    ({"properties": {"write.parquet.compression-codec": "lz4"}}, "codec 'lz4'"),
    ({"properties": {"write.parquet.bloom-filter-enabled.column.id": "true"}}, "bloom filters"),
    ({"location": "gs://bucket/db/t"}, "neither on a local file system nor on S3"),
    ({"properties": {"write.data.path": "s3://bucket/data"}}, "neither on a local file system nor on S3"),
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
