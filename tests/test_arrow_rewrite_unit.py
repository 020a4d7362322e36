"""When ``rewriter='auto'`` may take the Arrow rewriter (``core/arrow_rewrite.py``): pure logic, no JVM."""

from __future__ import annotations

import datetime as dt
import struct
import zlib

import pytest

from airflow_lake_provider.core.object_storage import (
    UnmappedStorage,
    adls_options_from_file_io,
    gcs_options_from_file_io,
    object_path,
    s3_options_from_file_io,
    s3_options_from_s3a,
    s3_path,
    store_of,
)
from airflow_lake_provider.core.arrow_rewrite import (
    arrow_ineligibility,
    dictionary_columns,
    parquet_codec,
    split_into_outputs,
    statistics_columns,
)
from airflow_lake_provider.core.deletion_vectors import DV_MAGIC, CorruptDeletionVector, deleted_positions

SCHEMA = {"fields": [{"id": 1, "name": "id", "type": "long", "required": True},
                     {"id": 2, "name": "amount", "type": "decimal(10, 2)", "required": False},
                     {"id": 3, "name": "ts", "type": "timestamptz", "required": False}]}
ELIGIBLE = {
    "strategy": "binpack", "schema": SCHEMA, "properties": {}, "format_version": 2, "current_spec_id": 1,
    "sort_order_fields": 0, "location": "file:/lake/db/t",
    "options": {"min-input-files": "5", "partial-progress.enabled": "false"},
    "planner_options": ["min-input-files", "target-file-size-bytes"],
}


def test_a_v2_or_v3_table_on_local_storage_or_s3_is_eligible():
    assert arrow_ineligibility(**ELIGIBLE) is None
    assert arrow_ineligibility(**{**ELIGIBLE, "format_version": 3}) is None
    # PyIceberg's schema JSON names absent defaults as null.
    no_defaults = {"fields": [{**f, "initial-default": None, "write-default": None} for f in SCHEMA["fields"]]}
    assert arrow_ineligibility(**{**ELIGIBLE, "format_version": 3, "schema": no_defaults}) is None
    assert arrow_ineligibility(**{**ELIGIBLE, "location": "s3a://bucket/db/t",
                                  "properties": {"write.data.path": "s3://other/data"}}) is None
    assert arrow_ineligibility(**{**ELIGIBLE, "location": "gs://bucket/db/t"}) is None
    assert arrow_ineligibility(**{**ELIGIBLE, "location": "abfss://c@a.dfs.core.windows.net/db/t",
                                  "properties": {"write.data.path": "abfs://d@a.dfs.core.windows.net/x"}}) is None


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


def test_gcs_options_are_the_ones_gcsfileio_uses():
    """pyarrow reaches GCS with GCSFileIO's properties: its endpoint, project and token (a vended one for
    the location winning), anonymous where GCSFileIO has no auth, Google's default credentials otherwise."""
    properties = {"gcs.service.host": "http://127.0.0.1:4443", "gcs.project-id": "lake",
                  "gcs.oauth2.token": "T0", "gcs.oauth2.token-expires-at": "1767225600000"}
    vended = [("gs://lake/", {"gcs.oauth2.token": "T1", "gcs.oauth2.token-expires-at": "1767225600000"}),
              ("gs://lake/db/t", {"gcs.oauth2.token": "T2", "gcs.oauth2.token-expires-at": "1767229200000"}),
              ("gs://other/", {"gcs.oauth2.token": "T3", "gcs.oauth2.token-expires-at": "1767225600000"})]
    assert gcs_options_from_file_io(properties, "gs://lake/db/t/data/f.parquet", vended) == {
        "endpoint_override": "127.0.0.1:4443", "scheme": "http", "project_id": "lake", "access_token": "T2",
        "credential_token_expiration": dt.datetime(2026, 1, 1, 1, tzinfo=dt.timezone.utc)}
    assert gcs_options_from_file_io(properties, "gs://elsewhere/f")["access_token"] == "T0"
    assert gcs_options_from_file_io({"gcs.service.host": "http://127.0.0.1:4443", "gcs.no-auth": "true"},
                                    "gs://b/k") == {"endpoint_override": "127.0.0.1:4443", "scheme": "http",
                                                    "anonymous": True}
    assert gcs_options_from_file_io({}, "gs://b/k") == {}  # Google's default credentials, as GCSFileIO
    assert object_path("gs://lake/db/t/data/f.parquet") == "lake/db/t/data/f.parquet"
    assert [store_of(p) for p in ("gs://b/k", "s3a://b/k", "file:/t", "/t", "hdfs://nn/t")] == \
        ["gcs", "s3", "local", "local", None]


