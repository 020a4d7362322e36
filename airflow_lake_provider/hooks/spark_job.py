"""Runs this provider's PySpark applications through the apache-spark provider's SparkSubmitHook.

What it adds on top of ``SparkSubmitHook``:

* a JSON job spec in, a JSON result out (SparkSubmitHook only reports an exit code);
* the catalog's Spark configuration and every secret-looking key passed in the spec file
  (mode 0600, in a private directory), never as ``--conf`` arguments, so secrets stay out of the
  process list; the other, launch-time settings (``spark.executor.memory``, ``spark.cores.max``,
  ``spark.pyspark.python``...) of the lake connection's ``spark_conf`` and of ``spark_conf`` go
  on the command line, where the cluster manager reads them;
* the jars found for the catalog (the Iceberg runtime unless the cluster's image provides it),
  the jobs package shipped as ``--py-files``;
* ``local[*]`` when the Spark connection does not exist (SparkSubmitHook would pick yarn): a
  connection built in memory, handed over through ``get_connection``;
* the deploy mode of the operator, else of the Spark connection's ``deploy-mode`` extra, with a
  refusal before spark-submit where Spark has no cluster mode (local masters; Python
  applications on standalone ``spark://`` masters);
* quiet task logs: Spark's start-up INFO lines are cut from the JVM running in the task (the
  driver in client mode, the submitting client in cluster mode), and in cluster mode the
  driver's log configuration is shipped with ``--files``;
* the application's own error (an Iceberg exception) raised as :class:`LakeJobError`;
* ``on_kill`` that kills the whole spark-submit process group (JVM and Python driver).

Which Python runs where: on a ``local`` master the task's own interpreter runs the driver and
the executors (``PYSPARK_PYTHON``/``PYSPARK_DRIVER_PYTHON`` of the environment when set).
On a cluster nothing of the Airflow worker's Python or ``PATH`` is sent along: the executors run
``spark.pyspark.python`` when set (``spark_conf``), else the ``PYSPARK_PYTHON`` of the environment
spark-submit runs in, else ``python3`` on the cluster's hosts (Spark's own order). In client mode
the driver still runs in the task with the task's interpreter.

Results in cluster deploy mode: the driver runs on the cluster, so give ``result_location``
a directory both sides reach (``hdfs://...``, ``s3a://...``); the job writes its result there
through Hadoop's FileSystem API and this hook reads it with PyIceberg's FileIO.

SparkSubmitHook is used through its constructor, ``submit`` and ``on_kill``; the three private
attributes still read (``_connection["master"]``, ``_build_spark_submit_command``,
``_submit_sp``) and why are listed in docs/spark-jobs.md ("What this hook relies on").
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import signal
import sys
import tempfile
import uuid
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
from airflow.sdk import BaseHook, Connection
from airflow.sdk.exceptions import AirflowException, AirflowNotFoundException

import airflow_lake_provider
from airflow_lake_provider import class_archive
from airflow_lake_provider.catalog_config import is_secret_key
from airflow_lake_provider.core.contracts import BatchJobArgs, Contract
from airflow_lake_provider.core.job_registry import Job, LaunchHints, check_batch, job_for
from airflow_lake_provider.core.spark_settings import SparkSettings
from airflow_lake_provider.exceptions import LakeConfigError, LakeJobError
from airflow_lake_provider.hooks.lake import IcebergLakeHook
from airflow_lake_provider.jars import jar_cache_dir

PACKAGE_DIR = Path(airflow_lake_provider.__file__).parent
JOB_APPLICATION = PACKAGE_DIR / "jobs" / "main.py"
DEFAULT_LOCAL_MASTER = "local[*]"
DEPLOY_MODES = ("client", "cluster")
LOG_CONFIG_NAME = "log4j2.properties"
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
# S3A warns once per object written and about its missing metrics file: noise, not news.
logger.s3a_streams.name = org.apache.hadoop.fs.s3a.S3AInstrumentation
logger.s3a_streams.level = error
logger.hadoop_metrics.name = org.apache.hadoop.metrics2.impl.MetricsConfig
logger.hadoop_metrics.level = error
"""
# The submitting client in cluster mode: SparkSubmitHook reads the YARN application id, the
# Kubernetes driver pod and the standalone driver id from these INFO lines (to track and kill).
_LOG4J2_SUBMITTER = _LOG4J2_PROPERTIES + """\
logger.deploy.name = org.apache.spark.deploy
logger.deploy.level = info
"""
# Settings spark-submit takes from its own flags when both are given (SparkSubmitArguments:
# ``Option(jars).orElse(sparkProperties.get("spark.jars"))``): a conf value would be dropped
# silently, so it is merged into the flag instead.
_FLAG_CONF = {"spark.jars": "jars", "spark.jars.packages": "packages", "spark.files": "files",
              "spark.submit.pyFiles": "py_files"}
