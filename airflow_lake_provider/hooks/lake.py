"""The catalog hook: one Airflow connection, one Iceberg catalog, two faces.

* :meth:`IcebergLakeHook.get_catalog` gives a PyIceberg catalog: planning, sensing and
  verifying run in the Airflow worker without a JVM.
* :meth:`IcebergLakeHook.spark_catalog_conf` and :meth:`IcebergLakeHook.spark_classpath` give
  the Spark side of the *same* catalog, for the jobs submitted by
  :class:`~airflow_lake_provider.hooks.spark_job.LakeSparkJobHook`.

With no connection under the default id ``lake_default``, the hook opens the embedded lake
under ``$LAKE_HOME`` (see :mod:`airflow_lake_provider.lake`).
"""

from __future__ import annotations

import dataclasses
import json
from functools import cached_property
from typing import TYPE_CHECKING, Any, NoReturn

from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowNotFoundException

from airflow_lake_provider.catalog_config import (
    CATALOG_KINDS,
    OFFICIAL_CONNECTION_TYPE,
    CatalogConfig,
    config_from_iceberg_connection,
    is_s3_location,
    other_catalog_way_out,
)
from airflow_lake_provider.core.coercion import flag, is_none, string_list
from airflow_lake_provider.core.identifiers import TableIdentifier, namespace_name
from airflow_lake_provider.core.lease import DEFAULT_LEASE_NAMESPACE
from airflow_lake_provider.core.table_digest import TableDigest, digest_of_table, read_table_digest
from airflow_lake_provider.exceptions import LakeConfigError, LakeTableNotFound
from airflow_lake_provider.jars import SparkClasspath, resolve_classpath
from airflow_lake_provider.lake import embedded_catalog_config
from airflow_lake_provider.preflight import (
    check_readable,
    check_s3_bucket,
    describe_catalog_error,
    describe_storage_error,
    pyiceberg_properties,
    rejected_signature,
)

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.io import FileIO
    from pyiceberg.table import Table

_INSTALL_HINT = {
    "sql": "pip install 'pyiceberg[sql-sqlite]' (SQLite) or 'pyiceberg[sql-postgres]' (PostgreSQL)",
    "hive": "pip install 'pyiceberg[hive]'",
    "rest": "pip install pyiceberg",
}


def _json_object(value: Any, field: str) -> dict[str, Any]:
    if is_none(value):
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as error:
            raise LakeConfigError(f"Connection field {field!r} is not valid JSON: {error.msg}.") from None
    if not isinstance(value, dict):
        raise LakeConfigError(f"Connection field {field!r} must be a JSON object.")
    return value


def _json_list(value: Any, field: str) -> list[str]:
    return [] if is_none(value) else string_list(value, f"Connection field {field!r}")