@pytest.mark.parametrize(("properties", "reason"), [
    ({"gcs.oauth2.token": "T"}, "without gcs.oauth2.token-expires-at"),
    ({"gcs.encryption-key": "K"}, "customer-supplied encryption key"),
    ({"gcs.decryption-key": "K"}, "customer-supplied decryption key"),
    ({"gcs.user-project": "p"}, "user project"),
    ({"gcp.impersonate.service-account": "sa@p.iam.gserviceaccount.com"}, "impersonation"),
])
def test_gcs_settings_pyarrow_cannot_use_as_gcsfileio_does_are_refused_with_the_reason(properties, reason):
    with pytest.raises(UnmappedStorage, match=reason):
        gcs_options_from_file_io(properties, "gs://b/k")


ADLS_HOST = "lake.dfs.core.windows.net"
ADLS_AT = f"abfss://warehouse@{ADLS_HOST}/db/t/data/f.parquet"


def test_adls_options_are_the_ones_adlsfileio_uses():
    """pyarrow reaches ADLS with ADLSFileIO's properties, keyed by the account host as ADLSFileIO keys them:
    its endpoint (an emulator's path-style URL, another cloud's hosts), a SAS token (a vended one for the
    location winning, before the shared key as in ADLSFileIO), else the shared key."""
    emulator = {f"adls.connection-string.{ADLS_HOST}": "http://127.0.0.1:10000/lake",
                "adls.auth.shared-key.account.name": "lake", "adls.auth.shared-key.account.key": "S2V5"}
    local = {"blob_storage_authority": "127.0.0.1:10000", "dfs_storage_authority": "127.0.0.1:10000",
             "blob_storage_scheme": "http", "dfs_storage_scheme": "http"}
    assert adls_options_from_file_io(emulator, ADLS_AT) == {"account_name": "lake", **local, "account_key": "S2V5"}
    vended = [(f"abfss://warehouse@{ADLS_HOST}/", {f"adls.sas-token.{ADLS_HOST}": "sv=1&sig=A"}),
              (f"abfss://warehouse@{ADLS_HOST}/db/t", {f"adls.sas-token.{ADLS_HOST}": "?sv=1&sig=B"}),
              ("abfss://other@elsewhere.dfs.core.windows.net/", {f"adls.sas-token.{ADLS_HOST}": "sv=1&sig=C"})]
    assert adls_options_from_file_io(emulator, ADLS_AT, vended) == {"account_name": "lake", **local,
                                                                    "sas_token": "sv=1&sig=B"}
    assert adls_options_from_file_io({f"adls.sas-token.{ADLS_HOST}": "sv=1&sig=A"}, ADLS_AT) == {
        "account_name": "lake", "sas_token": "sv=1&sig=A"}  # Azure's public hosts: pyarrow's defaults
    china = "lake.dfs.core.chinacloudapi.cn"
    assert adls_options_from_file_io({f"adls.sas-token.{china}": "s"}, f"abfs://c@{china}/k") == {
        "account_name": "lake", "blob_storage_authority": ".blob.core.chinacloudapi.cn",
        "dfs_storage_authority": ".dfs.core.chinacloudapi.cn", "sas_token": "s"}
    assert object_path(ADLS_AT) == "warehouse/db/t/data/f.parquet"
    assert object_path("abfs://c@lake.dfs.core.windows.net/k") == "c/k"
    assert [store_of(p) for p in (ADLS_AT, "abfs://c@a.dfs.core.windows.net/k", "wasbs://c@a.blob.core.windows.net/k")
            ] == ["adls", "adls", None]


@pytest.mark.parametrize(("properties", "location", "reason"), [
    ({}, ADLS_AT, "no SAS token or shared key"),
    ({"adls.token": "T"}, ADLS_AT, "bearer token"),
    ({"adls.token-credential-provider": "com.example.Provider"}, ADLS_AT, "custom token credential provider"),
    ({f"adls.sas-token.{ADLS_HOST}": "s", "adls.refresh-credentials-endpoint": "v1/credentials"}, ADLS_AT,
     "refreshes its credentials"),
    ({"adls.auth.shared-key.account.name": "lake"}, ADLS_AT, "half a shared key"),
    ({"adls.auth.shared-key.account.name": "other", "adls.auth.shared-key.account.key": "K"}, ADLS_AT,
     "shared key of account other"),
    ({f"adls.sas-token.{ADLS_HOST}": "s", f"adls.connection-string.{ADLS_HOST}": "http://127.0.0.1:1/other"},
     ADLS_AT, "names neither the account"),
    ({f"adls.sas-token.{ADLS_HOST}": "s", f"adls.connection-string.{ADLS_HOST}": f"https://{ADLS_HOST}?sv=1"},
     ADLS_AT, "carries a query"),
    ({f"adls.sas-token.{ADLS_HOST}": "s"}, f"abfss://{ADLS_HOST}/db/t", "names no container"),
])
def test_adls_settings_pyarrow_cannot_use_as_adlsfileio_does_are_refused_with_the_reason(properties, location,
                                                                                          reason):
    with pytest.raises(UnmappedStorage, match=reason):
        adls_options_from_file_io(properties, location)


