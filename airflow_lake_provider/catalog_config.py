"""One Iceberg catalog, described once, opened by two engines.

A :class:`CatalogConfig` is what an Airflow connection (or the embedded default lake) says
about a catalog. From it come the properties of the PyIceberg catalog (planning, sensing,
verifying: no JVM) and the Spark configuration of the *same* catalog (the jobs), so a table
written through one face is read through the other. Pure logic: no Airflow, no Spark.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, TypeGuard
from urllib.parse import quote, urlsplit

from airflow_lake_provider.core.object_storage import ADLS_FILE_IO, GCS_FILE_IO, store_of
from airflow_lake_provider.exceptions import LakeConfigError
from airflow_lake_provider.jars import ICEBERG_AWS_BUNDLE

CATALOG_KINDS = ("sql", "rest", "hive")
SPARK_EXTENSIONS = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"
_CATALOG_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
# Keys whose values are never put on a command line or in a log.
_SECRET_KEY = re.compile(r"(password|secret|token|credential|private|(access|account)[-_.]?key)", re.IGNORECASE)


HADOOP_FILE_IO = "org.apache.iceberg.hadoop.HadoopFileIO"
#: Iceberg's own FileIO of an object store the Spark face reads without a Hadoop connector, and the package
#: of its classes (in the store's bundle).
_STORE_FILE_IOS = {"gcs": (GCS_FILE_IO, "org.apache.iceberg.gcp."), "adls": (ADLS_FILE_IO, "org.apache.iceberg.azure.")}
S3_FILE_IO = "org.apache.iceberg.aws.s3.S3FileIO"
S3A_FILE_SYSTEM = "org.apache.hadoop.fs.s3a.S3AFileSystem"
S3_SCHEMES = ("s3", "s3a")
# The S3 properties PyIceberg reads (Iceberg's S3FileIO reads the same names); the Spark face
# turns them into Hadoop S3A settings.
_S3_PROPERTIES = ("s3.endpoint", "s3.access-key-id", "s3.secret-access-key", "s3.session-token", "s3.region",
                  "s3.path-style-access")


def is_secret_key(key: str) -> bool:
    """Whether a configuration key names a secret (its value must stay out of argv and logs)."""
    return bool(_SECRET_KEY.search(key))


@dataclass(frozen=True)
class _SqlBackend:
    """The database behind a SQL catalog, in the two spellings the two engines need."""

    dialect: str  # "sqlite" or "postgresql"
    sqlite_path: str | None = None
    host: str | None = None
    port: int | None = None
    database: str | None = None

    @classmethod
    def parse(cls, uri: str) -> _SqlBackend:
        raw = uri[len("jdbc:") :] if uri.startswith("jdbc:") else uri
        scheme = raw.split(":", 1)[0].split("+", 1)[0].lower()
        if scheme == "sqlite":
            # sqlite:////abs/path.db (SQLAlchemy) or jdbc:sqlite:/abs/path.db (JDBC)
            is_jdbc = uri.startswith("jdbc:")
            if is_jdbc:
                path = raw[len("sqlite:") :]
            else:
                path = raw[len("sqlite:///") :] if raw.startswith("sqlite:///") else ""
            if not path.startswith("/") or path == "/" or "?" in path:
                raise LakeConfigError(f"SQLite catalog URI {uri!r} must name an absolute file path.")
            return cls("sqlite", sqlite_path=path)
        if scheme in ("postgresql", "postgres"):
            parts = urlsplit(raw.replace("postgres://", "postgresql://", 1))
            if not parts.hostname or not parts.path.strip("/"):
                raise LakeConfigError(
                    f"PostgreSQL catalog URI {uri!r} must look like postgresql://HOST:PORT/DATABASE."
                )
            if parts.username or parts.password:
                raise LakeConfigError(
                    "Put the catalog database user and password in the connection's Login and "
                    "Password fields, not in the URI (the URI is not treated as a secret)."
                )
            return cls("postgresql", host=parts.hostname, port=parts.port or 5432, database=parts.path.strip("/"))
        raise LakeConfigError(
            f"SQL catalog URI {uri!r} is not supported: use sqlite:////ABS/PATH.db or "
            "postgresql://HOST:PORT/DATABASE (a jdbc: prefix is accepted too)."
        )

    def sqlalchemy_uri(self, user: str | None, password: str | None) -> str:
        if self.dialect == "sqlite":
            return f"sqlite:///{self.sqlite_path}"
        auth = ""
        if user:
            auth = quote(user, safe="") + (f":{quote(password, safe='')}" if password else "") + "@"
        return f"postgresql+psycopg2://{auth}{self.host}:{self.port}/{self.database}"

    def jdbc_uri(self) -> str:
        if self.dialect == "sqlite":
            return f"jdbc:sqlite:{self.sqlite_path}"
        return f"jdbc:postgresql://{self.host}:{self.port}/{self.database}"


def _spark_warehouse(warehouse: str) -> str:
    # Hadoop prefers file:/abs; PyIceberg prefers file:///abs. Both name the same directory.
    return re.sub(r"^file:/+", "file:/", warehouse)


def _scheme(location: str | None) -> str:
    return urlsplit(location).scheme.lower() if location and "://" in location else ""


def is_s3_location(location: str | None) -> TypeGuard[str]:
    """Whether ``location`` is on S3 (``s3://`` or ``s3a://``)."""
    return _scheme(location) in S3_SCHEMES


def _is_aws_endpoint(endpoint: str) -> bool:
    host = urlsplit(endpoint).hostname or ""
    return host.endswith((".amazonaws.com", ".amazonaws.com.cn"))


@dataclass(frozen=True)
class CatalogConfig:
    """Everything needed to open one Iceberg catalog from PyIceberg and from Spark.

    :param name: the catalog's name; also the Spark catalog name (``lake.db.table``).
    :param kind: ``sql`` (SQLite or PostgreSQL database), ``rest`` or ``hive``.
    :param uri: database URI (sql), REST endpoint (rest) or ``thrift://`` metastore (hive).
    :param warehouse: root location of table data, e.g. ``file:///data/warehouse`` or ``s3://bucket/wh``.
    :param user: database user (sql) or OAuth client id (rest).
    :param password: database password (sql) or token / client secret (rest). Secret.
    :param properties: extra catalog properties given to both engines.
    :param pyiceberg_properties: extra properties for the PyIceberg face only.
    :param spark_properties: extra catalog properties for the Spark face only (unprefixed).
    :param spark_conf: extra raw Spark configuration (``spark.hadoop.fs.s3a.endpoint`` ...).
    """

    name: str
    kind: str
    uri: str
    warehouse: str | None = None
    user: str | None = None
    password: str | None = field(default=None, repr=False)
    properties: dict[str, str] = field(default_factory=dict)
    pyiceberg_properties: dict[str, str] = field(default_factory=dict)
    spark_properties: dict[str, str] = field(default_factory=dict)
    spark_conf: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.validate()

    # -- validation -------------------------------------------------------------------------
    def validate(self) -> None:
        """Refuse a catalog description that cannot work, with a message that says why."""
        if not isinstance(self.name, str) or not _CATALOG_NAME.match(self.name):
            raise LakeConfigError(
                f"Catalog name {self.name!r} is invalid: use letters, digits and '_' (for example 'lake')."
            )
        if self.kind not in CATALOG_KINDS:
            raise LakeConfigError(
                f"Unknown catalog kind {self.kind!r}: expected one of {', '.join(CATALOG_KINDS)}."
            )
        if not self.uri:
            raise LakeConfigError(f"The {self.kind} catalog {self.name!r} needs a URI.")
        if self.kind == "sql":
            _SqlBackend.parse(self.uri)
            if not self.warehouse:
                raise LakeConfigError(
                    f"The SQL catalog {self.name!r} needs a warehouse location (for example "
                    "file:///data/warehouse): it is where new tables' files go."
                )
        elif self.kind == "rest":
            if urlsplit(self.uri).scheme not in ("http", "https"):
                raise LakeConfigError(f"REST catalog URI {self.uri!r} must start with http:// or https://.")
        elif self.kind == "hive":
            if urlsplit(self.uri).scheme != "thrift":
                raise LakeConfigError(f"Hive metastore URI {self.uri!r} must start with thrift://.")
            if not self.warehouse:
                raise LakeConfigError(f"The Hive catalog {self.name!r} needs a warehouse location.")
        for label, mapping in (
            ("properties", self.properties),
            ("pyiceberg_properties", self.pyiceberg_properties),
            ("spark_properties", self.spark_properties),
            ("spark_conf", self.spark_conf),
        ):
            if not isinstance(mapping, dict):
                raise LakeConfigError(f"Catalog {label} must be a JSON object, got {type(mapping).__name__}.")
        for key in self.spark_conf:
            if not str(key).startswith("spark."):
                raise LakeConfigError(f"spark_conf key {key!r} must start with 'spark.'.")

    @property
    def sql_backend(self) -> _SqlBackend | None:
        return _SqlBackend.parse(self.uri) if self.kind == "sql" else None

    @property
    def jdbc_driver(self) -> str | None:
        """``sqlite`` or ``postgresql``: the JDBC driver Spark needs for this catalog, if any."""
        backend = self.sql_backend
        return backend.dialect if backend else None

    # -- the PyIceberg face -----------------------------------------------------------------
    def pyiceberg_catalog_properties(self) -> dict[str, str]:
        """Properties for ``pyiceberg.catalog.load_catalog(name, **props)``."""
        props: dict[str, str] = {"type": self.kind}
        if self.kind == "sql":
            props["uri"] = _SqlBackend.parse(self.uri).sqlalchemy_uri(self.user, self.password)
        else:
            props["uri"] = self.uri
        if self.warehouse:
            props["warehouse"] = self.warehouse
        if self.kind == "rest":
            if self.user and self.password:
                props["credential"] = f"{self.user}:{self.password}"
            elif self.password:
                props["token"] = self.password
        props.update(self._oauth2_properties())
        props.update({str(k): str(v) for k, v in self.properties.items()})
        props.update({str(k): str(v) for k, v in self.pyiceberg_properties.items()})
        endpoint = props.get("s3.endpoint")
        if endpoint and not _is_aws_endpoint(endpoint):
            # PyArrow addresses buckets as virtual hosts (bucket.host) unless told otherwise,
            # which a self-hosted store on an IP address or a plain host name does not serve.
            props.setdefault("s3.force-virtual-addressing", "false")
        return props

    def _oauth2_properties(self) -> dict[str, str]:
        """REST with a client id and secret, or a token: name the token endpoint (Iceberg 1.10
        warns on every job that its fallback to ``<uri>/v1/oauth/tokens`` will be removed; with a
        token it is only used to refresh it, as the fallback was). User properties override it."""
        if self.kind != "rest" or not self.password:
            return {}
        return {"oauth2-server-uri": f"{self.uri.rstrip('/')}/v1/oauth/tokens"}

    # -- storage ----------------------------------------------------------------------------
    def _merged_spark_properties(self) -> dict[str, str]:
        return {**{str(k): str(v) for k, v in self.properties.items()},
                **{str(k): str(v) for k, v in self.spark_properties.items()}}

    @property
    def uses_s3(self) -> bool:
        """Whether tables live on S3: an ``s3://``/``s3a://`` warehouse, or S3 properties given
        (a REST catalog names its warehouse, not a location; its tables' locations come from it)."""
        props = self._merged_spark_properties()
        return is_s3_location(self.warehouse) or any(key in props for key in _S3_PROPERTIES)

    @property
    def spark_uses_s3a(self) -> bool:
        """Whether the Spark face reads S3 through Hadoop's S3A (and so needs hadoop-aws and its SDK)."""
        io_impl = self._merged_spark_properties().get("io-impl")
        return self.uses_s3 and (io_impl is None or io_impl == HADOOP_FILE_IO)

    @property
    def spark_uses_aws_bundle(self) -> bool:
        """Whether the Spark face needs Iceberg's AWS bundle: ``S3FileIO`` (or another of Iceberg's AWS
        classes) named in the properties, or REST requests signed with SigV4."""
        props = self._merged_spark_properties()
        return (any(str(value).startswith("org.apache.iceberg.aws.") for value in props.values())
                or props.get("rest.auth.type") == "sigv4" or str(props.get("rest.sigv4-enabled")).lower() == "true")

    @property
    def _warehouse_store(self) -> str | None:
        return store_of(str(self.warehouse)) if self.warehouse else None

    def _spark_uses_file_io(self, store: str) -> bool:
        """Whether the Spark face reads ``store`` through Iceberg's own FileIO for it (and so needs its bundle):
        a warehouse on that store, or one of the FileIO's Iceberg classes named in the properties."""
        package = _STORE_FILE_IOS[store][1]
        return self._warehouse_store == store or any(
            str(value).startswith(package) for value in self._merged_spark_properties().values())

    @property
    def spark_uses_gcs(self) -> bool:
        """``GCSFileIO`` (iceberg-gcp-bundle): a ``gs://`` warehouse, or Iceberg's GCP classes named."""
        return self._spark_uses_file_io("gcs")

    @property
    def spark_uses_adls(self) -> bool:
        """``ADLSFileIO`` (iceberg-azure-bundle): an ``abfs[s]://`` warehouse, or Iceberg's Azure classes named."""
        return self._spark_uses_file_io("adls")

    def _s3a_conf(self) -> dict[str, str]:
        """Hadoop S3A settings derived from the S3 properties (``spark.hadoop.*``; secrets included)."""
        props = self._merged_spark_properties()
        conf = {"spark.hadoop.fs.s3.impl": S3A_FILE_SYSTEM, "spark.hadoop.fs.s3a.impl": S3A_FILE_SYSTEM,
                # S3A otherwise deletes the parent "directory" markers after every file it writes: a
                # request per file, refused (and logged per file) by stores that guard their layout.
                "spark.hadoop.fs.s3a.directory.marker.retention": "keep"}
        endpoint = props.get("s3.endpoint")
        if endpoint:
            conf["spark.hadoop.fs.s3a.endpoint"] = endpoint
            conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] = str(_scheme(endpoint) != "http").lower()
        path_style = props.get("s3.path-style-access")
        if path_style is None and endpoint and not _is_aws_endpoint(endpoint):
            path_style = "true"
        if path_style is not None:
            conf["spark.hadoop.fs.s3a.path.style.access"] = str(path_style).lower()
        if props.get("s3.region"):
            conf["spark.hadoop.fs.s3a.endpoint.region"] = props["s3.region"]
        if props.get("s3.access-key-id") and props.get("s3.secret-access-key"):
            conf["spark.hadoop.fs.s3a.access.key"] = props["s3.access-key-id"]
            conf["spark.hadoop.fs.s3a.secret.key"] = props["s3.secret-access-key"]
            if props.get("s3.session-token"):
                conf["spark.hadoop.fs.s3a.session.token"] = props["s3.session-token"]
                provider = "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"
            else:
                provider = "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
            conf["spark.hadoop.fs.s3a.aws.credentials.provider"] = provider
        return conf

    @staticmethod
    def _s3_file_io_defaults(props: dict[str, str]) -> dict[str, str]:
        """What Iceberg's ``S3FileIO`` needs beyond the ``s3.*`` properties it shares with PyIceberg
        (given values win): the region and, off AWS, path-style addressing."""
        defaults: dict[str, str] = {}
        # S3FileIO's client takes its region from client.region only (s3.region is PyIceberg's name).
        if props.get("s3.region"):
            defaults["client.region"] = props["s3.region"]
        endpoint = props.get("s3.endpoint")
        # S3FileIO addresses buckets as virtual hosts unless told otherwise, as S3A does (fs.s3a.path.style.access).
        if endpoint and not _is_aws_endpoint(endpoint):
            defaults["s3.path-style-access"] = "true"
        return defaults

    # -- the Spark face ---------------------------------------------------------------------
    def spark_catalog_conf(self) -> dict[str, str]:
        """Spark SQL configuration that registers this catalog under its name, secrets included.

        Pass it to a session builder or a properties file with restricted permissions, never
        as ``--conf`` arguments (they are visible in the process list).
        """
        prefix = f"spark.sql.catalog.{self.name}"
        catalog: dict[str, str] = {"cache-enabled": "false"}
        if self.kind == "sql":
            backend = _SqlBackend.parse(self.uri)
            catalog.update(
                {
                    "type": "jdbc",
                    "uri": backend.jdbc_uri(),
                    # The layout PyIceberg's SqlCatalog creates (with the iceberg_type column).
                    "jdbc.schema-version": "V1",
                }
            )
            if backend.dialect == "sqlite":
                # With the default (true), Iceberg's existence check leaves a query open and holds
                # a SQLite lock for the JVM's life; the tables are created through PyIceberg first.
                catalog["jdbc.init-catalog-tables"] = "false"
            if self.user:
                catalog["jdbc.user"] = self.user
            if self.password:
                catalog["jdbc.password"] = self.password
        elif self.kind == "rest":
            catalog.update({"type": "rest", "uri": self.uri})
            if self.user and self.password:
                catalog["credential"] = f"{self.user}:{self.password}"
            elif self.password:
                catalog["token"] = self.password
            if self.password:
                # Said, not guessed: Iceberg 1.10 warns on every job when it infers this.
                catalog["rest.auth.type"] = "oauth2"
                catalog.update(self._oauth2_properties())
        else:
            catalog.update({"type": "hive", "uri": self.uri})
        if self.warehouse:
            catalog["warehouse"] = _spark_warehouse(self.warehouse)
        if self.spark_uses_s3a:
            # Unless the properties name a FileIO (S3FileIO: iceberg-aws-bundle is then added), Hadoop's
            # S3A reads s3:// and s3a:// alike, with the S3 settings PyIceberg uses (docs/connection.md).
            catalog["io-impl"] = HADOOP_FILE_IO
        elif self._warehouse_store in _STORE_FILE_IOS:
            # The catalogs' default (HadoopFileIO) would need Hadoop's GCS or ABFS connector; Iceberg's own
            # FileIO reads the gcs.* or adls.* properties PyIceberg reads.
            catalog["io-impl"] = _STORE_FILE_IOS[self._warehouse_store][0]
        catalog.update(self._merged_spark_properties())
        if catalog.get("io-impl") == S3_FILE_IO:
            catalog.update({k: v for k, v in self._s3_file_io_defaults(catalog).items() if k not in catalog})
        conf = {prefix: "org.apache.iceberg.spark.SparkCatalog"}
        conf.update({f"{prefix}.{key}": value for key, value in catalog.items()})
        conf["spark.sql.extensions"] = SPARK_EXTENSIONS
        if self.spark_uses_s3a:
            conf.update(self._s3a_conf())
        conf.update({str(k): str(v) for k, v in self.spark_conf.items()})
        return conf

    def secret_values(self) -> list[str]:
        """Every secret value this config holds, for masking and for tests that look for leaks."""
        secrets = [self.password] if self.password else []
        for mapping in (self.properties, self.pyiceberg_properties, self.spark_properties, self.spark_conf):
            secrets += [str(v) for k, v in mapping.items() if is_secret_key(str(k)) and v]
        return secrets

    def describe(self) -> dict[str, Any]:
        """A log- and XCom-safe description (no secrets)."""
        return {"name": self.name, "kind": self.kind, "uri": self.uri, "warehouse": self.warehouse}


