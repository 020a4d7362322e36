"""Where the jars a Spark job needs come from: found in installed packages, overridable.

Order of precedence for the Iceberg Spark runtime:
1. an explicit path (operator / connection ``spark_jars``), or Maven coordinates in
   ``spark_packages`` where Maven Central can be reached (then no runtime jar is added);
2. ``$LAKE_ICEBERG_RUNTIME_JAR``;
3. the runtime jar shipped by the PyPI package ``snowpark-connect-deps-iceberg``.
JDBC drivers come from ``$LAKE_JDBC_JAR_DIR`` or Debian's ``/usr/share/java``.
"""

from __future__ import annotations

import glob
import importlib.util
import os
from pathlib import Path

from airflow_lake_provider.exceptions import LakeConfigError

SCALA_VERSION = "2.12"
SPARK_MINOR = "3.5"
_JDBC_JARS = {"sqlite": "sqlite-jdbc.jar", "postgresql": "postgresql.jar"}
_JDBC_DEBIAN_PACKAGES = {"sqlite": "libxerial-sqlite-jdbc-java", "postgresql": "libpostgresql-jdbc-java"}


def iceberg_runtime_jar() -> str:
    """Path of the Iceberg Spark runtime jar for Spark 3.5 / Scala 2.12."""
    override = os.environ.get("LAKE_ICEBERG_RUNTIME_JAR")
    if override:
        if not Path(override).is_file():
            raise LakeConfigError(f"LAKE_ICEBERG_RUNTIME_JAR points to {override!r}, which is not a file.")
        return override
    spec = importlib.util.find_spec("snowpark_connect_deps_iceberg")
    if spec and spec.submodule_search_locations:
        for location in spec.submodule_search_locations:
            found = sorted(
                glob.glob(os.path.join(location, "jars", f"iceberg-spark-runtime-{SPARK_MINOR}_{SCALA_VERSION}-*.jar"))
            )
            if found:
                return found[-1]
    raise LakeConfigError(
        "No Iceberg Spark runtime jar found: install 'snowpark-connect-deps-iceberg==1.0.2', set "
        "LAKE_ICEBERG_RUNTIME_JAR to a jar path, or give spark_packages "
        f"['org.apache.iceberg:iceberg-spark-runtime-{SPARK_MINOR}_{SCALA_VERSION}:1.10.2'] where Maven is reachable."
    )


def jdbc_driver_jar(dialect: str) -> str:
    """Path of the JDBC driver jar for a SQL catalog database (``sqlite`` or ``postgresql``)."""
    directory = os.environ.get("LAKE_JDBC_JAR_DIR", "/usr/share/java")
    path = Path(directory) / _JDBC_JARS[dialect]
    if not path.is_file():
        raise LakeConfigError(
            f"The {dialect} JDBC driver is missing ({path}): install the Debian package "
            f"{_JDBC_DEBIAN_PACKAGES[dialect]}, or set LAKE_JDBC_JAR_DIR to a directory holding {_JDBC_JARS[dialect]}."
        )
    return str(path)


def resolve_jars(
    jdbc_dialect: str | None,
    *,
    extra_jars: list[str] | None = None,
    packages: list[str] | None = None,
) -> list[str]:
    """All jars for a job: the user's own, the Iceberg runtime (unless given as a package), the JDBC driver."""
    jars = list(extra_jars or [])
    for jar in jars:
        if "://" not in jar and not Path(jar).is_file():
            raise LakeConfigError(f"Jar {jar!r} does not exist.")
    user_gives_runtime = any("iceberg-spark-runtime" in item for item in [*jars, *(packages or [])])
    if not user_gives_runtime:
        jars.append(iceberg_runtime_jar())
    if jdbc_dialect and not any(_JDBC_JARS[jdbc_dialect].split(".")[0].split("-")[0] in Path(j).name for j in jars):
        jars.append(jdbc_driver_jar(jdbc_dialect))
    return jars
