"""How a maintained table is named outside its catalog: Airflow Assets and OpenLineage datasets.

One rule for both, so Airflow's asset graph, this package's lineage and Spark's own lineage meet
at one node. OpenLineage's Spark integration names an Iceberg table by where its files live: the
dataset namespace is the scheme and authority of the table location (``s3://bucket``, ``file``)
and the name is the path (``/warehouse/db/events``), with a *symlink* naming the table in its
catalog. The Asset URI is that namespace and name joined (``s3://bucket/warehouse/db/events``,
``file:///lake/warehouse/db/events``): the URI Airflow's S3 and file assets already use, which its
OpenLineage integration turns back into the same dataset.

Pure: no Airflow, no Spark.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

# Hadoop's spellings of one store (s3a:// is what Spark writes, s3:// what everyone else reads).
_SCHEME_ALIASES = {"s3a": "s3", "s3n": "s3", "abfs": "abfss", "wasb": "wasbs"}


@dataclass(frozen=True)
class DatasetName:
    """An OpenLineage dataset identifier: ``namespace`` (the data source) and ``name``."""

    namespace: str
    name: str

    @property
    def uri(self) -> str:
        """Namespace and name as one URI (``file`` becomes ``file://`` so the path stays absolute)."""
        if self.namespace == "file":
            return f"file://{self.name}"
        return f"{self.namespace}{self.name}"


def location_dataset(location: str) -> DatasetName:
    """The dataset of a table location, as OpenLineage names file-based datasets.

    ``s3a://b/wh/db/t`` -> (``s3://b``, ``/wh/db/t``); ``file:/lake/db/t``, ``file:///lake/db/t``
    and ``/lake/db/t`` -> (``file``, ``/lake/db/t``). A trailing slash is dropped.
    """
    if not isinstance(location, str) or not location.strip():
        raise ValueError(f"A table location is a URI or an absolute path, got {location!r}.")
    parts = urlsplit(location.strip())
    scheme = _SCHEME_ALIASES.get(parts.scheme.lower(), parts.scheme.lower())
    path = "/" + parts.path.strip("/")
    if scheme in ("", "file"):
        if parts.netloc and parts.netloc != "localhost":
            raise ValueError(f"A file location names no host, got {location!r}.")
        return DatasetName("file", path)
    if not parts.netloc:
        raise ValueError(f"Table location {location!r} has no bucket, container or host after '{parts.scheme}://'.")
    return DatasetName(f"{scheme}://{parts.netloc}", path)


def table_asset_uri(location: str) -> str:
    """The Asset URI of the table at ``location`` (see the module docstring)."""
    return location_dataset(location).uri


def table_asset_name(catalog_name: str, table: str) -> str:
    """The Asset's human name: the table as Spark names it, ``<catalog>.<namespace>.<table>``."""
    return f"{catalog_name}.{table}"


def catalog_symlink(catalog_uri: str | None, table: str) -> DatasetName:
    """The catalog's name for the table (an OpenLineage symlink of type TABLE).

    The namespace is the catalog's URI without credentials, query or fragment (``postgresql://
    host:5432/lake``, ``https://rest:8181``, ``thrift://metastore:9083``); the name is
    ``namespace.table``.
    """
    if not catalog_uri:
        return DatasetName("iceberg", table)
    parts = urlsplit(catalog_uri)
    netloc = parts.hostname or ""
    if parts.port:
        netloc = f"{netloc}:{parts.port}"
    return DatasetName(urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", "")), table)