# The official apache-iceberg provider's connection type: host = catalog URI, login/password =
# OAuth client id/secret, extra = PyIceberg catalog properties (``type`` defaults to ``rest``).
OFFICIAL_CONNECTION_TYPE = "iceberg"
# Keys of that extra which are fields of CatalogConfig or of the hook, not catalog properties.
_NOT_CATALOG_PROPERTIES = ("type", "uri", "warehouse", "catalog_name", "credential", "token", "lease_namespace",
                           "iceberg_runtime_provided", "spark_jars", "spark_packages", "spark_version")


def other_catalog_way_out(kind: str) -> str:
    """The sentence that follows the refusal of a catalog type the jobs cannot open (``glue``,
    ``bigquery``...): its Iceberg REST endpoint, a ``rest`` catalog, is how it can be maintained."""
    if kind == "glue":
        return ("Open the Glue Data Catalog through its Iceberg REST endpoint instead: an 'iceberg_lake' connection "
                "with catalog_kind 'rest', Host https://glue.REGION.amazonaws.com/iceberg, warehouse the AWS account "
                "id, pyiceberg_properties {\"rest.sigv4-enabled\": \"true\", \"rest.signing-name\": \"glue\", "
                "\"rest.signing-region\": \"REGION\"} and spark_properties {\"rest.auth.type\": \"sigv4\", "
                "\"rest.signing-name\": \"glue\", \"rest.signing-region\": \"REGION\"} (the Spark jobs then get "
                f"{ICEBERG_AWS_BUNDLE} added), as docs/connection.md shows.")
    return (f"If the {kind!r} catalog also serves the Iceberg REST protocol, describe that endpoint instead: "
            "catalog_kind 'rest' in an 'iceberg_lake' connection, with the endpoint as Host.")


