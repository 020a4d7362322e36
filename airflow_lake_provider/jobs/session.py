"""Spark session for a job, built from the spec's session configuration."""

from __future__ import annotations

import os
from typing import Any

#: Spark 3.5's default ``spark.redaction.regex``. Spark hides a configuration value in its UI,
#: event log and ``--verbose`` output when the key (or the value) matches it.
SPARK_DEFAULT_REDACTION = "(?i)secret|password|token|access[.]?key"
#: What that default misses among the keys this provider fills with secrets: an Iceberg REST
#: catalog's ``credential`` (``client_id:client_secret``) and ``s3.access-key-id``.
LAKE_REDACTION = "credential|private|access[-_.]?key"


def redaction_regex(current: str | None) -> str:
    """``current`` (the launch-time value, or Spark's default) widened to cover this provider's secret keys."""
    base = current or SPARK_DEFAULT_REDACTION
    return base if LAKE_REDACTION in base else f"{base}|{LAKE_REDACTION}"


def _launch_redaction_regex() -> str | None:
    """The ``spark.redaction.regex`` spark-submit was given, read from the driver's JVM."""
    try:
        from pyspark import SparkConf, SparkContext

        SparkContext._ensure_initialized()
        return SparkConf().get("spark.redaction.regex", None)
    except Exception:  # noqa: BLE001 - no JVM yet: the default applies
        return None


def build_session(spec: dict[str, Any]):
    """A SparkSession with the spec's catalog registered (conf set before the session exists).

    The redaction pattern is widened before the SparkContext starts: Spark writes every
    configuration value to its event log and UI, and its default pattern would show the REST
    catalog's OAuth client secret there.
    """
    from pyspark.sql import SparkSession

    session_conf = dict(spec.get("session_conf") or {})
    builder = SparkSession.builder.appName(spec.get("app_name") or f"lake-{spec['job']}")
    regex = session_conf.pop("spark.redaction.regex", None) or _launch_redaction_regex()
    builder = builder.config("spark.redaction.regex", redaction_regex(regex))
    for key, value in session_conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(spec.get("log_level", "WARN"))
    return spark


def local_session(session_conf: dict[str, str], *, jars: list[str], warehouse_dir: str, app_name: str = "lake-local",
                  packages: list[str] | None = None):
    """An in-process ``local[*]`` session on a catalog: for tests, notebooks and users' own scripts.

    Bound to 127.0.0.1 with the UI off, like the jobs the provider submits. ``jars`` and
    ``packages`` as ``IcebergLakeHook.spark_classpath()`` gives them.
    """
    import os

    from pyspark.sql import SparkSession

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = (
        SparkSession.builder.master("local[2]")
        .appName(app_name)
        .config("spark.jars", ",".join(jars))
        .config("spark.jars.packages", ",".join(packages or []))
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.warehouse.dir", warehouse_dir)
        .config("spark.redaction.regex", redaction_regex(session_conf.get("spark.redaction.regex")))
    )
    for key, value in session_conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


def _driver_gateway():
    """A py4j connection to the driver's JVM, made as PySpark makes it (spark-submit's port and secret;
    pinned threads unless ``PYSPARK_PIN_THREAD=false``) without importing PySpark: the driver imports
    it from Spark's zipped sources, compiled anew on every run (0.6 s on 2 cores). PySpark opens its
    own connection to the same JVM if the session starts; Java objects are shared between the two."""
    if "PYSPARK_GATEWAY_PORT" not in os.environ:  # not under spark-submit: PySpark starts a JVM
        from pyspark import SparkContext

        SparkContext._ensure_initialized()
        return SparkContext._gateway
    port, secret = int(os.environ["PYSPARK_GATEWAY_PORT"]), os.environ["PYSPARK_GATEWAY_SECRET"]
    if os.environ.get("PYSPARK_PIN_THREAD", "true").lower() == "true":
        from py4j.clientserver import ClientServer, JavaParameters, PythonParameters  # type: ignore[import-untyped]

        return ClientServer(java_parameters=JavaParameters(port=port, auth_token=secret, auto_convert=True),
                            python_parameters=PythonParameters(port=0, eager_load=False))
    from py4j.java_gateway import GatewayParameters, JavaGateway  # type: ignore[import-untyped]

    return JavaGateway(gateway_parameters=GatewayParameters(port=port, auth_token=secret, auto_convert=True))


#: Iceberg's Spark catalogs: their options build the same Iceberg catalog without Spark.
_ICEBERG_SPARK_CATALOGS = ("org.apache.iceberg.spark.SparkCatalog", "org.apache.iceberg.spark.SparkSessionCatalog")


