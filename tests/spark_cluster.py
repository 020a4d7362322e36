"""A Spark standalone cluster on 127.0.0.1 (one Master, one Worker) for topology tests.

Both daemons come from the virtual environment's pyspark (``SPARK_HOME`` = the pyspark package
directory; pip's pyspark has ``bin/spark-class`` but no ``sbin/start-master.sh``), started with
``spark-class`` in their own process group on free ports, with their work, log and pid
directories under a temporary directory. The Worker gets 1 core and 1 GiB: the 2-core test
machines run the Airflow task, the driver and one executor at once.

Nothing of the test process's PySpark settings reaches the daemons (``PYSPARK_PYTHON`` and
friends are removed from their environment): an application must say which Python its
executors use (``spark.pyspark.python``), as it must on a real cluster.
"""

from __future__ import annotations

import json
import os
import subprocess
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pyspark

from ports import free_port
from server_processes import stop_process_group, wait_until_serving

SPARK_HOME = Path(pyspark.__file__).resolve().parent
_PYTHON_ENV = ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYSPARK_SUBMIT_ARGS", "SPARK_CONF_DIR")


@dataclass
class SparkStandaloneCluster:
    """One Master and one Worker; ``start()`` returns once the Worker has registered."""

    base: Path
    worker_cores: int = 1
    worker_memory: str = "1g"
    marker: str = field(default_factory=lambda: f"lake-test-cluster-{uuid.uuid4().hex[:8]}")
    master_port: int = field(default_factory=free_port)
    master_ui_port: int = field(default_factory=free_port)
    worker_port: int = field(default_factory=free_port)
    worker_ui_port: int = field(default_factory=free_port)
    _processes: list[subprocess.Popen] = field(default_factory=list)

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"

    @property
    def web_ui_url(self) -> str:
        return f"http://127.0.0.1:{self.master_ui_port}"

    @property
    def log_dir(self) -> Path:
        return self.base / "logs"

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in _PYTHON_ENV}
        conf_dir = self.base / "conf"  # empty: no spark-defaults.conf or spark-env.sh of anyone else
        for name in ("conf", "work", "logs", "pids"):
            (self.base / name).mkdir(parents=True, exist_ok=True)
        env.update(
            SPARK_HOME=str(SPARK_HOME),
            SPARK_CONF_DIR=str(conf_dir),
            SPARK_WORKER_DIR=str(self.base / "work"),
            SPARK_LOG_DIR=str(self.log_dir),
            SPARK_PID_DIR=str(self.base / "pids"),
            SPARK_LOCAL_IP="127.0.0.1",
            SPARK_DAEMON_MEMORY="256m",
            # The marker names every daemon JVM, so leftovers can be found and killed.
            SPARK_DAEMON_JAVA_OPTS=f"-Dlake.test.cluster={self.marker}",
        )
        return env

    def _spawn(self, name: str, *args: str) -> None:
        log = open(self.log_dir / f"{name}.out", "ab")  # noqa: SIM115 - the daemon owns it
        self._processes.append(
            subprocess.Popen(
                [str(SPARK_HOME / "bin" / "spark-class"), *args],
                env=self._env(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )
        )

    def state(self) -> dict[str, Any]:
        """The Master's ``/json`` status: workers, active and completed applications."""
        with urllib.request.urlopen(f"{self.web_ui_url}/json/", timeout=5) as response:
            return json.load(response)

    def start(self, timeout: float = 90) -> SparkStandaloneCluster:
        self._env()  # creates the directories
        self._spawn("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                    "--port", str(self.master_port), "--webui-port", str(self.master_ui_port))
        self._spawn("worker", "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                    "--port", str(self.worker_port), "--webui-port", str(self.worker_ui_port),
                    "--cores", str(self.worker_cores), "--memory", self.worker_memory,
                    "--work-dir", str(self.base / "work"), self.master_url)
        wait_until_serving(lambda: any(w.get("state") == "ALIVE" for w in self.state().get("workers", [])),
                           processes=self._processes, timeout=timeout, what="The Spark cluster (a registered worker)",
                           log=self.logs, stop=self.stop)
        return self

    def applications(self) -> list[dict[str, Any]]:
        """Every application the Master knows (running and completed)."""
        state = self.state()
        return [*state.get("activeapps", []), *state.get("completedapps", [])]

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-4000:]}"
                         for p in sorted(self.log_dir.glob("*.out")))

    def _leftovers(self) -> list[psutil.Process]:
        """Daemons (by marker) and executors (by their worker's address) still running."""
        worker_address = f"127.0.0.1:{self.worker_port}"
        found = []
        for process in psutil.process_iter(["cmdline"]):
            try:
                cmdline = " ".join(process.info["cmdline"] or [])
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
            if self.marker in cmdline or ("CoarseGrainedExecutorBackend" in cmdline and worker_address in cmdline):
                found.append(process)
        return found

    def stop(self) -> None:
        """Stop the Worker, then the Master (their process groups), then kill whatever is left."""
        for process in reversed(self._processes):
            stop_process_group(process, grace=15)
        leftovers = self._leftovers()
        for process in leftovers:
            try:
                process.kill()
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(leftovers, timeout=10)