@pytest.mark.parametrize(("change", "reason"), [
    ({"strategy": "sort"}, "strategy 'sort' sorts rows"),
    ({"format_version": 4}, "format v4 is newer than the format v3 Arrow rewrites"),
    *[({"format_version": 3, "schema": {"fields": [{"id": 1, "name": "v", "type": kind}]}},
       f"column 'v' has type {kind}, a format v3 type Arrow does not rewrite")
      for kind in ("variant", "geometry(srid:4326)", "geography(srid:4326, spherical)", "unknown", "timestamp_ns",
                   "timestamptz_ns")],
    ({"format_version": 3, "schema": {"fields": [{**SCHEMA["fields"][0], "initial-default": 7}]}},
     "column 'id' has a default value (initial-default, format v3)"),
    ({"format_version": 3, "schema": {"fields": [{**SCHEMA["fields"][0], "write-default": 7}]}},
     "column 'id' has a default value (write-default, format v3)"),
    ({"options": {"output-spec-id": "0"}}, "output-spec-id names another partition spec"),
    ({"sort_order_fields": 1}, "has a sort order"),
    ({"properties": {"write.format.default": "orc"}}, "writes orc files"),
    ({"properties": {"write.parquet.compression-codec": "lz4"}}, "codec 'lz4'"),
    ({"properties": {"write.parquet.bloom-filter-enabled.column.id": "true"}}, "bloom filters"),
    ({"location": "wasbs://c@account.blob.core.windows.net/db/t"}, "not all on one of the stores"),
    ({"location": "abfss://c@a.dfs.core.windows.net/db/t",
      "properties": {"write.data.path": "abfss://c@b.dfs.core.windows.net/data"}}, "more than one ADLS account"),
    ({"properties": {"write.data.path": "s3://bucket/data"}}, "not all on one of the stores"),
    ({"location": "gs://bucket/db/t", "properties": {"write.data.path": "s3://bucket/data"}},
     "not all on one of the stores"),
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


def test_arrow_work_goes_to_a_clusters_executors_and_stays_on_a_local_drivers_threads():
    from airflow_lake_provider.core.arrow_rewrite import on_executors

    assert not on_executors("local[*]") and not on_executors("local[2]")
    assert all(on_executors(master) for master in ("spark://127.0.0.1:7077", "yarn", "k8s://https://api:443"))


def test_a_groups_work_splits_into_one_piece_per_new_file_with_only_the_deletes_it_needs():
    from airflow_lake_provider.jobs.arrow_rewrite import GroupWork

    files = [{"file-path": f"f{i}", "delete-file-references": refs} for i, refs in enumerate([[0], [1, 2], [], [2]])]
    work = GroupWork(files, [{"d": 0}, {"d": 1}, {"d": 2}], [0, 0, 1, 1], {0: "out0", 1: "out1"}, None, None)
    first, second = work.per_output()
    assert [f["file-path"] for f in first.files] == ["f0", "f1"] and [d["d"] for d in first.deletes] == [0, 1, 2]
    assert [f["delete-file-references"] for f in first.files] == [[0], [1, 2]]
    assert [f["file-path"] for f in second.files] == ["f2", "f3"] and second.deletes == [{"d": 2}]
    assert [f["delete-file-references"] for f in second.files] == [[], [0]]  # renumbered into its own list
    assert (first.locations, second.locations, second.outputs) == ({0: "out0"}, {1: "out1"}, [1, 1])


# -- deletion vectors: the blob decoded (the DVs Iceberg writes: tests/test_arrow_rewrite.py) ---------------------

def _roaring32(values: list[int], runs: bool) -> bytes:
    """A 32-bit Roaring bitmap in the portable format: arrays, bitmaps, and (``runs``) run containers where
    a container's values are one range."""
    containers: dict[int, list[int]] = {}
    for value in values:
        containers.setdefault(value >> 16, []).append(value & 0xFFFF)
    keys = sorted(containers)
    is_run = [runs and c[-1] - c[0] + 1 == len(c) for c in (containers[k] for k in keys)]
    if any(is_run):
        head = struct.pack("<I", 12347 | (len(keys) - 1) << 16)
        head += bytes(sum(1 << (i % 8) for i, r in enumerate(is_run) if r and i // 8 == b)
                      for b in range((len(keys) + 7) // 8))
    else:
        head = struct.pack("<II", 12346, len(keys))
    head += b"".join(struct.pack("<HH", k, len(containers[k]) - 1) for k in keys)
    bodies = []
    for key, run in zip(keys, is_run, strict=True):
        lows = containers[key]
        if run:
            bodies.append(struct.pack("<HHH", 1, lows[0], len(lows) - 1))
        elif len(lows) > 4096:
            words = [0] * 1024
            for low in lows:
                words[low // 64] |= 1 << (low % 64)
            bodies.append(struct.pack("<1024Q", *words))
        else:
            bodies.append(struct.pack(f"<{len(lows)}H", *lows))
    if not any(is_run) or len(keys) >= 4:
        start = len(head) + 4 * len(keys)
        for body in bodies:
            head += struct.pack("<I", start)
            start += len(body)
    return head + b"".join(bodies)


def _dv_blob(positions: list[int], runs: bool = True) -> bytes:
    by_key: dict[int, list[int]] = {}
    for position in sorted(positions):
        by_key.setdefault(position >> 32, []).append(position & 0xFFFFFFFF)
    keys = range(max(by_key) + 1) if by_key else range(0)  # Iceberg writes an empty bitmap for every key below
    bitmap = struct.pack("<q", len(keys)) + b"".join(
        struct.pack("<i", key) + _roaring32(by_key.get(key, []), runs) for key in keys)
    data = DV_MAGIC + bitmap
    return struct.pack(">I", len(data)) + data + struct.pack(">I", zlib.crc32(data))


@pytest.mark.parametrize("runs", [True, False], ids=["with-run-containers", "without"])
def test_a_deletion_vector_gives_exactly_its_positions(runs):
    positions = sorted({3, 0, 65535, 65536, *range(70_000, 70_010),  # arrays, a run
                        *range(131_072, 131_072 + 2 * 5000, 2),  # a bitmap container (5,000 values)
                        *range(200_000, 270_000),  # a run across two containers
                        2**32 + 7, 5 * 2**32 + 65536 * 3 + 1})  # keys past 0, an empty bitmap between
    assert deleted_positions(_dv_blob(positions, runs), cardinality=len(positions)) == positions
    assert deleted_positions(_dv_blob([]), cardinality=0) == []


def test_a_deletion_vector_that_is_not_what_its_metadata_says_is_refused():
    blob = _dv_blob([1, 5, 9])
    assert deleted_positions(blob, cardinality=3) == [1, 5, 9]
    flipped = bytearray(blob)
    flipped[14] ^= 0x01  # a bit of the bitmap: the CRC no longer matches
    wrong_magic = blob[:4] + b"\x00" + blob[5:]
    for corrupt, why in [(bytes(flipped), "CRC-32"), (wrong_magic, "magic"), (blob[:-1], "bytes of bitmap data"),
                         (blob + b"\x00", "bytes of bitmap data"), (blob[3:], "bytes of bitmap data"),
                         (b"\x00" * 8, "shorter than any")]:
        with pytest.raises(CorruptDeletionVector, match=why):
            deleted_positions(corrupt, cardinality=3)
    with pytest.raises(CorruptDeletionVector, match="holds 3 positions, the delete file says 4"):
        deleted_positions(blob, cardinality=4)
    # A well-formed blob around a bitmap that is not one: refused, not read as some positions.
    data = DV_MAGIC + struct.pack("<q", 1) + struct.pack("<i", 0) + struct.pack("<II", 99, 0)
    with pytest.raises(CorruptDeletionVector, match="cookie"):
        deleted_positions(struct.pack(">I", len(data)) + data + struct.pack(">I", zlib.crc32(data)))


def test_row_lineage_is_what_icebergs_readers_give():
    """A v3 file's ``_row_id`` and ``_last_updated_sequence_number`` as the Arrow rewriter writes them: the
    file's value where it holds one, else ``first_row_id`` + position and the data sequence number
    (``ParquetValueReaders.rowIds``/``lastUpdated``); without either number, Iceberg's action."""
    import pyarrow as pa

    from airflow_lake_provider.jobs.arrow_rewrite import NotArrowRewritable, _arrow_schema, _with_lineage

    schema = _arrow_schema({"fields": [{"id": 1, "name": "a", "type": "long", "required": False}]}, lineage=True)
    assert [(f.name, f.metadata[b"PARQUET:field_id"]) for f in schema][1:] == [
        ("_row_id", b"2147483540"), ("_last_updated_sequence_number", b"2147483539")]
    rows = pa.Table.from_arrays([pa.chunked_array([[1, 2], [3]]), pa.chunked_array([[None, 5], [None]], pa.int64()),
                                 pa.chunked_array([[None, 9], [None]], pa.int64())], schema=schema)
    assert _with_lineage(rows, 100, 7).to_pydict() == {
        "a": [1, 2, 3], "_row_id": [100, 5, 102], "_last_updated_sequence_number": [7, 9, 7]}
    with pytest.raises(NotArrowRewritable, match="no first_row_id"):
        _with_lineage(rows, None, 7)
    with pytest.raises(NotArrowRewritable, match="no data sequence number"):
        _with_lineage(rows, 100, None)
