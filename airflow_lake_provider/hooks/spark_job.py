"""Runs this provider's PySpark applications through the apache-spark provider's SparkSubmitHook.

What it adds on top of ``SparkSubmitHook``:

* a JSON job spec in, a JSON result out (SparkSubmitHook only reports an exit code);
* the catalog's Spark configuration passed in the spec file (mode 0600, in a private
  directory), never as ``--conf`` arguments, so secrets stay out of the process list;
* the jars found for the catalog, the jobs package shipped as ``--py-files``;
* ``local[*]`` when the Spark connection does not exist (SparkSubmitHook would pick yarn);
* the application's own error (an Iceberg exception) raised as :class:`LakeJobError`;
* ``on_kill`` that kills the whole spark-submit process group (JVM and Python driver).

Results in cluster deploy mode: the driver runs on the cluster, so give ``result_location``
a directory both sides reach (``hdfs://...``, ``s3a://...``); the job writes its result there
through Hadoop's FileSystem API and this hook reads it with PyIceberg's FileIO.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import tempfile
import uuid
import zipfile
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowException, AirflowNotFoundException

import airflow_lake_provider
from airflow_lake_provider.catalog_config import is_secret_key
from airflow_lake_provider.exceptions import LakeConfigError, LakeJobError
from airflow_lake_provider.hooks.lake import IcebergLakeHook
from airflow_lake_provider.jobs import JOB_NAMES

PACKAGE_DIR = Path(airflow_lake_provider.__file__).parent
JOB_APPLICATION = PACKAGE_DIR / "jobs" / "main.py"
DEFAULT_LOCAL_MASTER = "local[*]"
# Spark's start-up chatter at INFO buries the job's own lines in the task log.
_LOG4J2_PROPERTIES = """\
rootLogger.level = warn
rootLogger.appenderRef.stdout.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex
logger.iceberg.name = org.apache.iceberg
logger.iceberg.level = warn
"""


class _SparkSubmitHook(SparkSubmitHook):
    """SparkSubmitHook that falls back to ``local[*]`` rather than yarn when its connection is missing."""

    def __init__(self, *, fallback_master: str | None, **kwargs: Any) -> None:
        self._fallback_master = fallback_master
        super().__init__(**kwargs)

    def _resolve_connection(self) -> dict[str, Any]:
        data = super()._resolve_connection()
        if self._fallback_master:
            data["master"] = self._fallback_master
        return data


#: Pure modules the jobs import besides ``jobs/`` (no Airflow import in any of them).
JOB_MODULES = ("__init__.py", "exceptions.py", "planning.py")


def _jobs_archive(directory: Path) -> str:
    """Zip the import-light part of the package (``JOB_MODULES`` and ``jobs/``) for ``--py-files``."""
    archive = directory / "airflow_lake_provider_jobs.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        for name in JOB_MODULES:
            zf.write(PACKAGE_DIR / name, f"airflow_lake_provider/{name}")
        for source in sorted((PACKAGE_DIR / "jobs").glob("*.py")):
            zf.write(source, f"airflow_lake_provider/jobs/{source.name}")
    return str(archive)


class LakeSparkJobHook(BaseHook):
    """Submits one of this provider's PySpark jobs and returns its JSON result.

    :param lake_hook: the catalog the job works on.
    :param spark_conn_id: the apache-spark provider's connection (master, deploy mode, queue...).
        When it does not exist the job runs on ``local[*]``.
    :param spark_conf: extra Spark configuration; keys that look secret go into the spec file.
    :param jars: extra jar paths (added to those the catalog needs).
    :param packages: Maven coordinates for ``--packages`` (only where Maven is reachable).
    :param result_location: where the job writes its result. Default: a private local
        directory (client mode). Required in cluster deploy mode: a shared directory URI.
    """

    def __init__(
        self,
        *,
        lake_hook: IcebergLakeHook,
        spark_conn_id: str = "spark_default",
        spark_conf: dict[str, Any] | None = None,
        jars: list[str] | None = None,
        packages: list[str] | None = None,
        driver_memory: str | None = None,
        executor_memory: str | None = None,
        executor_cores: int | None = None,
        num_executors: int | None = None,
        deploy_mode: str | None = None,
        result_location: str | None = None,
        env_vars: dict[str, str] | None = None,
        verbose: bool = False,
    ) -> None:
        super().__init__()
        self.lake_hook = lake_hook
        self.spark_conn_id = spark_conn_id
        self.spark_conf = dict(spark_conf or {})
        self.jars = list(jars or [])
        self.packages = list(packages or [])
        self.driver_memory = driver_memory
        self.executor_memory = executor_memory
        self.executor_cores = executor_cores
        self.num_executors = num_executors
        self.deploy_mode = deploy_mode
        self.result_location = result_location
        self.env_vars = dict(env_vars or {})
        self.verbose = verbose
        self._submit_hook: _SparkSubmitHook | None = None
        self._killed = False
        self.application_id: str | None = None  # of the last job that finished

    @property
    def history_server_url(self) -> str | None:
        """The Spark connection's ``history_server_url`` extra, where finished applications are browsed."""
        conn = self._spark_connection()
        url = str(conn.extra_dejson.get("history_server_url") or "").strip() if conn is not None else ""
        return url.rstrip("/") or None

    def application_url(self) -> str | None:
        """The last finished application's page in the history server, when both are known."""
        base = self.history_server_url
        return f"{base}/history/{self.application_id}/jobs/" if base and self.application_id else None

    # -- what gets submitted ----------------------------------------------------------------
    def _spark_connection(self):
        """The apache-spark connection, or ``None`` when it does not exist (then: ``local[*]``)."""
        try:
            return self.get_connection(self.spark_conn_id)
        except AirflowNotFoundException:
            return None

    def _launch_conf(self, is_local: bool, work_dir: Path) -> tuple[dict[str, str], dict[str, str]]:
        """Split the configuration into what goes on the command line and what goes in the spec."""
        launch: dict[str, str] = {"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false", "spark.sql.warehouse.dir": str(work_dir / "spark-warehouse")}
        if is_local:
            launch.update({"spark.driver.bindAddress": "127.0.0.1", "spark.driver.host": "127.0.0.1"})
            log_config = work_dir / "log4j2.properties"
            log_config.write_text(_LOG4J2_PROPERTIES)
            launch["spark.driver.extraJavaOptions"] = f"-Dlog4j.configurationFile=file:{log_config}"
        session = dict(self.lake_hook.spark_catalog_conf())
        for key, value in self.spark_conf.items():
            (session if is_secret_key(key) else launch)[key] = str(value)
        # Catalog settings that are not secret but must exist when the SparkContext starts.
        launch["spark.sql.extensions"] = session.pop("spark.sql.extensions")
        return launch, session

    def build_spec(self, job: str, args: dict[str, Any], result_location: str, session_conf: dict[str, str]) -> dict[str, Any]:
        return {
            "job": job,
            "catalog": self.lake_hook.config.name,
            "args": args,
            "result_location": result_location,
            "session_conf": session_conf,
            "app_name": f"lake-{job}",
        }

    # -- running ----------------------------------------------------------------------------
    def run_job(self, job: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
        """Submit ``job`` with ``args``, wait, and return the job's result document.

        Raises :class:`LakeJobError` with the application's own error message on failure.
        """
        if job not in JOB_NAMES:
            raise LakeConfigError(f"Unknown job {job!r}; known jobs: {', '.join(JOB_NAMES)}.")
        args = args or {}
        # Opening the catalog here checks it answers before a JVM starts, and on SQLite creates
        # the catalog tables Spark expects to find (it is told not to create them itself).
        self.lake_hook.catalog
        json.dumps(args)  # fail here, not in the driver, if the args cannot travel as JSON
        catalog_name = self.lake_hook.config.name
        jars = self.lake_hook.spark_jars(self.jars)
        packages = [*self.lake_hook.spark_packages(), *self.packages]

        work_dir = Path(tempfile.mkdtemp(prefix="lake-job-"))  # mode 0700
        try:
            spark_conn_exists = self._spark_connection() is not None
            fallback = None if spark_conn_exists else DEFAULT_LOCAL_MASTER
            self._submit_hook = None
            cluster_mode = self.deploy_mode == "cluster"
            if cluster_mode and not self.result_location:
                raise LakeConfigError(
                    "deploy_mode='cluster' runs the driver elsewhere: set result_location to a directory "
                    "URI both Airflow and the cluster reach (hdfs://..., s3a://...)."
                )
            result_location = (
                f"{self.result_location.rstrip('/')}/{job}-{uuid.uuid4().hex}.json"
                if self.result_location
                else str(work_dir / "result.json")
            )
            probe = _SparkSubmitHook(fallback_master=fallback, conn_id=self.spark_conn_id)
            master = probe._connection["master"]
            is_local = master.startswith("local")
            launch_conf, session_conf = self._launch_conf(is_local, work_dir)
            spec_path = work_dir / "spec.json"
            with open(os.open(spec_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as handle:
                json.dump(self.build_spec(job, args, result_location, session_conf), handle)
            env = {
                "SPARK_LOCAL_IP": "127.0.0.1" if is_local else os.environ.get("SPARK_LOCAL_IP", ""),
                "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable),
                "PYSPARK_DRIVER_PYTHON": os.environ.get("PYSPARK_DRIVER_PYTHON", sys.executable),
                # spark-submit from the same environment as this interpreter comes first.
                "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
                **self.env_vars,
            }
            env = {k: v for k, v in env.items() if v}
            self._submit_hook = _SparkSubmitHook(
                fallback_master=fallback,
                conn_id=self.spark_conn_id,
                conf=launch_conf,
                jars=",".join(jars),
                packages=",".join(packages) or None,
                py_files=_jobs_archive(work_dir),
                files=str(spec_path) if cluster_mode else None,
                driver_memory=self.driver_memory,
                executor_memory=self.executor_memory,
                executor_cores=self.executor_cores,
                num_executors=self.num_executors,
                deploy_mode=self.deploy_mode,
                name=f"lake-{job}-{catalog_name}",
                application_args=[spec_path.name if cluster_mode else str(spec_path)],
                env_vars=None if cluster_mode else env,
                verbose=self.verbose,
            )
            self.log.info("Submitting job %r to %s (catalog %r).", job, master, catalog_name)
            submit_error: AirflowException | None = None
            try:
                self._submit_hook.submit(str(JOB_APPLICATION), start_new_session=True)
            except AirflowException as error:
                submit_error = error
            document = self._read_result(result_location)
            return self._outcome(job, document, submit_error)
        finally:
            shutil.rmtree(work_dir, ignore_errors=True)

    def _outcome(self, job: str, document: dict[str, Any] | None, submit_error: Exception | None) -> dict[str, Any]:
        if self._killed:
            raise LakeJobError(f"Job {job!r} was killed.", job=job)
        if document and document.get("status") == "failed":
            message = f"Spark job {job!r} failed: {document.get('error_class')}: {document.get('message')}"
            self.log.error("%s", message)
            raise LakeJobError(message, error_class=document.get("error_class"), job=job)
        if submit_error is not None or not document:
            detail = f" ({submit_error})" if submit_error else ""
            raise LakeJobError(
                f"Spark job {job!r} ended without a result{detail}. The Spark log above says why "
                "(a JVM that could not start, a lost driver, or a kill).",
                job=job,
            )
        self.application_id = document.get("application_id")
        return document["result"]

    def _read_result(self, location: str) -> dict[str, Any] | None:
        try:
            if urlsplit(location).scheme in ("", "file"):
                path = urlsplit(location).path if location.startswith("file:") else location
                if not os.path.exists(path):
                    return None
                with open(path, encoding="utf-8") as handle:
                    return json.load(handle)
            from pyiceberg.io import load_file_io

            io = load_file_io(self.lake_hook.config.pyiceberg_catalog_properties(), location)
            input_file = io.new_input(location)
            if not input_file.exists():
                return None
            with input_file.open() as stream:
                document = json.loads(stream.read())
            io.delete(location)
            return document
        except (OSError, ValueError) as error:
            self.log.warning("Could not read the job result at %s: %s", location, error)
            return None

    def on_kill(self) -> None:
        """Kill spark-submit with its whole process group (the JVM and the Python driver)."""
        self._killed = True
        hook = self._submit_hook
        if hook is None:
            return
        process = getattr(hook, "_submit_sp", None)  # SparkSubmitHook keeps its Popen there
        if process is not None and process.poll() is None:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        hook.on_kill()  # cluster side: yarn / k8s / standalone driver kill
