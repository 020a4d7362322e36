"""Where the Arrow rewriter reads and writes: a local file system, or S3, GCS or ADLS through pyarrow's file
system of that store, configured from the table's own FileIO (``core/object_storage.py`` maps its settings).

A :class:`Storage` is plain values (pyarrow's file systems pickle): the rewriter sends it to Spark's
executors with the work. Files the rewriter wrote but never committed are deleted by the driver
through the table's own FileIO (``jobs/arrow_rewrite.py``: pyarrow's S3 file system leaves a
directory marker where it deletes a file; Iceberg's FileIO does not).
"""

from __future__ import annotations

import os
from typing import Any

from airflow_lake_provider.core.object_storage import (
    FIXED_GCS_OPTIONS,
    FIXED_S3_OPTIONS,
    UnmappedStorage,
    adls_options_from_file_io,
    gcs_options_from_file_io,
    object_path,
    s3_options_from_file_io,
    s3_options_from_s3a,
    s3_path,
    store_of,
)
from airflow_lake_provider.jobs import iceberg

#: FileIOs that read ``gs://`` with GCSFileIO's properties (ResolvingFileIO hands gs:// to GCSFileIO).
_GCS_FILE_IOS = (".GCSFileIO", ".ResolvingFileIO")
#: FileIOs that read ``abfs[s]://`` with ADLSFileIO's properties (ResolvingFileIO hands them to ADLSFileIO).
_ADLS_FILE_IOS = (".ADLSFileIO", ".ResolvingFileIO")


class UnreachableStorage(Exception):
    """The table's storage is one the Arrow rewriter does not reach (the rewrite goes to Iceberg's action)."""


class Storage:
    """The table's files as pyarrow opens them: ``filesystem`` None for local paths."""

    def __init__(self, filesystem: Any = None) -> None:
        self.filesystem = filesystem

    def path(self, location: str) -> str:
        if self.filesystem is not None:
            return object_path(location)
        return location[len("file:"):] if location.startswith("file:") else location

    def parquet_file(self, location: str):
        import pyarrow.parquet as pq

        return pq.ParquetFile(self.path(location), filesystem=self.filesystem)

    def parquet_writer(self, location: str, schema, **options):
        import pyarrow.parquet as pq

        if self.filesystem is None:
            os.makedirs(os.path.dirname(self.path(location)), exist_ok=True)
        return pq.ParquetWriter(self.path(location), schema, filesystem=self.filesystem, **options)

    def read_range(self, location: str, offset: int, size: int) -> bytes:
        """``size`` bytes of the file at ``offset`` (a blob in a Puffin file), all of them or an error."""
        if self.filesystem is None:
            with open(self.path(location), "rb") as handle:
                handle.seek(offset)
                data = handle.read(size)
        else:
            with self.filesystem.open_input_file(self.path(location)) as handle:
                data = handle.read_at(size, offset)
        if len(data) != size:
            raise OSError(f"{location} holds {len(data)} bytes at offset {offset}, not the {size} its metadata says")
        return bytes(data)

    def size(self, location: str) -> int:
        if self.filesystem is None:
            return os.path.getsize(self.path(location))
        return int(self.filesystem.get_file_info(self.path(location)).size)


def table_storage(jtable) -> Storage:
    """The table's storage, or :class:`UnreachableStorage` with the reason."""
    location = str(jtable.location())
    store = store_of(location)
    if store == "local":
        return Storage()
    if store is None:
        raise UnreachableStorage(f"the table is at {location.split(':', 1)[0]}://, which the Arrow rewriter does "
                                 "not reach (local file systems, S3, GCS and ADLS)")
    from pyarrow import fs

    try:
        if store == "gcs":
            return Storage(fs.GcsFileSystem(**_gcs_options(jtable, location), **FIXED_GCS_OPTIONS))
        if store == "adls":
            return Storage(fs.AzureFileSystem(**_adls_options(jtable, location)))
        return Storage(fs.S3FileSystem(**_s3_options(jtable, location), **FIXED_S3_OPTIONS))
    except UnmappedStorage as unmapped:
        raise UnreachableStorage(str(unmapped)) from None


def _file_io_settings(io) -> tuple[dict[str, str], list[tuple[str, dict[str, str]]]]:
    """The FileIO's properties and the storage credentials it holds (vended by a REST catalog), if any."""
    try:
        properties = iceberg.string_map(io.properties())
    except Exception:  # noqa: BLE001 - a FileIO without properties(): its settings are Hadoop's
        properties = {}
    credentials = []
    try:
        for credential in io.credentials():
            credentials.append((str(credential.prefix()), iceberg.string_map(credential.config())))
    except Exception:  # noqa: BLE001 - a FileIO that vends none
        pass
    return properties, credentials


def _gcs_options(jtable, location: str) -> dict[str, Any]:
    return _file_io_options(jtable, location, _GCS_FILE_IOS, "GCS", "GCSFileIO", "Hadoop's GCS connector",
                            gcs_options_from_file_io)


def _adls_options(jtable, location: str) -> dict[str, Any]:
    return _file_io_options(jtable, location, _ADLS_FILE_IOS, "ADLS", "ADLSFileIO", "Hadoop's ABFS connector",
                            adls_options_from_file_io)


def _file_io_options(jtable, location: str, file_ios: tuple[str, ...], store: str, file_io: str, connector: str,
                     mapping) -> dict[str, Any]:
    """The store's options from the table's FileIO settings (``mapping``), when the FileIO is Iceberg's own
    for that store (``file_ios``: class name endings): another's settings are not mapped."""
    io = jtable.io()
    if not str(io.getClass().getName()).endswith(file_ios):
        raise UnreachableStorage(f"the table's FileIO on {store} is {io.getClass().getSimpleName()}: the Arrow "
                                 f"rewriter maps Iceberg's {file_io} settings only (not {connector})")
    properties, credentials = _file_io_settings(io)
    return mapping(properties, location, credentials)


def _s3_options(jtable, location: str) -> dict[str, Any]:
    io = jtable.io()
    properties, credentials = _file_io_settings(io)
    if str(io.getClass().getName()).endswith(".S3FileIO") or any(k.startswith("s3.") for k in properties):
        return s3_options_from_file_io(properties, location, credentials)
    conf = _hadoop_conf(io)
    if conf is None:
        raise UnreachableStorage(f"the table's FileIO ({io.getClass().getSimpleName()}) names no S3 settings "
                                 "the Arrow rewriter can read")

    def setting(key: str) -> str | None:
        value = conf.get(key)
        return str(value) if value is not None else None

    return s3_options_from_s3a(setting, s3_path(location).split("/", 1)[0])


def _hadoop_conf(io):
    for method in ("conf", "getConf"):
        try:
            conf = getattr(io, method)()
        except Exception:  # noqa: BLE001 - py4j: no such method on this FileIO
            continue
        if conf is not None:
            return conf
    return None
