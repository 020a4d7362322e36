"""Spark session for a job, built from the spec's session configuration."""

from __future__ import annotations

from typing import Any


def build_session(spec: dict[str, Any]):
    """A SparkSession with the spec's catalog registered (conf set before the session exists)."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(spec.get("app_name") or f"lake-{spec['job']}")
    for key, value in (spec.get("session_conf") or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(spec.get("log_level", "WARN"))
    return spark


def local_session(session_conf: dict[str, str], *, jars: list[str], warehouse_dir: str, app_name: str = "lake-local"):
    """An in-process ``local[*]`` session on a catalog: for tests, notebooks and users' own scripts.

    Bound to 127.0.0.1 with the UI off, like the jobs the provider submits.
    """
    import os

    from pyspark.sql import SparkSession

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = (
        SparkSession.builder.master("local[2]")
        .appName(app_name)
        .config("spark.jars", ",".join(jars))
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.warehouse.dir", warehouse_dir)
    )
    for key, value in session_conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark
