"""Spark session for a job, built from the spec's session configuration."""

from __future__ import annotations

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
