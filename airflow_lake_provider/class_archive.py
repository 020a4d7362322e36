"""Faster job starts: a class-data sharing (AppCDS) archive of the classes a maintenance job loads.

Before a job does any work its driver JVM loads, parses and verifies tens of thousands of classes
of Spark, Scala and Iceberg, the same ones on every run: on small tables that is most of the job.
Java's class-data sharing maps them from an archive made once instead (measured on
the rewrite task on 200 small files 11.6 s without it, 7.9 s with it: docs/benchmarks.md).

``python -m airflow_lake_provider.class_archive build`` makes the archive for the Spark and the Java
that spark-submit uses here (``make bootstrap`` does): it runs a short warm-up application
(:mod:`airflow_lake_provider.jobs.warm_up`) on a throwaway lake with ``-XX:ArchiveClassesAtExit``.
Jobs whose driver runs in the Airflow task (local and client mode) then start with
``-XX:SharedArchiveFile``. The JVM checks an archive against its own build and class path and
ignores one that does not match, so a stale archive costs its speed-up and nothing else; each
Spark installation and Java gets its own file (a build removes those of installations that are
gone), and deleting it turns the feature off. A driver started elsewhere (cluster mode) never uses it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from airflow_lake_provider.exceptions import LakeConfigError
from airflow_lake_provider.jars import installed_spark_version, jar_cache_dir, resolve_classpath
from airflow_lake_provider.lake import EMBEDDED_CATALOG_NAME, embedded_catalog_config

WARM_UP = Path(__file__).resolve().parent / "jobs" / "warm_up.py"


def spark_home() -> Path | None:
    """The Spark installation ``spark-submit`` runs: ``$SPARK_HOME``, else the installed pyspark's."""
    if os.environ.get("SPARK_HOME"):
        return Path(os.environ["SPARK_HOME"])
    spec = importlib.util.find_spec("pyspark")
    return Path(spec.origin).parent if spec and spec.origin else None


def java_executable() -> Path | None:
    """The ``java`` Spark's launcher starts: ``$JAVA_HOME/bin/java``, else the first on ``PATH``."""
    if os.environ.get("JAVA_HOME"):
        candidate = Path(os.environ["JAVA_HOME"]) / "bin" / "java"
        return candidate.resolve() if candidate.exists() else None
    found = shutil.which("java")
    return Path(found).resolve() if found else None


def archive_path() -> Path | None:
    """Where the archive of this Spark installation and Java lives (whether it exists or not).

    Named by a digest of the Java binary (path and modification time) and the Spark jars (name, size and
    modification time, as the JVM checks them): another Java, another Spark or the same one installed again
    (a venv made anew at the same path) gets another file, never one the JVM would refuse."""
    home, java = spark_home(), java_executable()
    if home is None or java is None or not (home / "jars").is_dir():
        return None
    jars = [(path.name, path.stat()) for path in sorted((home / "jars").iterdir())]
    identity = [str(java), str(java.stat().st_mtime_ns), str(home.resolve()),
                *(f"{name} {stat.st_size} {stat.st_mtime_ns}" for name, stat in jars)]
    digest = hashlib.sha256("\n".join(identity).encode()).hexdigest()[:16]
    version = installed_spark_version() or "spark"
    return jar_cache_dir().parent / "class-archives" / f"spark-{version}-{digest}.jsa"


def archive_for_driver() -> Path | None:
    """The archive a driver started here should map, or None when none was built for this Spark and Java."""
    path = archive_path()
    return path if path is not None and path.is_file() else None


def driver_java_options(archive: Path) -> str:
    return f"-XX:SharedArchiveFile={archive}"


def build(*, force: bool = False) -> Path:
    """Record the archive with the warm-up application (about a minute); kept when it already exists."""
    target, home = archive_path(), spark_home()
    if target is None or home is None:
        raise LakeConfigError("No Spark installation (pyspark, or $SPARK_HOME) or no java was found, so there is no "
                              "class archive to build. Install pyspark and Java 17 (make bootstrap does).")
    if target.is_file() and not force:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="lake-class-archive-") as work:
        work_dir = Path(work)
        config = embedded_catalog_config(work_dir / "lake")
        session_conf = config.spark_catalog_conf()
        # A fresh SQLite catalog with no PyIceberg here to make its tables: Spark makes them.
        session_conf[f"spark.sql.catalog.{EMBEDDED_CATALOG_NAME}.jdbc.init-catalog-tables"] = "true"
        spec = work_dir / "spec.json"
        spec.write_text(json.dumps({"job": "warm-up", "catalog": EMBEDDED_CATALOG_NAME, "session_conf": session_conf,
                                    "app_name": "lake-class-archive"}))
        classpath = resolve_classpath("sqlite")
        recording = work_dir / "archive.jsa"
        # The spark-submit beside this interpreter (as the job hook puts it first on PATH), else PATH's.
        beside = Path(sys.executable).parent / "spark-submit"
        command = [str(beside) if beside.exists() else "spark-submit", "--master", "local[2]",
                   "--conf", "spark.ui.enabled=false", "--conf", "spark.ui.showConsoleProgress=false",
                   "--conf", "spark.driver.bindAddress=127.0.0.1", "--conf", "spark.driver.host=127.0.0.1",
                   "--conf", f"spark.sql.warehouse.dir={work_dir / 'spark-warehouse'}"]
        if classpath.jars:
            command += ["--jars", ",".join(classpath.jars)]
        if classpath.packages:
            command += ["--packages", ",".join(classpath.packages)]
        command += [str(WARM_UP), str(spec)]
        package_root = str(Path(__file__).resolve().parent.parent)
        env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1",
               "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
               "PYTHONPATH": os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")])),
               # The driver JVM only (spark-submit's own launcher JVM is not recorded).
               "SPARK_SUBMIT_OPTS": " ".join(filter(None, [f"-XX:ArchiveClassesAtExit={recording}", "-Xlog:cds=error",
                                                            os.environ.get("SPARK_SUBMIT_OPTS")]))}
        done = subprocess.run(command, env=env, cwd=work_dir, capture_output=True, text=True)
        if done.returncode != 0 or not recording.is_file():
            raise RuntimeError(f"The warm-up application failed (exit {done.returncode}), no class archive was "
                               f"written:\n{done.stderr[-3000:]}")
        shutil.move(str(recording), target.with_suffix(".tmp"))
        os.replace(target.with_suffix(".tmp"), target)
        target.with_suffix(".home").write_text(str(home.resolve()))
        _remove_orphaned_archives(target, home.resolve())
    return target


def _remove_orphaned_archives(current: Path, home: Path) -> None:
    """Delete, beside ``current`` (the archive just built for ``home``), the archives of Spark installations
    that are gone (a deleted checkout's venv) or were installed again since (``home`` again): each is ~190 MB."""
    for home_file in current.parent.glob("*.home"):
        if home_file == current.with_suffix(".home"):
            continue
        recorded = Path(home_file.read_text().strip())
        if recorded == home or not recorded.exists():
            home_file.with_suffix(".jsa").unlink(missing_ok=True)
            home_file.unlink(missing_ok=True)


if __name__ == "__main__":
    # python -m airflow_lake_provider.class_archive build [--force] | path
    command, *flags = sys.argv[1:] or ["path"]
    if command == "build":
        print(build(force="--force" in flags))
    elif command == "path":
        print(archive_for_driver() or "no class archive for this Spark and Java (build one: "
              "python -m airflow_lake_provider.class_archive build)")
    else:
        sys.exit(f"unknown command {command!r}: use 'build' or 'path'")