# Set through the deploy mode and the Spark connection, never through spark_conf.
_REFUSED_CONF = {"spark.master": "the Spark connection's host",
                 "spark.submit.deployMode": "deploy_mode or the Spark connection's deploy-mode extra"}


class _SparkSubmitHook(SparkSubmitHook):
    """SparkSubmitHook on the Spark connection this provider resolved (a real one, or ``local[*]``).

    SparkSubmitHook reads its connection through ``get_connection`` (BaseHook's public lookup)
    and falls back to ``yarn`` when the connection does not exist. This provider falls back to
    ``local[*]`` instead: it hands over a connection built in memory (:func:`local_connection`),
    so no environment variable or secrets backend is touched and SparkSubmitHook reads the master,
    deploy mode and extras the way it always does.
    """

    def __init__(self, *, connection: Connection, **kwargs: Any) -> None:
        self.spark_connection = connection  # set first: SparkSubmitHook.__init__ reads it
        super().__init__(conn_id=connection.conn_id, **kwargs)

    def get_connection(self, conn_id: str) -> Connection:  # type: ignore[override]
        if conn_id == self.spark_connection.conn_id:
            return self.spark_connection
        return super().get_connection(conn_id)

    @property
    def master(self) -> str:
        """The master URL as SparkSubmitHook resolved it (host, port and scheme of the connection).

        Read from its private ``_connection``: SparkSubmitHook has no public accessor, and
        re-parsing the connection here would drift from its rules.
        """
        return self._connection["master"]


def local_connection(conn_id: str) -> Connection:
    """The Spark connection used when ``conn_id`` does not exist: ``local[*]``, nothing else set."""
    return Connection(conn_id=conn_id, conn_type="spark", host=DEFAULT_LOCAL_MASTER)


@dataclass(frozen=True)
class SparkTarget:
    """Where a job runs: the master URL and the deploy mode (``client`` or ``cluster``)."""

    master: str
    deploy_mode: str

    @property
    def is_local(self) -> bool:
        return self.master.startswith("local")

    @property
    def is_yarn(self) -> bool:
        return "yarn" in self.master  # SparkSubmitHook's own test

    @property
    def is_kubernetes(self) -> bool:
        return "k8s" in self.master  # SparkSubmitHook's own test

    @property
    def driver_in_task(self) -> bool:
        """Client mode: the driver runs in the Airflow task, next to spark-submit."""
        return self.deploy_mode == "client"


@dataclass(frozen=True)
class EnvPlacement:
    """Where the user's ``env_vars`` go, and the whole environment added to spark-submit's process."""

    conf: dict[str, str]  # extra --conf settings (YARN's application master environment)
    submit_hook_env_vars: dict[str, str] | None  # what SparkSubmitHook itself places (Kubernetes driver)
    process_env: dict[str, str]  # on top of the worker's environment, for the spark-submit process


def place_env_vars(target: SparkTarget, env_vars: Mapping[str, Any], process_env: dict[str, str]) -> EnvPlacement:
    """Place ``env_vars`` as SparkSubmitHook does, with this hook's ``process_env`` kept on this machine.

    SparkSubmitHook sends ``env_vars`` to the YARN application master and to spark-submit's
    process, to the Kubernetes driver, and refuses them in cluster mode on other masters; else
    they go to spark-submit's process. But where they reach spark-submit's process it makes them
    the only additions to the worker's environment (its private ``_env``), with no public way to
    add this hook's own (``PATH``, the log configuration, the driver's Python). So the
    spark-submit environment is always passed here, through ``submit(env=...)``, and
    SparkSubmitHook only gets ``env_vars`` where it never touches that environment; on YARN the
    ``spark.yarn.appMasterEnv.*`` settings it would write are written here, in the same place on
    the command line.
    """
    env = {str(k): str(v) for k, v in (env_vars or {}).items()}
    if target.is_yarn:
        return EnvPlacement({f"spark.yarn.appMasterEnv.{k}": v for k, v in env.items()}, None, {**process_env, **env})
    if target.is_kubernetes or not target.driver_in_task:
        return EnvPlacement({}, env or None, dict(process_env))
    return EnvPlacement({}, None, {**process_env, **env})


@dataclass
class Submission:
    """One prepared spark-submit: the hook that runs it and where the result will appear."""

    job: str
    target: SparkTarget
    hook: _SparkSubmitHook
    result_location: str
    spec_path: Path
    env: dict[str, str]

    def command(self) -> list[str]:
        """The spark-submit command line, as SparkSubmitHook builds it (secrets never in it).

        Its private ``_build_spark_submit_command``: the only way to see the command without
        running it (used to inspect and test what is submitted; :meth:`run` goes through ``submit``).
        """
        return self.hook._build_spark_submit_command(str(JOB_APPLICATION))

    def environment(self) -> dict[str, str]:
        """Environment variables set for the spark-submit process (on top of the worker's own)."""
        return dict(self.env)

    def run(self) -> None:
        """Run spark-submit in a session of its own (so a kill reaches its whole process group),
        and bound to the task process's life (:func:`dies_with_task`)."""
        self.hook.submit(str(JOB_APPLICATION), start_new_session=True, env={**os.environ, **self.env},
                         preexec_fn=dies_with_task())


def dies_with_task():
    """A ``preexec_fn`` that makes spark-submit receive SIGKILL when the task process dies (Linux).

    A task process that is killed outright (the OOM killer, a worker's SIGKILL) cannot run
    ``on_kill``; its spark-submit would live on, and in client mode its driver could commit
    after Airflow has started the retry, two runs of one step at once. With the parent-death
    signal the JVM goes with the task, and the PySpark driver loses its gateway with it. Linux
    only (``prctl(PR_SET_PDEATHSIG)``); elsewhere ``None``, and the old behaviour. The signal
    follows the thread that started the process, which is the thread that waits for it.
    """
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl  # resolved before the fork
    except (OSError, AttributeError):
        return None
    task_pid = os.getpid()

    def bind_to_task() -> None:
        prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
        if os.getppid() != task_pid:  # the task died between the fork and the prctl
            os._exit(1)

    return bind_to_task


#: Pure modules the jobs import besides ``jobs/`` (no Airflow import in any of them).
def shipped_modules() -> list[Path]:
    """The package's files the jobs import, found by following their imports from ``jobs/``.

    Derived, not listed: a job that starts importing another module of the package ships it
    without a change here. Airflow-facing modules are never reached (the layering test checks
    that ``jobs/`` and ``core/`` import no Airflow), so the archive stays import-light.
    """
    todo = sorted((PACKAGE_DIR / "jobs").glob("*.py"))
    found: set[Path] = set()
    while todo:
        path = todo.pop()
        if path in found:
            continue
        found.add(path)
        for package in path.relative_to(PACKAGE_DIR).parents:  # every package on the way needs its __init__
            todo.append(PACKAGE_DIR / package / "__init__.py")
        for name in _package_imports(path):
            parts = name.split(".")[1:]
            module = PACKAGE_DIR.joinpath(*parts).with_suffix(".py")
            package = PACKAGE_DIR.joinpath(*parts, "__init__.py")
            todo += [candidate for candidate in (module, package) if candidate.is_file()]
    return sorted(found)


def imported_names(path: Path, *, with_imported: bool = False) -> set[str]:
    """The modules the Python file ``path`` imports, at the top or inside functions (relative imports aside).

    ``with_imported`` adds ``module.name`` for each ``from module import name``: the name may be a
    submodule (``from airflow_lake_provider.jobs import iceberg``). Shared with the layering test.
    """
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            if with_imported:
                names |= {f"{node.module}.{alias.name}" for alias in node.names}
    return names


def _package_imports(path: Path) -> set[str]:
    """Names of this package's modules (and of what is imported from them) that ``path`` imports."""
    return {name for name in imported_names(path, with_imported=True) if name.split(".")[0] == PACKAGE_DIR.name}


def _jobs_archive(directory: Path) -> str:
    """Zip :func:`shipped_modules` for ``--py-files``."""
    archive = directory / "airflow_lake_provider_jobs.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        for source in shipped_modules():
            zf.write(source, f"{PACKAGE_DIR.name}/{source.relative_to(PACKAGE_DIR)}")
    return str(archive)


def _joined(*parts: str | Sequence[str] | None) -> str | None:
    """Comma-separated list for a spark-submit flag, without empties or repeats."""
    items: list[str] = []
    for part in parts:
        for item in ([part] if isinstance(part, str) else part or []):
            items += [piece.strip() for piece in str(item).split(",") if piece.strip()]
    return ",".join(dict.fromkeys(items)) or None


def _write_private(path: Path, text: str) -> Path:
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w", encoding="utf-8") as handle:
        handle.write(text)
    return path


class LakeSparkJobHook(BaseHook):
    """Submits one of this provider's PySpark jobs by its contract and returns the job's result contract.

    :param lake_hook: the catalog the job works on.
    :param settings: how the application is launched (:class:`SparkSettings`: the Spark
        connection, ``spark_conf``, memory, deploy mode, result location...).
    """

    def __init__(self, *, lake_hook: IcebergLakeHook, settings: SparkSettings | None = None) -> None:
        super().__init__()
        self.lake_hook = lake_hook
        self.settings = settings or SparkSettings()
        self._submit_hook: _SparkSubmitHook | None = None
        self._killed = False
        self.application_id: str | None = None  # of the last job that finished
        self.lineage_parent: dict[str, str] = {}  # the spark.openlineage.parent* settings its driver saw

    @property
    def history_server_url(self) -> str | None:
        """The Spark connection's ``history_server_url`` extra, where finished applications are browsed."""
        url = str(self.spark_connection.extra_dejson.get("history_server_url") or "").strip()
        return url.rstrip("/") or None

    def application_url(self) -> str | None:
        """The last finished application's page in the history server, when both are known."""
        base = self.history_server_url
        return f"{base}/history/{self.application_id}/jobs/" if base and self.application_id else None

    def log_where_it_ran(self, log: Any, what: str) -> None:
        """Say where the last job ran: its application (or the driver alone), OpenLineage parent, history page."""
        if self.application_id:
            log.info("Spark application %s ran the %s.", self.application_id, what)
        else:
            log.info("The %s ran in the Spark driver through Iceberg's Java API, with no Spark application started.",
                     what)
        parent = self.lineage_parent
        if parent:
            log.info("Its OpenLineage parent: job %s/%s, run %s.", parent.get("spark.openlineage.parentJobNamespace"),
                     parent.get("spark.openlineage.parentJobName"), parent.get("spark.openlineage.parentRunId"))
        if self.application_url():
            log.info("Spark history server: %s", self.application_url())

    # -- where it runs ----------------------------------------------------------------------
    @cached_property
    def spark_connection(self) -> Connection:
        """The apache-spark connection; when it does not exist, :func:`local_connection` (``local[*]``).

        Looked up once per hook: the target, the submission and the history link all read it, and
        a lookup may go to a secrets backend or the metadata database.
        """
        try:
            return self.get_connection(self.settings.spark_conn_id)
        except AirflowNotFoundException:
            return local_connection(self.settings.spark_conn_id)

    def resolve_target(self) -> SparkTarget:
        """The master and deploy mode, refused here when Spark could not run the job that way."""
        conn = self.spark_connection
        master = self._master(conn)
        mode, source = (self.settings.deploy_mode, "deploy_mode") if self.settings.deploy_mode else (
            conn.extra_dejson.get("deploy-mode"),
            f"the deploy-mode extra of Spark connection {self.settings.spark_conn_id!r}",
        )
        mode = str(mode).strip().lower() if mode else "client"
        if mode not in DEPLOY_MODES:
            raise LakeConfigError(f"Deploy mode {mode!r} (from {source}) must be 'client' or 'cluster'.")
        target = SparkTarget(master=master, deploy_mode=mode)
        if mode == "cluster":
            self._check_cluster_mode(target)
        return target

    def _master(self, conn: Connection) -> str:
        """The master URL as the apache-spark provider reads its connection (host, port, scheme)."""
        try:
            return _SparkSubmitHook(connection=conn).master
        except (RuntimeError, NameError) as error:
            # Without the cncf provider, SparkSubmitHook 5.x fails on k8s:// masters with
            # "NameError: name 'kube_client' is not defined" (its import guard leaves it unset).
            if "kube" not in str(error):
                raise
            raise LakeConfigError(
                f"Spark connection {self.settings.spark_conn_id!r} names a Kubernetes master, which the apache-spark "
                "provider submits to only with the Kubernetes provider installed: pip install "
                "apache-airflow-providers-cncf-kubernetes."
            ) from None

    def _check_cluster_mode(self, target: SparkTarget) -> None:
        if target.is_local:
            raise LakeConfigError(
                f"Spark master {target.master!r} has no cluster deploy mode: a local master runs the driver in "
                "the task. Use deploy_mode='client', or a YARN or Kubernetes master for cluster mode."
            )
        if target.master.startswith("spark://"):
            raise LakeConfigError(
                f"Spark standalone masters ({target.master}) cannot run Python applications in cluster deploy "
                "mode (Spark: 'Cluster deploy mode is currently not supported for python applications on "
                "standalone clusters'). Use deploy_mode='client' (the driver runs in the Airflow task, the "
                "executors on the cluster), or a YARN or Kubernetes master."
            )
        if not self.settings.result_location:
            raise LakeConfigError(
                "deploy_mode='cluster' runs the driver elsewhere: set result_location to a directory "
                "URI both Airflow and the cluster reach (hdfs://..., s3a://...)."
            )

    # -- what gets submitted ----------------------------------------------------------------
    def _split_conf(self, target: SparkTarget, work_dir: Path) -> tuple[dict[str, str], dict[str, str]]:
        """Split the configuration into what goes on the command line and what goes in the spec.

        On the command line: our defaults, then the non-secret keys of the lake connection's
        ``spark_conf``, then those of this hook's ``spark_conf`` (the operator's wins). In the
        spec: the catalog's configuration and every secret-looking key.
        """
        launch = self._launch_defaults(target, work_dir)
        session = dict(self.lake_hook.spark_catalog_conf())
        for key, value in [*self.lake_hook.config.spark_conf.items(), *self.settings.spark_conf.items()]:
            key = str(key)
            if key in _REFUSED_CONF:
                raise LakeConfigError(f"spark_conf cannot set {key}: set it through {_REFUSED_CONF[key]}.")
            if is_secret_key(key):
                session[key] = str(value)
            else:
                launch[key] = str(value)
                session.pop(key, None)  # set once, at launch: a session value would undo an override
        # Catalog settings that are not secret but must exist when the SparkContext starts
        # (a spark_conf value, already in launch, replaces Iceberg's: it must name it too).
        extensions = session.pop("spark.sql.extensions", None)
        if extensions:
            launch.setdefault("spark.sql.extensions", extensions)
        self._settle_driver_conf(target, launch)
        return launch, session

    @staticmethod
    def _launch_defaults(target: SparkTarget, work_dir: Path) -> dict[str, str]:
        """Settings of every launch, before the connection's and the operator's ``spark_conf``."""
        launch: dict[str, str] = {"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false"}
        if target.driver_in_task:
            launch["spark.sql.warehouse.dir"] = str(work_dir / "spark-warehouse")
        if target.is_local:
            launch.update({"spark.driver.bindAddress": "127.0.0.1", "spark.driver.host": "127.0.0.1"})
        return launch

    @staticmethod
    def _settle_driver_conf(target: SparkTarget, launch: dict[str, str]) -> None:
        """The driver's Python (client mode) and log configuration (cluster mode), after the user's settings."""
        if target.driver_in_task and "spark.pyspark.python" in launch:
            # spark.pyspark.python names the executors' Python and would run the driver too
            # (Spark prefers it to PYSPARK_DRIVER_PYTHON); the driver runs here, in the task.
            launch.setdefault("spark.pyspark.driver.python", os.environ.get("PYSPARK_DRIVER_PYTHON") or sys.executable)
        if not target.driver_in_task:
            # Shipped with --files into the driver's working directory (see _artifacts).
            options = f"-Dlog4j.configurationFile={LOG_CONFIG_NAME}"
            user = launch.get("spark.driver.extraJavaOptions")
            # The user's options last: they win.
            launch["spark.driver.extraJavaOptions"] = f"{options} {user}" if user else options

    def _artifacts(
        self, target: SparkTarget, launch: dict[str, str], work_dir: Path, spec_path: Path
    ) -> dict[str, str | None]:
        """The jars, packages, Python files and files spark-submit ships (conf lists merged in)."""
        merged = {flag: launch.pop(key, None) for key, flag in _FLAG_CONF.items()}
        given = (_joined(self.settings.packages, merged["packages"]) or "").split(",")
        own_jars = (_joined(self.settings.jars, merged["jars"]) or "").split(",")
        classpath = self.lake_hook.spark_classpath([jar for jar in own_jars if jar],
                                                   iceberg_runtime_provided=self.settings.iceberg_runtime_provided,
                                                   packages=[package for package in given if package])
        # What the provider added and found no cached jar for (the user's own coordinates are theirs to name).
        named = {*given, *self.lake_hook.spark_packages()}
        left_to_spark = [package for package in classpath.packages if package not in named]
        if left_to_spark:
            self.log.info("Spark resolves %s at submit time (not in the jar cache %s).",
                          ", ".join(left_to_spark), jar_cache_dir())
        files: list[str] = []
        if not target.driver_in_task:
            log_config = _write_private(work_dir / LOG_CONFIG_NAME, _LOG4J2_PROPERTIES)
            files = [str(spec_path), str(log_config)]
        return {
            "jars": _joined(classpath.jars),
            "packages": _joined(classpath.packages) or None,
            "py_files": _joined(_jobs_archive(work_dir), merged["py_files"]),
            "files": _joined(files, merged["files"]),
        }

    def _process_env(self, target: SparkTarget, work_dir: Path, *,
                     java_options: Sequence[str] = ()) -> dict[str, str]:
        """The spark-submit process's own environment: it stays on this machine.

        ``java_options``: the job's own for a driver started here (``core/job_registry.py``'s
        :class:`LaunchHints`, which :meth:`prepare` takes only for such a driver).
        """
        log_config = _write_private(
            work_dir / f"submit-{LOG_CONFIG_NAME}", _LOG4J2_PROPERTIES if target.driver_in_task else _LOG4J2_SUBMITTER)
        # A driver started here maps the class archive built for this Spark and Java (class_archive.py).
        archive = class_archive.archive_for_driver() if target.driver_in_task else None
        env = {
            # spark-submit from the same environment as this interpreter comes first.
            "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
            # The JVM started here: the driver (client mode) or the submitting client (cluster mode).
            "SPARK_SUBMIT_OPTS": " ".join(filter(None, [
                f"-Dlog4j.configurationFile=file:{log_config}",
                class_archive.driver_java_options(archive) if archive else None,
                *java_options,
                os.environ.get("SPARK_SUBMIT_OPTS")])),
        }
        if target.driver_in_task:
            env["PYSPARK_DRIVER_PYTHON"] = os.environ.get("PYSPARK_DRIVER_PYTHON") or sys.executable
        if target.is_local:
            # Executors are threads of this JVM, their Python workers start on this machine.
            env["SPARK_LOCAL_IP"] = "127.0.0.1"
            env["PYSPARK_PYTHON"] = os.environ.get("PYSPARK_PYTHON") or sys.executable
        return env

    def build_spec(
        self, job: str, args: dict[str, Any], result_location: str, session_conf: dict[str, str], *,
        defer_spark_session: bool = False,
    ) -> dict[str, Any]:
        return {
            "job": job,
            "catalog": self.lake_hook.config.name,
            "args": args,
            "result_location": result_location,
            "session_conf": session_conf,
            "app_name": f"lake-{job}",
            # jobs/session.py's DeferredSparkSession: Spark starts only if the job uses it.
            "defer_spark_session": defer_spark_session,
        }

    def _result_location(self, job: str, work_dir: Path) -> str:
        if self.settings.result_location:
            return f"{self.settings.result_location.rstrip('/')}/{job}-{uuid.uuid4().hex}.json"
        return str(work_dir / "result.json")

    def prepare(self, args: Contract, target: SparkTarget, work_dir: Path) -> Submission:
        """Write the spec and build the spark-submit call for the job taking ``args`` (nothing is started;
        :meth:`run` has checked ``args``)."""
        job = job_for(args)
        result_location = self._result_location(job.name, work_dir)
        launch_conf, session_conf = self._split_conf(target, work_dir)
        # The job's launch hints apply to a driver started here only (LaunchHints says why).
        hints = job.launch(args) if target.driver_in_task else LaunchHints()
        spec = self.build_spec(job.name, args.to_json(), result_location, session_conf,
                               defer_spark_session=hints.defer_spark_session)
        spec_path = _write_private(work_dir / "spec.json", json.dumps(spec))
        artifacts = self._artifacts(target, launch_conf, work_dir, spec_path)
        env = place_env_vars(target, self.settings.env_vars,
                             self._process_env(target, work_dir, java_options=hints.java_options))
        hook = _SparkSubmitHook(
            connection=self.spark_connection,
            conf={**launch_conf, **env.conf},
            **artifacts,
            driver_memory=self.settings.driver_memory,
            executor_memory=self.settings.executor_memory,
            executor_cores=self.settings.executor_cores,
            num_executors=self.settings.num_executors,
            deploy_mode=target.deploy_mode,
            name=f"lake-{job.name}-{self.lake_hook.config.name}",
            # Cluster mode: --files puts the spec in the driver's working directory.
            application_args=[spec_path.name if not target.driver_in_task else str(spec_path)],
            env_vars=env.submit_hook_env_vars,
            verbose=self.settings.verbose,
        )
        return Submission(job.name, target, hook, result_location, spec_path, env.process_env)

    # -- running ----------------------------------------------------------------------------
    @staticmethod
    def _checked_job(args: Contract) -> Job:
        """The job taking ``args``, refused here when the request cannot work (no JVM started yet)."""
        job = job_for(args)
        args.validate()
        try:
            json.dumps(args.to_json())  # fail here, not in the driver, if the args cannot travel as JSON
        except (TypeError, ValueError) as error:
            raise LakeConfigError(f"The {args.what} arguments cannot travel as JSON: {error}.") from None
        if isinstance(args, BatchJobArgs):
            check_batch(args)
        return job

    def run(self, args: Contract) -> Any:
        """Submit the job that takes ``args``, wait, and return its result contract.

        Raises :class:`LakeConfigError` before anything starts when the request cannot work, and
        :class:`LakeJobError` with the application's own error message when the job fails.
        """
        job = self._checked_job(args)
        self._submit_hook = None
        target = self.resolve_target()
        work_dir = Path(tempfile.mkdtemp(prefix="lake-job-"))  # mode 0700
        try:
            submission = self.prepare(args, target, work_dir)  # refuses missing jars, offline
            # Opening the catalog checks it (and the store) answers before a JVM starts, and on SQLite
            # creates the catalog tables Spark expects to find (it is told not to create them itself).
            _ = self.lake_hook.catalog
            return job.result.from_json(self._submit(submission))
        finally:
            shutil.rmtree(work_dir, ignore_errors=True)

    def _submit(self, submission: Submission) -> dict[str, Any]:
        self._submit_hook = submission.hook
        self.log.info("Submitting job %r to %s in %s mode (catalog %r).", submission.job, submission.target.master,
                      submission.target.deploy_mode, self.lake_hook.config.name)
        submit_error: AirflowException | None = None
        try:
            submission.run()
        except AirflowException as error:
            submit_error = error
        document = self._read_result(submission.result_location)
        return self._outcome(submission.job, document, submit_error)

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
        self.lineage_parent = document.get("lineage_parent") or {}
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
        # SparkSubmitHook keeps its Popen in the private ``_submit_sp`` and its on_kill kills that one
        # process only; the PySpark driver is a child of spark-submit, so the group must go.
        process = getattr(hook, "_submit_sp", None)
        if process is not None and process.poll() is None:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        hook.on_kill()  # cluster side: yarn / k8s / standalone driver kill
