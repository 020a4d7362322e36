"""Names: a table's outside the catalog (one rule for Assets and OpenLineage datasets, pure), and
each step's (one spelling, core/step_names.py)."""

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


def test_each_step_runs_the_job_of_its_own_name():
    """A step's name is one of core/step_names.STEPS, and the job registered under it takes the
    step's job arguments: the step, its job and its task are named by one spelling."""
    import importlib
    import typing

    from airflow_lake_provider.core import step_names
    from airflow_lake_provider.core.job_registry import JOBS
    from airflow_lake_provider.steps.base import Step

    for module in ("plan", "rewrite", "expire", "clean", "convert_equality_deletes", "restore",
                   "repair_deletion_vectors"):
        importlib.import_module(f"airflow_lake_provider.steps.{module}")
    steps = {cls.name: cls for cls in Step.__subclasses__() if cls.__module__.startswith("airflow_lake_provider.")}
    assert sorted(steps) == sorted(step_names.STEPS)
    for name, cls in steps.items():
        args = typing.get_args(cls.__orig_bases__[0])[0]
        assert JOBS[name].args is args, f"the {name} step takes {args.__name__}, its job {JOBS[name].args.__name__}"
    assert set(step_names.DELETING_STEPS) <= set(step_names.STEPS)
    assert set(JOBS) == {*step_names.STEPS, step_names.SQL, step_names.BATCH}