class IcebergLakeHook(BaseHook):
    """Opens the Iceberg catalog an Airflow connection describes, from PyIceberg and from Spark.

    :param lake_conn_id: the connection: type ``iceberg_lake``, or the official provider's ``iceberg``
        (a REST catalog with OAuth client credentials, catalog properties in its extra). When it is
        the default ``lake_default`` and no such connection exists, the embedded lake is used.
    """

    conn_name_attr = "lake_conn_id"
    default_conn_name = "lake_default"
    conn_type = "iceberg_lake"
    hook_name = "Iceberg Lake"

    def __init__(self, lake_conn_id: str = default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.lake_conn_id = lake_conn_id

    # -- configuration ----------------------------------------------------------------------
    @cached_property
    def _extra(self) -> dict[str, Any]:
        return self._connection_and_extra[1]

    @cached_property
    def _connection_and_extra(self) -> tuple[Any, dict[str, Any]]:
        try:
            conn = self.get_connection(self.lake_conn_id)
        except AirflowNotFoundException:
            if self.lake_conn_id == self.default_conn_name:
                return None, {}
            raise LakeConfigError(
                f"Connection {self.lake_conn_id!r} does not exist. Create it (type 'iceberg_lake'), or "
                f"leave lake_conn_id at {self.default_conn_name!r} to use the embedded lake."
            ) from None
        return conn, conn.extra_dejson

    @cached_property
    def config(self) -> CatalogConfig:
        """The catalog this hook opens, validated (no engine is started to do it)."""
        conn, extra = self._connection_and_extra
        if conn is None:
            self.log.info("No connection %r: using the embedded lake.", self.lake_conn_id)
            return embedded_catalog_config()
        if conn.conn_type == OFFICIAL_CONNECTION_TYPE:
            config = config_from_iceberg_connection(self.lake_conn_id, host=conn.host, login=conn.login,
                                                    password=conn.password, extra=extra)
            self._mask(config)
            return config
        kind = extra.get("catalog_kind") or "sql"
        if kind not in CATALOG_KINDS:
            raise LakeConfigError(
                f"Connection {self.lake_conn_id!r}: unknown catalog kind {kind!r}; expected one of "
                f"{', '.join(CATALOG_KINDS)}." + (f" {other_catalog_way_out(kind)}" if kind == "glue" else "")
            )
        config = CatalogConfig(
            name=extra.get("catalog_name") or "lake",
            kind=kind,
            uri=conn.host or extra.get("uri") or "",
            warehouse=extra.get("warehouse") or None,
            user=conn.login or None,
            password=conn.password or None,
            properties=_json_object(extra.get("properties"), "properties"),
            pyiceberg_properties=_json_object(extra.get("pyiceberg_properties"), "pyiceberg_properties"),
            spark_properties=_json_object(extra.get("spark_properties"), "spark_properties"),
            spark_conf=_json_object(extra.get("spark_conf"), "spark_conf"),
        )
        self._mask(config)
        return config

    @cached_property
    def lease_namespace(self) -> str:
        """The namespace of the tables' maintenance leases: the extra's ``lease_namespace``, else
        ``lake_maintenance``. One per lake, not per task: runs exclude each other only through the same
        lease table, so every DAG maintaining a table must agree on it (docs/lease.md)."""
        value = self._extra.get("lease_namespace")
        if is_none(value):
            return DEFAULT_LEASE_NAMESPACE
        return namespace_name(value, f"Connection {self.lake_conn_id!r}: lease_namespace",
                              f" Leave it out to use {DEFAULT_LEASE_NAMESPACE!r}.")

    @staticmethod
    def _mask(config: CatalogConfig) -> None:
        from airflow.sdk.log import mask_secret

        for secret in config.secret_values():
            mask_secret(secret)

    # -- the PyIceberg face -----------------------------------------------------------------
    @cached_property
    def catalog(self) -> Catalog:
        """The PyIceberg catalog, built once per hook."""
        return self.get_catalog()

    def get_catalog(self) -> Catalog:
        """The PyIceberg catalog, checked before any JVM starts: a REST catalog must answer (every
        request bounded in time), take the credential and know the warehouse; an ``s3://``
        warehouse's bucket must exist and take the key. Each failure is one sentence
        (:class:`LakeConfigError`) naming the cause and what to do."""
        from pyiceberg.catalog import load_catalog

        config = self.config
        props = pyiceberg_properties(config.kind, config.pyiceberg_catalog_properties())
        try:
            catalog = load_catalog(config.name, **props)
            if config.kind == "rest":
                # One cheap request that a missing warehouse cannot answer (opening the catalog
                # alone succeeds on some servers); a client that may not list is fine.
                from pyiceberg.exceptions import ForbiddenError

                try:
                    catalog.list_namespaces()
                except ForbiddenError as error:
                    if rejected_signature(error):  # a wrong signing key, not a missing permission
                        raise
        except (ImportError, ModuleNotFoundError) as error:
            hint = _INSTALL_HINT[config.kind]
            if str(getattr(error, "name", "") or "").split(".")[0] in ("boto3", "botocore"):
                hint = "pip install 'pyiceberg[rest-sigv4]'"  # PyIceberg signs SigV4 requests with boto3
            raise LakeConfigError(
                f"The {config.kind} catalog needs an optional dependency ({error}): {hint}."
            ) from None
        except Exception as error:  # noqa: BLE001 - whatever the catalog raised becomes one LakeConfigError naming it
            sentence = describe_catalog_error(config.kind, config.name, config.uri, config.warehouse, error)
            raise LakeConfigError(sentence or (
                f"Cannot open catalog {config.name!r} ({config.kind} at {config.uri}): {type(error).__name__}: {error}"
            )) from None
        if is_s3_location(config.warehouse):
            check_s3_bucket(props, config.warehouse)
        return catalog

    def load_table(self, table: str | TableIdentifier) -> Table:
        """The PyIceberg table, or :class:`LakeTableNotFound` naming what exists instead. On S3 the
        storage is asked for the table's metadata file (one request), so a key the store refuses
        fails here, before any JVM, not in the Spark job."""
        from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

        ident = table if isinstance(table, TableIdentifier) else TableIdentifier.parse(table)
        try:
            loaded = self.catalog.load_table(ident.dotted)
        except (NoSuchTableError, NoSuchNamespaceError):
            raise LakeTableNotFound(
                f"Table {ident.dotted!r} does not exist in catalog {self.config.name!r}"
                f" ({self.config.uri}).{self._embedded_fallback_note()}"
            ) from None
        except OSError as error:  # a SQL or Hive catalog reads the metadata file from storage
            self._raise_storage_error(error)
        if is_s3_location(loaded.metadata_location):
            check_readable(loaded.io, loaded.metadata_location)
        return loaded

    @property
    def uses_embedded_lake(self) -> bool:
        """The connection does not exist and the embedded lake stands in for it (``lake_default`` only)."""
        return self._connection_and_extra[0] is None

    def _embedded_fallback_note(self) -> str:
        """When the connection was not found and the embedded lake stood in for it: a sentence saying
        so (the log's info line is easy to miss), and how to define the connection."""
        if not self.uses_embedded_lake:
            return ""
        return (
            f" No connection {self.lake_conn_id!r} was found, so the embedded lake ($LAKE_HOME) was used instead: "
            "if the table is in another catalog, define the connection where the task runs (the environment "
            f"variable AIRFLOW_CONN_{self.lake_conn_id.upper()}, Admin > Connections in the Airflow UI, or a "
            "secrets backend)."
        )

    def _raise_storage_error(self, error: OSError) -> NoReturn:
        """Re-raise a failed read of a table's metadata file: as one sentence (:class:`LakeConfigError`)
        when the storage refused or could not be reached, else as it is."""
        sentence = describe_storage_error(str(getattr(error, "filename", "") or self.config.warehouse or ""), error)
        if sentence:
            raise LakeConfigError(sentence) from None
        raise error

    def table_reader(self, table: str | TableIdentifier) -> LakeTable:
        """``table`` as a step reads it through this hook (validates the name first)."""
        return LakeTable(self, table if isinstance(table, TableIdentifier) else TableIdentifier.parse(table))

    def read_table_digest(self, table: str | TableIdentifier) -> TableDigest:
        """The table's metadata read lean (:mod:`~airflow_lake_provider.core.table_digest`): what the
        expire and clean decisions need, without PyIceberg's model of every snapshot, so the worker's
        memory does not grow with the history. SQL and REST catalogs are read directly (the metadata
        file the catalog names; the REST ``loadTable`` response); other catalogs, or a table that is
        not found (for its error), go through :meth:`load_table`. Errors are :meth:`load_table`'s."""
        ident = table if isinstance(table, TableIdentifier) else TableIdentifier.parse(table)
        catalog = self.catalog
        try:
            digest = _read_digest_directly(catalog, self.config.kind, ident)
        except OSError as error:
            self._raise_storage_error(error)
        if digest is None:
            loaded = self.load_table(ident)
            return digest_of_table(loaded)
        if self.config.kind == "rest" and is_s3_location(digest.metadata_location):
            # As load_table: a key the store refuses fails here, before any JVM (with the table's own storage config).
            check_readable(_file_io({**catalog.properties, **digest.properties, **digest.storage_config},
                                    digest.metadata_location), digest.metadata_location)
        return digest

    # -- the Spark face ---------------------------------------------------------------------
    def spark_catalog_conf(self) -> dict[str, str]:
        """Spark configuration registering this catalog; contains secrets, keep it off argv."""
        return self.config.spark_catalog_conf()

    @property
    def iceberg_runtime_provided(self) -> bool:
        """The connection's ``iceberg_runtime_provided`` extra: the cluster's image has Iceberg's runtime."""
        return flag(self._extra.get("iceberg_runtime_provided"), "Connection field 'iceberg_runtime_provided'")

    def spark_classpath(self, extra_jars: list[str] | None = None, *, iceberg_runtime_provided: bool | None = None,
                        packages: list[str] | None = None) -> SparkClasspath:
        """Jars and Maven coordinates a Spark job needs for this catalog (airflow_lake_provider/jars.py).

        With ``iceberg_runtime_provided`` (``None``: the connection's extra decides) no Iceberg
        runtime is added: the Spark installation the job runs on has it on its class path.
        ``packages``: coordinates the job gives besides the connection's ``spark_packages``
        (``spark.jars.packages`` in a ``spark_conf``); an artifact named there is not added again.
        """
        jars = [*_json_list(self._extra.get("spark_jars"), "spark_jars"), *(extra_jars or [])]
        provided = self.iceberg_runtime_provided if iceberg_runtime_provided is None else iceberg_runtime_provided
        return resolve_classpath(self.config.jdbc_driver, extra_jars=jars,
                                 packages=list(dict.fromkeys([*self.spark_packages(), *(packages or [])])),
                                 s3a=self.config.spark_uses_s3a, aws_bundle=self.config.spark_uses_aws_bundle,
                                 gcp_bundle=self.config.spark_uses_gcs, azure_bundle=self.config.spark_uses_adls,
                                 iceberg_runtime_provided=provided, spark_version=self._extra.get("spark_version"))

    def spark_packages(self) -> list[str]:
        """Maven coordinates to resolve at submit time (only where Maven can be reached)."""
        return _json_list(self._extra.get("spark_packages"), "spark_packages")

    # -- Airflow UI -------------------------------------------------------------------------
    def test_connection(self) -> tuple[bool, str]:
        """What the UI's Test button shows: whether the catalog answers, and what it holds; or
        one sentence naming what is wrong (unreachable, credential refused, no such warehouse
        or bucket, S3 key refused) and what to do."""
        try:
            catalog = self.catalog = self.get_catalog()
            namespaces = catalog.list_namespaces()
            tables = [ident for ns in namespaces for ident in catalog.list_tables(ns)]
            if tables:
                # The catalog answering says nothing about the storage's key: read one table's metadata.
                self.load_table(".".join(tables[0]))
        except (LakeConfigError, LakeTableNotFound) as error:
            return False, str(error)
        except Exception as error:  # noqa: BLE001 - the message is the point: show it to the user
            config = self.config
            sentence = describe_catalog_error(config.kind, config.name, config.uri, config.warehouse, error)
            return False, sentence or f"{type(error).__name__}: {error}"
        storage = f" and read the metadata of {'.'.join(tables[0])}" if tables else ""
        return True, (
            f"Connected to {self.config.kind} catalog {self.config.name!r}{storage}. "
            f"Found {len(namespaces)} namespaces and {len(tables)} tables."
        )

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        """Form layout for Airflow versions that read it from the hook (snake case, unlike the provider info)."""
        from airflow_lake_provider.get_provider_info import CONNECTION_UI_FIELD_BEHAVIOUR

        return {key.replace("-", "_"): value for key, value in CONNECTION_UI_FIELD_BEHAVIOUR.items()}


@dataclasses.dataclass(frozen=True)
class LakeTable:
    """One table of the lake as a step reads it (:class:`~airflow_lake_provider.steps.base.TableReader`)."""

    hook: IcebergLakeHook
    identifier: TableIdentifier

    def load_table(self) -> Table:
        return self.hook.load_table(self.identifier)

    def read_digest(self) -> TableDigest:
        return self.hook.read_table_digest(self.identifier)


def _file_io(properties: dict[str, str], location: str) -> FileIO:
    from pyiceberg.io import load_file_io

    return load_file_io(properties, location)


def _digest_at(catalog, location: str | None) -> TableDigest | None:
    """The digest of the metadata file at ``location`` (a SQL or Hive catalog's pointer)."""
    if not location:
        return None
    with _file_io(dict(catalog.properties), location).new_input(location).open() as stream:
        return read_table_digest(stream.read(), metadata_location=location)


def _read_digest_directly(catalog, kind: str, ident: TableIdentifier) -> TableDigest | None:
    """The digest read without PyIceberg's table model, or ``None`` where that is not possible
    (another catalog kind, the table not found, an answer other than 200: load_table says why).

    Uses PyIceberg's SQL schema, its Hive client and its REST client's session and URL helpers
    (pinned to 0.12 in pyproject, and covered by tests on the three catalogs); a PyIceberg without
    them falls back too.
    """
    try:
        if kind == "sql":
            from pyiceberg.catalog.sql import IcebergTables
            from sqlalchemy import select
            from sqlalchemy.orm import Session

            query = select(IcebergTables.metadata_location).where(
                IcebergTables.catalog_name == catalog.name,
                IcebergTables.table_namespace == ".".join(ident.namespace),
                IcebergTables.table_name == ident.name,
            )
            type_filter = catalog._iceberg_type_filter()  # a view of the same name is not the table
            if type_filter is not None:
                query = query.where(type_filter)
            with Session(catalog.engine) as session:
                return _digest_at(catalog, session.scalar(query))
        if kind == "hive":
            from hive_metastore.ttypes import NoSuchObjectException

            try:
                database, table_name = catalog.identifier_to_database_and_table(ident.dotted)
                with catalog._client as client:
                    parameters = client.get_table(dbname=database, tbl_name=table_name).parameters or {}
            except (NoSuchObjectException, ValueError):  # not found, or no Hive name: load_table says which
                return None
            if parameters.get("table_type", "").upper() != "ICEBERG":  # a Hive table of the same name
                return None
            return _digest_at(catalog, parameters.get("metadata_location"))
        if kind == "rest":
            from pyiceberg.catalog.rest import Endpoints

            url = catalog.url(Endpoints.load_table, prefixed=True, **catalog._split_identifier_for_path(ident.dotted))
            response = catalog._session.get(url)
            return read_table_digest(response.content) if response.status_code == 200 else None
    except (AttributeError, ImportError, TypeError):  # a PyIceberg whose internals moved: the full load still works
        return None
    return None
