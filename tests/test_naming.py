"""Table names outside the catalog: one rule for Assets and OpenLineage datasets (pure)."""

from __future__ import annotations

import pytest

from airflow_lake_provider.core.naming import (
    DatasetName,
    catalog_symlink,
    location_dataset,
    table_asset_name,
    table_asset_uri,
)


@pytest.mark.parametrize(
    ("location", "namespace", "name", "uri"),
    [
        ("s3a://warehouse/lake/db/events", "s3://warehouse", "/lake/db/events", "s3://warehouse/lake/db/events"),
        ("s3://warehouse/lake/db/events/", "s3://warehouse", "/lake/db/events", "s3://warehouse/lake/db/events"),
        ("file:/tmp/wh/db/events", "file", "/tmp/wh/db/events", "file:///tmp/wh/db/events"),
        ("file:///tmp/wh/db/events", "file", "/tmp/wh/db/events", "file:///tmp/wh/db/events"),
        ("/tmp/wh/db/events", "file", "/tmp/wh/db/events", "file:///tmp/wh/db/events"),
        ("gs://bucket/wh/db/t", "gs://bucket", "/wh/db/t", "gs://bucket/wh/db/t"),
        ("abfs://c@acct.dfs.core.windows.net/wh/t", "abfss://c@acct.dfs.core.windows.net", "/wh/t",
         "abfss://c@acct.dfs.core.windows.net/wh/t"),
        ("hdfs://nn:8020/wh/db/t", "hdfs://nn:8020", "/wh/db/t", "hdfs://nn:8020/wh/db/t"),
    ],
)
def test_every_spelling_of_a_location_names_one_dataset(location, namespace, name, uri):
    assert location_dataset(location) == DatasetName(namespace, name)
    assert table_asset_uri(location) == uri


@pytest.mark.parametrize("location", ["", "s3://", "file://otherhost/x", None])
def test_a_location_that_names_nothing_is_refused(location):
    with pytest.raises(ValueError):
        location_dataset(location)


def test_the_catalog_symlink_never_carries_credentials():
    assert catalog_symlink("postgresql://lake:s3cret@127.0.0.1:5432/lake?sslmode=require", "db.events") == \
        DatasetName("postgresql://127.0.0.1:5432/lake", "db.events")
    assert catalog_symlink("https://rest.example.com:8181/", "db.events").namespace == "https://rest.example.com:8181"
    assert catalog_symlink(None, "db.events") == DatasetName("iceberg", "db.events")
    assert table_asset_name("lake", "db.events") == "lake.db.events"
