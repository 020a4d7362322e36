"""How a job's result travels back to Airflow: a JSON document at a path or URI.

In client mode (the default) the path is a private local file. In cluster mode the driver
runs elsewhere, so the caller gives a URI on storage both sides reach (``hdfs://``,
``s3a://``...), written here through Hadoop's FileSystem API.
"""

from __future__ import annotations

import json
import os
import traceback
from typing import Any
from urllib.parse import urlsplit

RESULT_MARKER = "LAKE_JOB_ERROR"


def _is_local(location: str) -> bool:
    return urlsplit(location).scheme in ("", "file")


def write_result(location: str, document: dict[str, Any], spark=None) -> None:
    payload = json.dumps(document, default=str, sort_keys=True)
    if _is_local(location):
        path = urlsplit(location).path if location.startswith("file:") else location
        tmp = f"{path}.tmp"
        with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as handle:
            handle.write(payload)
        os.replace(tmp, path)
        return
    if spark is None:
        raise RuntimeError(f"Cannot write a result to {location} without a Spark session.")
    jvm = spark.sparkContext._jvm
    hadoop_path = jvm.org.apache.hadoop.fs.Path(location)
    fs = hadoop_path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    stream = fs.create(hadoop_path, True)
    try:
        stream.write(bytearray(payload.encode("utf-8")))
    finally:
        stream.close()


def describe_failure(error: BaseException) -> dict[str, Any]:
    """The error as a user should read it: the Java exception's class and message when there is one."""
    error_class = type(error).__name__
    message = str(error)
    java = getattr(error, "java_exception", None)
    if java is not None:
        try:
            root = java
            while root.getCause() is not None and root.getCause() != root:
                root = root.getCause()
            error_class = root.getClass().getName()
            message = root.getMessage() or java.getMessage() or message
        except Exception:  # noqa: BLE001 - the JVM may already be gone; keep the Python-side text
            pass
    else:
        # PySpark's AnalysisException and friends carry a readable first line.
        message = message.strip().splitlines()[0] if message.strip() else error_class
    return {
        "status": "failed",
        "error_class": error_class,
        "message": message,
        "traceback": traceback.format_exception(type(error), error, error.__traceback__)[-20:],
    }
