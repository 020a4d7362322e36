"""A real Airflow on 127.0.0.1 for end-to-end tests: api-server, scheduler, dag-processor, triggerer.

Started as separate processes (not ``airflow standalone``, which binds log servers on every
interface), with the LocalExecutor on a private PostgreSQL metadata database (as production
runs it: on SQLite the scheduler and the api-server fight over one write lock under load), and
stopped by the fixture that starts it. A wait fails at once, with the log tail, when one of the
processes has died, and on timeout says what the run's tasks were doing.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

import requests

from ports import free_port


class AirflowStack:
    USER = "admin"

    def __init__(self, home: Path, dags_folder: Path, lake_home: Path, sql_alchemy_conn: str):
        self.home = home
        self.dags_folder = dags_folder
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.password = secrets.token_urlsafe(12)
        self.processes: list[subprocess.Popen] = []
        home.mkdir(parents=True, exist_ok=True)
        passwords = home / "passwords.json"
        passwords.write_text(json.dumps({self.USER: self.password}))
        self.env = {
            **os.environ,
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": sql_alchemy_conn,
            "AIRFLOW__CORE__DAGS_FOLDER": str(dags_folder),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__CORE__PARALLELISM": "4",
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{self.USER}:admin",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords),
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{self.base_url}/execution/",
            "AIRFLOW__API__BASE_URL": self.base_url,
            "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API__PORT": str(self.port),
            "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_hex(32),
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
            # Each file is parsed once, and again when it changes (its mtime, checked every loop): parsing
            # all of them every few seconds took some 40 % of the suite's CPU. A test whose DAG file reads
            # outside state (a Variable, a file) calls reparse() where a deployment waits for its interval.
            "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "3600",
            "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "2",
            "LAKE_HOME": str(lake_home),
        }
        self._token: str | None = None

    # -- lifecycle --------------------------------------------------------------------------
    def _spawn(self, name: str, *args: str) -> None:
        log = open(self.home / f"{name}.log", "w")  # noqa: SIM115 - closed with the process
        process = subprocess.Popen(
            [sys.executable, "-m", "airflow", *args], env=self.env, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        process.log_file = log  # type: ignore[attr-defined]
        self.processes.append(process)

    @property
    def scheduler_pid(self) -> int:
        """The scheduler's process: with the LocalExecutor every task process descends from it."""
        return next(process.pid for process in self.processes if process.args[3] == "scheduler")

    def start(self, timeout: float = 240) -> AirflowStack:
        migrate = subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"], env=self.env, capture_output=True,
                                 text=True)
        if migrate.returncode:
            raise RuntimeError(f"airflow db migrate failed:\n{migrate.stdout[-3000:]}\n{migrate.stderr[-3000:]}")
        self._spawn("api-server", "api-server", "--host", "127.0.0.1", "--port", str(self.port), "--workers", "1")
        self._spawn("scheduler", "scheduler", "--skip-serve-logs")
        self._spawn("dag-processor", "dag-processor")
        self._spawn("triggerer", "triggerer", "--skip-serve-logs")
        self.wait_for(lambda: requests.get(f"{self.base_url}/api/v2/monitor/health", timeout=5).ok, timeout, "api-server")
        return self

    def stop(self) -> None:
        for process in self.processes:
            try:
                os.killpg(process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 30
        for process in self.processes:
            try:
                process.wait(timeout=max(1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
            process.log_file.close()  # type: ignore[attr-defined]

    def logs(self, tail: int = 4000) -> str:
        return "\n".join(f"===== {p.name}\n{p.read_text()[-tail:]}" for p in sorted(self.home.glob("*.log")))

    def dead_processes(self) -> list[str]:
        return [f"{process.args[3]} (exit {process.returncode})" for process in self.processes if process.poll() is not None]

    def wait_for(self, condition, timeout: float, what: str, interval: float = 2, diagnose=None):
        """Poll ``condition`` until it returns something true; fail early if a process died.

        ``diagnose`` (optional) returns text describing the state on timeout (task states...).
        """
        deadline = time.monotonic() + timeout
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            dead = self.dead_processes()
            if dead:
                raise RuntimeError(f"Airflow process died while waiting for {what}: {', '.join(dead)}\n{self.logs()}")
            try:
                value = condition()
                if value:
                    return value
            except (requests.RequestException, KeyError, ValueError) as error:
                last_error = error
            time.sleep(interval)
        detail = ""
        if diagnose is not None:
            try:
                detail = diagnose()
            except Exception as error:  # noqa: BLE001 - a diagnosis must not hide the timeout
                detail = f"(no diagnosis: {error})"
        raise TimeoutError(
            f"Timed out after {timeout:.0f}s waiting for {what} (last error: {last_error})\n{detail}\n"
            f"{self.logs(tail=3000)}"
        )

    def task_states(self, dag_id: str, run_id: str | None = None) -> str:
        """One line per task instance of a run (or of the DAG's recent runs), and the end of each failed task's log:
        what a stuck or failed run is doing."""
        path = f"/dags/{dag_id}/dagRuns/{run_id or '~'}/taskInstances"
        instances = self.api("GET", path, params={"limit": 100}).json().get("task_instances", [])
        runs = self.api("GET", f"/dags/{dag_id}/dagRuns", params={"limit": 20}).json().get("dag_runs", [])
        failed_logs = [f"----- log of {t['task_id']} ({t['dag_run_id']}), last try:\n"
                       f"{self.task_log(dag_id, t['dag_run_id'], t['task_id'], t['try_number'])[-2500:]}"
                       for t in instances if t["state"] == "failed" and t.get("try_number")]
        return "\n".join(
            [f"run {r['dag_run_id']}: {r['state']}" for r in runs]
            + [f"  {t['dag_run_id']} {t['task_id']}: {t['state']} (try {t.get('try_number')})" for t in instances]
            + failed_logs
        )

    # -- REST -------------------------------------------------------------------------------
    @property
    def token(self) -> str:
        if self._token is None:
            response = requests.post(f"{self.base_url}/auth/token",
                                     json={"username": self.USER, "password": self.password}, timeout=30)
            response.raise_for_status()
            self._token = response.json()["access_token"]
        return self._token

    def api(self, method: str, path: str, **kwargs) -> requests.Response:
        """One REST call (the metadata database is PostgreSQL: no "database is locked" to retry)."""
        headers = {"Authorization": f"Bearer {self.token}"}
        return requests.request(method, f"{self.base_url}/api/v2{path}", headers=headers, timeout=60, **kwargs)

    def reparse(self, dag_file: str) -> None:
        """Have the dag-processor parse ``dag_file`` (a name in the DAGs folder) again now, as a deployment
        does on its ``min_file_process_interval``: a file newer than its last parse is parsed at once."""
        os.utime(self.dags_folder / dag_file)

    def wait_for_dag(self, dag_id: str, timeout: float = 180) -> dict:
        return self.wait_for(lambda: self.api("GET", f"/dags/{dag_id}").ok and self.api("GET", f"/dags/{dag_id}").json(),
                             timeout, f"DAG {dag_id} to be parsed")

    def wait_for_run(self, dag_id: str, run_id: str, timeout: float = 600) -> dict:
        def finished():
            run = self.api("GET", f"/dags/{dag_id}/dagRuns/{run_id}").json()
            return run if run["state"] in ("success", "failed") else None

        return self.wait_for(finished, timeout, f"run {run_id} of {dag_id}", interval=3,
                             diagnose=lambda: self.task_states(dag_id))

    def wait_for_executor_report(self, dag_id: str, run_id: str, task_id: str, timeout: float = 120) -> None:
        """Until the scheduler has taken in the executor's report of the task's last process.

        A paused task (a human-in-the-loop gate awaiting input) answered before that report arrives
        can be failed by Airflow 3.3's scheduler, which then takes the paused try's exit for the
        resumed try's ("finished with state success, but the task instance's state attribute is
        queued"); its log line "TaskInstance Finished" says the report was taken in.
        """
        line = f"TaskInstance Finished: dag_id={dag_id}, task_id={task_id}, run_id={run_id},"
        self.wait_for(lambda: line in (self.home / "scheduler.log").read_text(errors="replace"), timeout,
                      f"the scheduler to take in the executor's report of {task_id} in {run_id}", interval=1)

    def task_log(self, dag_id: str, run_id: str, task_id: str, try_number: int = 1) -> str:
        """The full log of one try of a task instance, as the UI shows it."""
        return self.api("GET", f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/logs/{try_number}",
                        params={"full_content": "true"}).text

    def xcom(self, dag_id: str, run_id: str, task_id: str, key: str = "return_value"):
        response = self.api("GET", f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/xcomEntries/{key}",
                            params={"deserialize": "true", "stringify": "false"})
        response.raise_for_status()
        return response.json()["value"]
