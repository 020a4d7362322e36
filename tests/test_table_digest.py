"""The lean metadata reading (core.table_digest, IcebergLakeHook.read_table_digest) against
PyIceberg's full model: same history, refs, retention and figures on real tables of the embedded
SQL catalog (tags and branches with their own retention, gzip-compressed metadata, format v1),
and the spec's corner cases on hand-written metadata. On S3 behind a REST and a SQL catalog the
same check runs in tests/test_topology_s3.py; the memory it saves is measured by
benchmarks/expire_clean.py."""

from __future__ import annotations

import gzip
import json

import pytest
from demo_data import create_events_table
from lake_checks import assert_lean_digest_matches

from airflow_lake_provider.core.history import SnapshotInfo, SnapshotRef
from airflow_lake_provider.core.table_digest import read_table_digest
from airflow_lake_provider.exceptions import LakeTableNotFound


def test_digest_equals_pyicebergs_model_with_refs_and_retention(lake_hook, namespace):
    name = f"{namespace}.refs"
    table = create_events_table(lake_hook.catalog, name, days=1, commits_per_day=5, rows_per_commit=3)
    ids = [s.snapshot_id for s in table.snapshots()]
    with table.transaction() as tx:
        tx.set_properties({"history.expire.min-snapshots-to-keep": "2", "history.expire.max-snapshot-age-ms": "60000"})
    (table.manage_snapshots()
     .create_branch(ids[2], "audit", min_snapshots_to_keep=2, max_snapshot_age_ms=1000, max_ref_age_ms=5000)
     .create_tag(ids[0], "keep")
     .create_tag(ids[1], "brief", max_ref_age_ms=1)
     .commit())
    digest = assert_lean_digest_matches(lake_hook, name)
    assert [s.snapshot_id for s in digest.snapshots] == ids
    assert {r.name for r in digest.refs} == {"main", "audit", "keep", "brief"}
    assert digest.history().retention.min_snapshots_to_keep.value == 2
    assert digest.state()["snapshots"] == 5 and digest.state()["records"] == 15


def test_digest_reads_gzip_metadata_and_format_v1(spark, lake_hook, namespace):
    create_events_table(lake_hook.catalog, f"{namespace}.gz", days=1, commits_per_day=2, rows_per_commit=2)
    # Iceberg's Java writer compresses the metadata when asked (PyIceberg does not).
    spark.sql(f"ALTER TABLE lake.{namespace}.gz SET TBLPROPERTIES ('write.metadata.compression-codec'='gzip')")
    assert lake_hook.load_table(f"{namespace}.gz").metadata_location.endswith(".gz.metadata.json")
    assert_lean_digest_matches(lake_hook, f"{namespace}.gz")

    v1 = create_events_table(lake_hook.catalog, f"{namespace}.v1", days=1, commits_per_day=3, rows_per_commit=2,
                             properties={"format-version": "1"})
    assert v1.format_version == 1
    assert_lean_digest_matches(lake_hook, f"{namespace}.v1")


def test_missing_table_gets_load_tables_error(lake_hook, namespace):
    with pytest.raises(LakeTableNotFound, match=f"'{namespace}.nope' does not exist"):
        lake_hook.read_table_digest(f"{namespace}.nope")


def _metadata(**fields) -> dict:
    return {"format-version": 2, "location": "s3://b/t", "properties": {}, "snapshots": [], **fields}


def _snapshot(snapshot_id: int, parent: int | None = None, **summary) -> dict:
    return {"snapshot-id": snapshot_id, "timestamp-ms": 1_700_000_000_000 + snapshot_id,
            **({"parent-snapshot-id": parent} if parent else {}), "manifest-list": f"s3://b/t/metadata/snap-{snapshot_id}.avro",
            "summary": {"operation": "append", "added-data-files": "1", **summary}}


def test_v1_without_refs_implies_main_and_minus_one_means_no_snapshot():
    empty = read_table_digest(json.dumps(_metadata(**{"format-version": 1, "current-snapshot-id": -1})))
    assert empty.current_snapshot_id is None and empty.refs == () and empty.state()["snapshot_id"] is None
    one = read_table_digest(json.dumps(_metadata(**{"current-snapshot-id": 7, "snapshots": [_snapshot(7)]})))
    assert one.refs == (SnapshotRef("main", 7, "branch"),)


def test_only_what_decisions_read_is_kept():
    document = _metadata(**{
        "current-snapshot-id": 2, "snapshots": [_snapshot(1), _snapshot(2, 1, **{"total-records": "9"})],
        "snapshot-log": [{"snapshot-id": 1, "timestamp-ms": 1}, {"snapshot-id": 2, "timestamp-ms": 2}],
        "refs": {"main": {"snapshot-id": 2, "type": "branch"}},
    })
    digest = read_table_digest(gzip.compress(json.dumps(document).encode()), metadata_location="s3://b/t/m.gz.metadata.json")
    assert digest.snapshots == (SnapshotInfo(1, None, 1_700_000_000_001, "append"),
                                SnapshotInfo(2, 1, 1_700_000_000_002, "append"))
    assert digest.current_summary == {"operation": "append", "total-records": "9"}  # no added-*, no manifest list
    assert digest.state()["records"] == 9 and digest.metadata_location == "s3://b/t/m.gz.metadata.json"


def test_rest_response_keeps_its_storage_config_out_of_sight():
    response = {"metadata-location": "s3://b/t/metadata/00001.metadata.json",
                "metadata": _metadata(**{"current-snapshot-id": 1, "snapshots": [_snapshot(1)]}),
                "config": {"s3.secret-access-key": "vended-secret"}}
    digest = read_table_digest(json.dumps(response).encode())
    assert digest.metadata_location == "s3://b/t/metadata/00001.metadata.json"
    assert digest.storage_config == {"s3.secret-access-key": "vended-secret"}
    assert "vended-secret" not in repr(digest)
