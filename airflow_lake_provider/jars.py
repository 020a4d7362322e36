"""The JVM parts a Spark job needs, named by Maven coordinates, and where each one comes from.

Which coordinates: they follow the Spark line the job is submitted with (the installed
``pyspark``, or the connection's ``spark_version``): Iceberg's Spark runtime for that line and
its Scala version, the JDBC driver of a SQL catalog, ``hadoop-aws`` with the AWS SDK its Hadoop
was built against when Spark reads S3 through S3A, ``iceberg-aws-bundle`` when it uses
Iceberg's own ``S3FileIO`` (or signs REST requests with SigV4), ``iceberg-gcp-bundle`` when
it uses ``GCSFileIO`` and ``iceberg-azure-bundle`` when it uses ``ADLSFileIO``.

Where from, per coordinate, first match wins:
1. the user names it: a jar path (connection or operator ``spark_jars``) or a coordinate
   (``spark_packages``, ``spark.jars.packages``) of the same artifact; or the cluster's image has
   the Iceberg runtime (``iceberg_runtime_provided``);
2. the jar cache (``$LAKE_JAR_CACHE``, default ``~/.cache/airflow-lake-provider/jars``), which
   ``python -m airflow_lake_provider.jars fetch`` fills with the machine's Maven (``make
   bootstrap`` does it for the demo and the tests): shipped as a jar, nothing resolved per job;
3. otherwise Spark resolves it at submit time (``spark.jars.packages``) from Maven Central, or
   from the repositories ``spark.jars.repositories`` / ``spark.jars.ivySettings`` name.
JDBC drivers: ``$LAKE_JDBC_JAR_DIR`` or Debian's ``/usr/share/java`` first, then as above.
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from airflow_lake_provider.exceptions import LakeConfigError

ICEBERG_VERSION = "1.12.0"
ICEBERG_AWS_BUNDLE = f"org.apache.iceberg:iceberg-aws-bundle:{ICEBERG_VERSION}"
# Google's SDK for GCSFileIO (whose classes are in the Spark runtime). Maven Central serves no 1.12.0 of
# it (checked 2026-11-29); 1.11.0's SDK carries the 1.12 runtime's GCSFileIO (tests/test_rewrite_oracle.py).
ICEBERG_GCP_BUNDLE = "org.apache.iceberg:iceberg-gcp-bundle:1.11.0"
# Azure's SDK for ADLSFileIO (whose classes are in the Spark runtime). Maven Central serves at most 1.10.0 of
# it (checked 2026-11-29); its SDK carries the 1.12 runtime's ADLSFileIO (tests/test_rewrite_oracle.py).
ICEBERG_AZURE_BUNDLE = "org.apache.iceberg:iceberg-azure-bundle:1.10.0"


@dataclass(frozen=True)
class SparkLine:
    """One Spark minor line: its Scala version and the S3A pair of the Hadoop it ships."""

    minor: str
    scala: str
    # hadoop-aws of the Hadoop client inside this Spark, and the AWS SDK that Hadoop was built against.
    s3a: tuple[str, str]

    @property
    def iceberg_runtime(self) -> str:
        return f"org.apache.iceberg:iceberg-spark-runtime-{self.minor}_{self.scala}:{ICEBERG_VERSION}"


# Iceberg 1.12 ships Spark runtimes for 3.5, 4.0 and 4.1 (none for 4.2: the 4.1 runtime fails there).
SPARK_LINES = {
    "3.5": SparkLine("3.5", "2.12",
                     ("org.apache.hadoop:hadoop-aws:3.3.4", "com.amazonaws:aws-java-sdk-bundle:1.12.262")),
    "4.0": SparkLine("4.0", "2.13", ("org.apache.hadoop:hadoop-aws:3.4.1", "software.amazon.awssdk:bundle:2.24.6")),
    "4.1": SparkLine("4.1", "2.13", ("org.apache.hadoop:hadoop-aws:3.4.2", "software.amazon.awssdk:bundle:2.29.52")),
}
JDBC_DRIVERS = {"sqlite": "org.xerial:sqlite-jdbc:3.50.3.0", "postgresql": "org.postgresql:postgresql:42.7.8"}
_DEBIAN_JDBC = {"sqlite": ("sqlite-jdbc.jar", "libxerial-sqlite-jdbc-java"),
                "postgresql": ("postgresql.jar", "libpostgresql-jdbc-java")}


def installed_spark_version() -> str | None:
    """The version of the ``pyspark`` package whose ``spark-submit`` submits the jobs.

    Refused when ``pyspark-client`` (which the Spark provider 6 installs) is at another version:
    both packages write the same ``pyspark/`` directory, which then holds files of two Spark
    releases, and pip reports no conflict."""
    try:
        pyspark = importlib.metadata.version("pyspark")
    except importlib.metadata.PackageNotFoundError:
        return None
    try:
        client = importlib.metadata.version("pyspark-client")
    except importlib.metadata.PackageNotFoundError:
        return pyspark
    if client != pyspark:
        raise LakeConfigError(
            f"pyspark {pyspark} and pyspark-client {client} are both installed: they write the same pyspark/ "
            "directory, which now mixes two Spark releases. Install both at one version Iceberg has a runtime for, "
            "as tested: pip install 'pyspark==4.1.3' 'pyspark-client==4.1.3' (docs/compatibility.md).")
    return pyspark


def spark_line(spark_version: str | None = None) -> SparkLine:
    """The Spark line of ``spark_version`` (default: the installed pyspark), refused before any JVM
    when Iceberg has no runtime for it."""
    version = spark_version or installed_spark_version()
    if not version:
        raise LakeConfigError(
            "No pyspark is installed, so neither spark-submit nor the Spark version of the jobs is known. Install "
            "'apache-airflow-providers-apache-spark[pyspark]' (Spark 4.1: pip install 'pyspark==4.1.3'), or set the "
            "connection's spark_version (e.g. \"3.5\") when spark-submit comes from a Spark installation of your own.")
    minor = ".".join(str(version).split(".")[:2])
    if minor not in SPARK_LINES:
        raise LakeConfigError(
            f"Spark {version}: Iceberg {ICEBERG_VERSION} ships a Spark runtime for Spark {', '.join(SPARK_LINES)} "
            f"only, so the jobs cannot run on it. Submit with Spark 4.1 (pip install 'pyspark==4.1.3') or 3.5 "
            f"(pip install 'pyspark==3.5.9'), or set the connection's spark_version to the Spark your cluster runs.")
    return SPARK_LINES[minor]


def jar_cache_dir() -> Path:
    """``$LAKE_JAR_CACHE``: where jars fetched by coordinates are kept, one file per artifact."""
    return Path(os.environ.get("LAKE_JAR_CACHE") or Path.home() / ".cache" / "airflow-lake-provider" / "jars")


def jar_file_name(coordinate: str) -> str:
    """``group:artifact:version`` -> ``artifact-version.jar`` (Maven's own file name)."""
    _, artifact, version = coordinate.split(":")
    return f"{artifact}-{version}.jar"


def _artifact(item: str) -> str:
    """The artifact id a jar path or a coordinate names, without its version."""
    if item.count(":") >= 2 and "/" not in item:
        return item.split(":")[1]
    name = Path(item).name.removesuffix(".jar")
    parts = name.split("-")
    while parts and parts[-1][:1].isdigit():
        parts.pop()
    return "-".join(parts)


@dataclass
class SparkClasspath:
    """What a job adds to Spark's class path: jar paths (``spark.jars``) and coordinates Spark
    resolves itself (``spark.jars.packages``)."""

    jars: list[str] = field(default_factory=list)
    packages: list[str] = field(default_factory=list)

    def names(self, artifact: str) -> bool:
        return any(_artifact(item) == artifact for item in [*self.jars, *self.packages])

    def add(self, coordinate: str) -> None:
        """The coordinate's jar from the cache, else the coordinate for Spark to resolve; nothing when the
        user already names that artifact (their version wins)."""
        if self.names(_artifact(coordinate)):
            return
        cached = jar_cache_dir() / jar_file_name(coordinate)
        if cached.is_file():
            self.jars.append(str(cached))
        else:
            self.packages.append(coordinate)


def cached_jars(coordinates: tuple[str, ...] | list[str]) -> list[str]:
    """The cached jars of ``coordinates``, for a JVM that has no ``spark.jars.packages`` to fall back on."""
    paths = [jar_cache_dir() / jar_file_name(c) for c in coordinates]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise LakeConfigError(f"{', '.join(missing)} missing: fill the jar cache with "
                              "'python -m airflow_lake_provider.jars fetch' (make bootstrap does).")
    return [str(p) for p in paths]


def jdbc_driver_jar(dialect: str) -> str | None:
    """Debian's (or ``$LAKE_JDBC_JAR_DIR``'s) JDBC driver jar for ``sqlite``/``postgresql``, if there."""
    name, _ = _DEBIAN_JDBC[dialect]
    path = Path(os.environ.get("LAKE_JDBC_JAR_DIR", "/usr/share/java")) / name
    return str(path) if path.is_file() else None


def resolve_classpath(
    jdbc_dialect: str | None,
    *,
    extra_jars: list[str] | None = None,
    packages: list[str] | None = None,
    s3a: bool = False,
    aws_bundle: bool = False,
    gcp_bundle: bool = False,
    azure_bundle: bool = False,
    iceberg_runtime_provided: bool = False,
    spark_version: str | None = None,
) -> SparkClasspath:
    """Everything a job of this catalog needs on Spark's class path (see the module's docstring)."""
    classpath = SparkClasspath(jars=list(extra_jars or []), packages=list(packages or []))
    for jar in classpath.jars:
        if "://" not in jar and not Path(jar).is_file():
            raise LakeConfigError(f"Jar {jar!r} does not exist.")
    line = spark_line(spark_version)
    if not iceberg_runtime_provided and not any(
            _artifact(item).startswith("iceberg-spark-runtime") for item in [*classpath.jars, *classpath.packages]):
        classpath.add(line.iceberg_runtime)
    if jdbc_dialect and not classpath.names(_artifact(JDBC_DRIVERS[jdbc_dialect])):
        debian = jdbc_driver_jar(jdbc_dialect)
        if debian and not any(Path(jar).name == Path(debian).name for jar in classpath.jars):
            classpath.jars.append(debian)
        elif not debian:
            classpath.add(JDBC_DRIVERS[jdbc_dialect])
    if s3a:
        for coordinate in line.s3a:
            classpath.add(coordinate)
    if aws_bundle:
        classpath.add(ICEBERG_AWS_BUNDLE)
    if gcp_bundle:
        classpath.add(ICEBERG_GCP_BUNDLE)
    if azure_bundle:
        classpath.add(ICEBERG_AZURE_BUNDLE)
    return classpath


def coordinates(spark_version: str | None = None) -> list[str]:
    """Every coordinate a job of the ``spark_version`` line may need: what ``fetch`` caches."""
    line = spark_line(spark_version)
    return [line.iceberg_runtime, *line.s3a, ICEBERG_AWS_BUNDLE, ICEBERG_GCP_BUNDLE, ICEBERG_AZURE_BUNDLE]


def fetch(spark_version: str | None = None, *, directory: Path | None = None) -> list[Path]:
    """Copy the jars of :func:`coordinates` into the cache with the machine's Maven (``mvn``), each
    once: a jar already there is not fetched again."""
    target = directory or jar_cache_dir()
    target.mkdir(parents=True, exist_ok=True)
    missing = [c for c in coordinates(spark_version) if not (target / jar_file_name(c)).is_file()]
    if missing:
        mvn = shutil.which("mvn")
        if not mvn:
            raise LakeConfigError(
                f"Maven (mvn) is not installed, so {', '.join(missing)} cannot be fetched into {target}. Install "
                "Maven (Debian: apt-get install maven), or copy those jars there yourself, or leave them out: "
                "Spark then resolves them at submit time (spark.jars.packages).")
        for coordinate in missing:
            subprocess.run([mvn, "-q", "-B", "-Dstyle.color=never", "dependency:copy", f"-Dartifact={coordinate}",
                            f"-DoutputDirectory={target}", "-Dmdep.overWriteReleases=false"], check=True)
    return [target / jar_file_name(c) for c in coordinates(spark_version)]


if __name__ == "__main__":
    # python -m airflow_lake_provider.jars fetch [SPARK_VERSION] | coordinates [SPARK_VERSION]
    command, *rest = sys.argv[1:] or ["coordinates"]
    version = rest[0] if rest else None
    if command == "fetch":
        for path in fetch(version):
            print(path)
    elif command == "coordinates":
        print("\n".join(coordinates(version)))
    else:
        sys.exit(f"unknown command {command!r}: use 'fetch' or 'coordinates'")
