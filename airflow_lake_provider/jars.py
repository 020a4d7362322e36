"""Where the jars a Spark job needs come from: found in installed packages, overridable.

Order of precedence for the Iceberg Spark runtime:
1. an explicit path (operator / connection ``spark_jars``), or Maven coordinates in
   ``spark_packages`` where Maven Central can be reached (then no runtime jar is added);
2. ``$LAKE_ICEBERG_RUNTIME_JAR``;
3. the runtime jar shipped by the PyPI package ``snowpark-connect-deps-iceberg`` (the optional
   extra ``airflow-lake-provider[iceberg-jar]``; not needed where the Spark image has the runtime
   and ``iceberg_runtime_provided`` is set).
JDBC drivers come from ``$LAKE_JDBC_JAR_DIR`` or Debian's ``/usr/share/java``.
S3A (an ``s3://``/``s3a://`` lake read through Hadoop): ``hadoop-aws`` and the AWS SDK bundle it
was built against, from ``$LAKE_S3A_JAR_DIR`` or the jar cache (``$LAKE_JAR_CACHE``, default
``~/.cache/airflow-lake-provider/jars``, which ``scripts/bootstrap.sh`` fills in a source checkout);
none is added when the user gives ``hadoop-aws`` as a jar or a package (:data:`S3A_PACKAGES`).
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
# A matched pair: hadoop-aws 3.3.1 was built against this SDK bundle; it runs on pyspark 3.5's Hadoop 3.3.4.
S3A_JARS = ("hadoop-aws-3.3.1.jar", "aws-java-sdk-bundle-1.11.901.jar")
# Where those two files come from on Maven Central (in S3A_JARS' order).
S3A_JAR_COORDINATES = ("org.apache.hadoop:hadoop-aws:3.3.1", "com.amazonaws:aws-java-sdk-bundle:1.11.901")
# The pair for Spark to resolve itself (spark.jars.packages): the hadoop-aws of pyspark 3.5's Hadoop
# (hadoop-client 3.3.4) and the SDK bundle Hadoop 3.3.4 was built against.
S3A_PACKAGES = ("org.apache.hadoop:hadoop-aws:3.3.4", "com.amazonaws:aws-java-sdk-bundle:1.12.262")
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
        "No Iceberg Spark runtime jar found. Either install the extra that carries it "
        "(pip install 'airflow-lake-provider[iceberg-jar]'), or set LAKE_ICEBERG_RUNTIME_JAR to a jar path, or, "
        "when your Spark image already has the runtime, set the connection's iceberg_runtime_provided (or the "
        "operator's iceberg_runtime_provided=True); where Maven Central is reachable, spark_packages "
        f"['org.apache.iceberg:iceberg-spark-runtime-{SPARK_MINOR}_{SCALA_VERSION}:1.10.2'] works too."
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


def jar_cache_dir() -> Path:
    """``$LAKE_JAR_CACHE``: where the S3A jars are looked for (``scripts/bootstrap.sh`` caches them there)."""
    return Path(os.environ.get("LAKE_JAR_CACHE") or Path.home() / ".cache" / "airflow-lake-provider" / "jars")


def s3a_jars() -> list[str]:
    """Paths of ``hadoop-aws`` and its AWS SDK bundle, which Spark needs to read ``s3://``/``s3a://``."""
    override = os.environ.get("LAKE_S3A_JAR_DIR")
    directory = Path(override) if override else jar_cache_dir()
    missing = [name for name in S3A_JARS if not (directory / name).is_file()]
    if missing:
        where = f"LAKE_S3A_JAR_DIR ({directory})" if override else f"the jar cache {directory}"
        raise LakeConfigError(
            f"The lake is on S3, which Spark reads through Hadoop's S3A, but {', '.join(missing)} "
            f"{'is' if len(missing) == 1 else 'are'} missing from {where} (Spark would fail with "
            f"'No FileSystem for scheme \"s3\"'). Put {' and '.join(S3A_JARS)} there (from Maven Central: "
            f"{' and '.join(S3A_JAR_COORDINATES)})"
            f"{'' if override else ', or set LAKE_S3A_JAR_DIR to a directory holding them'}; or, where Maven "
            "Central is reachable, let Spark fetch the pair for pyspark 3.5's Hadoop 3.3.4: set the connection's "
            "spark_packages, or spark.jars.packages in the connection's or the operator's spark_conf, to "
            f"'{','.join(S3A_PACKAGES)}'."
        )
    return [str(directory / name) for name in S3A_JARS]


def resolve_jars(
    jdbc_dialect: str | None,
    *,
    extra_jars: list[str] | None = None,
    packages: list[str] | None = None,
    s3a: bool = False,
    iceberg_runtime_provided: bool = False,
) -> list[str]:
    """All jars for a job: the user's own, the Iceberg runtime (unless given as a package, or
    ``iceberg_runtime_provided`` by the cluster's image), the JDBC driver, and S3A's pair when
    ``s3a`` (unless the user gives hadoop-aws as a jar or a package)."""
    jars = list(extra_jars or [])
    for jar in jars:
        if "://" not in jar and not Path(jar).is_file():
            raise LakeConfigError(f"Jar {jar!r} does not exist.")
    user_gives_runtime = any("iceberg-spark-runtime" in item for item in [*jars, *(packages or [])])
    if not (user_gives_runtime or iceberg_runtime_provided):
        jars.append(iceberg_runtime_jar())
    if jdbc_dialect and not any(_JDBC_JARS[jdbc_dialect].split(".")[0].split("-")[0] in Path(j).name for j in jars):
        jars.append(jdbc_driver_jar(jdbc_dialect))
    if s3a and not any("hadoop-aws" in Path(item).name or ":hadoop-aws:" in item for item in [*jars, *(packages or [])]):
        jars.extend(s3a_jars())
    return jars
