"""A Spark standalone cluster on 127.0.0.1 (one Master, one Worker, or ``workers`` of them) for topology
tests and the cluster benchmark.

Both daemons come from the virtual environment's pyspark (``SPARK_HOME`` = the pyspark package
directory; pip's pyspark has ``bin/spark-class`` but no ``sbin/start-master.sh``), started with
``spark-class`` in their own process group on free ports, with their work, log and pid
directories under a temporary directory. The Worker gets 1 core and 1 GiB: the 2-core test
machines run the Airflow task, the driver and one executor at once. With ``workers=N`` each Worker
has its own ports, work directory (``work``, ``work-2``, ...) and log (``worker.out``,
``worker-2.out``, ...), and the sizes ``worker_cores`` and ``worker_memory`` each.

Nothing of the test process's PySpark settings reaches the daemons (``PYSPARK_PYTHON`` and
friends are removed from their environment): an application must say which Python its
executors use (``spark.pyspark.python``), as it must on a real cluster.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pyspark

from ports import free_port, free_ports
from server_processes import stop_process_group, wait_until_serving

SPARK_HOME = Path(pyspark.__file__).resolve().parent
_PYTHON_ENV = ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYSPARK_SUBMIT_ARGS", "SPARK_CONF_DIR")


@dataclass
class SparkStandaloneCluster:
    """One Master and ``workers`` Workers (one by default); ``start()`` returns once every Worker has registered."""

    base: Path
    worker_cores: int = 1
    worker_memory: str = "1g"
    workers: int = 1
    marker: str = field(default_factory=lambda: f"lake-test-cluster-{uuid.uuid4().hex[:8]}")
    master_port: int = field(default_factory=free_port)
    master_ui_port: int = field(default_factory=free_port)
    worker_port: int = field(default_factory=free_port)
    worker_ui_port: int = field(default_factory=free_port)
    _processes: list[subprocess.Popen] = field(default_factory=list)
    #: The ports of the Workers after the first (``worker_port``, ``worker_ui_port``): two per Worker.
    _more_worker_ports: list[tuple[int, int]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.workers < 1:
            raise ValueError(f"a cluster needs at least one worker, not {self.workers}")
        if self.workers > 1 and not self._more_worker_ports:
            taken = {self.master_port, self.master_ui_port, self.worker_port, self.worker_ui_port}
            wanted = 2 * (self.workers - 1)
            ports = [p for p in free_ports(wanted + len(taken)) if p not in taken][:wanted]
            self._more_worker_ports = list(zip(ports[::2], ports[1::2], strict=True))

    @property
    def worker_ports(self) -> list[tuple[int, int]]:
        """Each Worker's (port, web UI port), the first one's being ``worker_port`` and ``worker_ui_port``."""
        return [(self.worker_port, self.worker_ui_port), *self._more_worker_ports]

    def _worker_dir(self, index: int) -> Path:
        return self.base / ("work" if index == 0 else f"work-{index + 1}")

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
        for index, (port, ui_port) in enumerate(self.worker_ports):
            work = self._worker_dir(index)
            work.mkdir(parents=True, exist_ok=True)
            self._spawn("worker" if index == 0 else f"worker-{index + 1}", "org.apache.spark.deploy.worker.Worker",
                        "--host", "127.0.0.1", "--port", str(port), "--webui-port", str(ui_port),
                        "--cores", str(self.worker_cores), "--memory", self.worker_memory,
                        "--work-dir", str(work), self.master_url)
        what = "The Spark cluster (a registered worker)" if self.workers == 1 else \
            f"The Spark cluster ({self.workers} registered workers)"
        wait_until_serving(lambda: self.alive_workers() >= self.workers, processes=self._processes, timeout=timeout,
                           what=what, log=self.logs, stop=self.stop)
        return self

    def alive_workers(self) -> int:
        """How many Workers the Master has as ALIVE."""
        return sum(1 for w in self.state().get("workers", []) if w.get("state") == "ALIVE")

    def applications(self) -> list[dict[str, Any]]:
        """Every application the Master knows (running and completed)."""
        state = self.state()
        return [*state.get("activeapps", []), *state.get("completedapps", [])]

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-4000:]}"
                         for p in sorted(self.log_dir.glob("*.out")))

    def _leftovers(self) -> list[psutil.Process]:
        """Daemons (by marker) and executors (by their workers' addresses) still running."""
        # An executor's command line names its Worker: --worker-url spark://Worker@127.0.0.1:PORT.
        ports = "|".join(str(port) for port, _ in self.worker_ports)
        worker_address = re.compile(rf"@127\.0\.0\.1:({ports})\b")
        found = []
        for process in psutil.process_iter(["cmdline"]):
            try:
                cmdline = " ".join(process.info["cmdline"] or [])
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
            if self.marker in cmdline or ("CoarseGrainedExecutorBackend" in cmdline and worker_address.search(cmdline)):
                found.append(process)
        return found

    def stop(self) -> None:
        """Stop the Workers, then the Master (their process groups), then kill whatever is left."""
        for process in reversed(self._processes):
            stop_process_group(process, grace=15)
        leftovers = self._leftovers()
        for process in leftovers:
            try:
                process.kill()
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(leftovers, timeout=10)
