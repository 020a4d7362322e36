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