def config_from_iceberg_connection(conn_id: str, *, host: str | None, login: str | None, password: str | None,
                                   extra: dict[str, Any]) -> CatalogConfig:
    """The catalog an official ``iceberg`` connection describes, as this package opens it.

    Its fields suffice for a REST catalog (the official provider's purpose) and for SQL and Hive
    catalogs given by ``type`` and ``uri``; every other extra key is a catalog property both
    engines receive (``s3.endpoint``, ``s3.access-key-id``...). A catalog type this package's
    Spark jobs cannot open (``glue``, ``bigquery``...) is refused with the way out
    (:func:`other_catalog_way_out`).
    """
    kind = str(extra.get("type") or "rest").lower()
    if kind not in CATALOG_KINDS:
        raise LakeConfigError(
            f"Connection {conn_id!r} (type 'iceberg') describes a {kind!r} catalog; the maintenance jobs open "
            f"{', '.join(CATALOG_KINDS)} catalogs. {other_catalog_way_out(kind)}")
    user, secret = login or None, password or None
    credential = extra.get("credential")
    if credential and not (user or secret):  # the PyIceberg property spelt in the extra: "id:secret"
        user, _, secret = str(credential).partition(":")
        user, secret = (user, secret) if secret else (None, user)
    if extra.get("token") and not secret:
        secret = str(extra["token"])
    uri = host or str(extra.get("uri") or "")
    return CatalogConfig(
        name=str(extra.get("catalog_name") or "lake"),
        kind=kind,
        uri=uri.rstrip("/") if kind == "rest" else uri,
        warehouse=extra.get("warehouse") or None,
        user=user,
        password=secret,
        properties={str(k): str(v) for k, v in extra.items() if k not in _NOT_CATALOG_PROPERTIES},
    )