class DeferredSparkSession:
    """A job's SparkSession, started the first time the job uses Spark.

    spark-submit starts the driver's JVM, with the catalog's jars on its class path, before this
    application runs, so Iceberg's Java API is reachable through ``_jvm`` at once. A job that needs
    nothing of Spark itself (the Arrow rewriter: Iceberg plans and commits, Arrow reads and writes)
    then skips PySpark's import and the SparkContext's start and stop, 3-4 s of a task on 2 cores.
    Any other attribute starts the session (:func:`build_session`) and is the session's own: a job
    that falls back to Spark work runs the same code either way. Only for a driver spark-submit
    started (client mode): YARN's cluster mode fails an application that starts no SparkContext.
    """

    def __init__(self, spec: dict[str, Any]) -> None:
        self._session = None  # first: __getattr__ reads it
        self._catalogs: dict[str, Any] = {}
        self._spec = spec
        self._gateway = _driver_gateway()

    @property
    def started(self) -> bool:
        return self._session is not None

    @property
    def _jvm(self) -> Any:
        """The JVM through this session's own connection until Spark starts, then through PySpark's: Spark's
        calls must come from the JVM thread PySpark made the session active on (its pinned threads)."""
        return self._session._jvm if self._session is not None else self._gateway.jvm

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        if self._session is None:
            self._session = build_session(self._spec)
        return getattr(self._session, name)

    def iceberg_catalog(self, name: str):
        """Catalog ``name`` as Iceberg's ``SparkCatalog`` builds it, without Spark; None when ``name`` is
        not one of Iceberg's Spark catalogs (then only Spark knows it).

        The same call on the same inputs: ``CatalogUtil.buildIcebergCatalog`` on the catalog's options,
        with Spark's Hadoop configuration (``SparkHadoopUtil.get().newConfiguration``: ``spark.hadoop.*`` and
        the rest) under the catalog's ``hadoop.*`` overrides, and the user as the ``user`` option.
        """
        if name in self._catalogs:
            return self._catalogs[name]
        jvm = self._jvm
        conf = self._spark_conf()
        catalog = None
        if conf.get(f"spark.sql.catalog.{name}", "") in _ICEBERG_SPARK_CATALOGS:
            prefix = f"spark.sql.catalog.{name}."
            settings = {str(entry._1()): str(entry._2()) for entry in conf.getAllWithPrefix(prefix)}
            options = jvm.java.util.HashMap()
            for key, value in settings.items():
                options.put(key, value)
            options.put("user", jvm.org.apache.spark.util.Utils.getCurrentUserName())
            hadoop = jvm.org.apache.spark.deploy.SparkHadoopUtil.get().newConfiguration(conf)
            for key, value in settings.items():
                if key.startswith("hadoop."):
                    hadoop.set(key[len("hadoop."):], value)
            catalog = jvm.org.apache.iceberg.CatalogUtil.buildIcebergCatalog(name, options, hadoop)
        self._catalogs[name] = catalog
        return catalog

    def _spark_conf(self):
        """The SparkConf the session would start with: spark-submit's settings (the driver's system
        properties) and the spec's session configuration."""
        conf = self._jvm.org.apache.spark.SparkConf()
        for key, value in (self._spec.get("session_conf") or {}).items():
            conf.set(key, str(value))
        return conf

    def hadoop_configuration(self):
        """A new Hadoop configuration as the SparkContext would make it (``spark.hadoop.*`` and the rest),
        without starting it; Spark's own once it is started."""
        if self._session is not None:
            return self._session.sparkContext._jsc.hadoopConfiguration()
        return self._jvm.org.apache.spark.deploy.SparkHadoopUtil.get().newConfiguration(self._spark_conf())

    def stop(self) -> None:
        """Close the catalogs built here, and stop the session if it was started."""
        closeable = self._jvm.java.lang.Class.forName("java.io.Closeable")
        for catalog in self._catalogs.values():
            if catalog is not None and closeable.isInstance(catalog):
                catalog.close()
        if self._session is not None:
            self._session.stop()
        if "PYSPARK_GATEWAY_PORT" in os.environ:  # this session's own connection
            self._gateway.close()


def spark_started(spark) -> bool:
    """Whether ``spark`` runs a SparkContext (a :class:`DeferredSparkSession` starts one only when used)."""
    return not isinstance(spark, DeferredSparkSession) or spark.started


def hadoop_configuration(spark):
    """Spark's Hadoop configuration, without starting a :class:`DeferredSparkSession`."""
    if isinstance(spark, DeferredSparkSession):
        return spark.hadoop_configuration()
    return spark.sparkContext._jsc.hadoopConfiguration()


def spark_master(spark) -> str:
    """The master the application was submitted to, without starting a :class:`DeferredSparkSession`
    (spark-submit's setting, among the driver's system properties)."""
    if not spark_started(spark):
        return str(spark._jvm.org.apache.spark.SparkConf().get("spark.master", "local[*]"))
    return str(spark.sparkContext.master)
