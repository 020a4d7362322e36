"""A secret in the catalog connection never reaches the task log, XCom or any process's argv."""

from __future__ import annotations

import io
import json
import os
import stat
import tempfile
import threading
import time
from pathlib import Path

import psutil
import pyarrow as pa
import pytest

from conftest import load_dag

pytestmark = pytest.mark.spark_submit

PASSWORD = "Pw-7f3c9e1d-never-log-me"
TOKEN = "Tok-52aa81b0-never-log-me"


class ProcessWatch:
    """While open: the argv of every process a job starts (``lake-job-`` in its command line),
    and the permission bits of the job hook's private directories under ``tmp`` and their files
    (give a private ``tmp``: other processes of the host make ``lake-job-`` directories too)."""

    def __init__(self, tmp: Path | None = None) -> None:
        self.tmp = tmp or Path(tempfile.gettempdir())
        self.argv: list[str] = []
        self.modes: dict[str, int] = {}
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        while not self._done.is_set():
            for process in psutil.process_iter(["cmdline"]):
                try:
                    cmdline = " ".join(process.info["cmdline"] or [])
                except (psutil.NoSuchProcess, psutil.AccessDenied):
                    continue
                if "lake-job-" in cmdline and cmdline not in self.argv:
                    self.argv.append(cmdline)
            for path in self.tmp.glob("lake-job-*"):
                for item in [path, *path.glob("*")]:
                    try:
                        self.modes[str(item)] = stat.S_IMODE(item.stat().st_mode)
                    except OSError:
                        pass
            self._done.wait(0.2)

    def __enter__(self) -> ProcessWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        self._thread.join()


def test_connection_secrets_stay_out_of_logs_xcom_and_argv(monkeypatch, tmp_path, airflow_db, capfd):
    monkeypatch.setenv(
        "AIRFLOW_CONN_LAKE_SECRET_PROBE",
        json.dumps({
            "conn_type": "iceberg_lake",
            "host": f"sqlite:///{tmp_path}/catalog.db",
            "login": "maintainer",
            "password": PASSWORD,
            "extra": {"catalog_name": "vault", "warehouse": f"file://{tmp_path}/warehouse",
                      "properties": {"s3.secret-access-key": TOKEN}},
        }),
    )
    from airflow_lake_provider.hooks.lake import IcebergLakeHook

    catalog = IcebergLakeHook("lake_secret_probe").get_catalog()
    catalog.create_namespace("db")
    schema = pa.schema([("id", pa.int64())])
    catalog.create_table("db.items", schema=schema).append(pa.table({"id": [1, 2, 3, 4]}, schema=schema))

    with ProcessWatch() as watch:
        dag = load_dag("lake_secret_probe.py", "lake_secret_probe")
        run = dag.test(run_conf={"table": "vault.db.items"})
    seen_argv = watch.argv
    captured = capfd.readouterr()
    log = captured.out + captured.err

    assert run.state == "success"
    xcom = run.get_task_instance("count_rows").xcom_pull(task_ids="count_rows")
    assert xcom["rows"] == [{"n": 4}]
    # The capture and the watcher did see the job: these checks can fail.
    assert "Submitting job 'sql'" in log
    assert any("spark-submit" in argv or "SparkSubmit" in argv for argv in seen_argv)
    for secret in (PASSWORD, TOKEN):
        assert secret not in log
        assert secret not in json.dumps(xcom)
        assert not [argv for argv in seen_argv if secret in argv]


def _new_entries(root: Path, before: set[str]) -> list[Path]:
    return [root / name for name in sorted(set(os.listdir(root)) - before)]


def _files_under(paths: list[Path]):
    for path in paths:
        if path.is_file():
            yield path
        elif path.is_dir():
            yield from (p for p in path.rglob("*") if p.is_file())


def _holding(files, secrets: dict[str, str]) -> list[tuple[str, str]]:
    """(file, which secret) for every readable file below 50 MB that contains a secret."""
    found = []
    for path in files:
        try:
            if path.stat().st_size > 50_000_000:
                continue
            data = path.read_bytes()
        except OSError:
            continue
        found += [(str(path), label) for label, secret in secrets.items() if secret.encode() in data]
    return found


def _event_log_text(path: Path) -> str:
    """An event log file's text; Spark 4 writes them zstd-compressed by default."""
    data = path.read_bytes()
    if path.suffix == ".zstd":
        import zstandard

        with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data)) as reader:
            data = reader.read()
    return data.decode(errors="replace")


def test_s3_and_oauth_secrets_stay_out_of_everything_a_failed_and_a_good_run_leave(
        seaweedfs_oauth_client, monkeypatch, tmp_path, airflow_db, capfd):
    """Distinct S3 key and OAuth client secret; one rewrite fails (Arrow, on S3), one succeeds in Spark; then the
    task log, XCom, every argv, Spark's event logs, the job's temp directory and anything new in
    the temp directory are searched for each secret."""
    server = seaweedfs_oauth_client
    secrets = {"S3 secret key": server.secret_key, "S3 access key id": server.access_key,
               "OAuth client secret": server.oauth_client_secret}
    assert len(set(secrets.values())) == 3
    monkeypatch.setenv("AIRFLOW_CONN_LAKE_SECRET_S3", json.dumps(server.rest_connection()))
    from airflow_lake_provider.hooks.lake import IcebergLakeHook

    catalog = IcebergLakeHook("lake_secret_s3").catalog
    namespace = f"secrets{os.getpid()}{int(time.time()) % 100000}"
    catalog.create_namespace(namespace)
    schema = pa.schema([("id", pa.int64())])
    for name in ("broken", "ok"):
        table = catalog.create_table(f"{namespace}.{name}", schema=schema)
        for start in (0, 10):
            table.append(pa.table({"id": list(range(start, start + 10))}, schema=schema))
    # A data file deleted behind the table's back: the catalog answers, Spark's read fails.
    broken = catalog.load_table(f"{namespace}.broken")
    victim = next(iter(broken.scan().plan_files())).file.file_path
    server.filesystem().delete_file(victim.split("://", 1)[1])

    events = tmp_path / "spark-events"
    events.mkdir()
    # The job hook's directory, Python's and PySpark's temp files go to a private temp dir, so
    # everything there is this run's; the JVM's (java.io.tmpdir) still go to the shared one.
    private_tmp = tmp_path / "tmp"
    private_tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(private_tmp))
    monkeypatch.setattr(tempfile, "tempdir", str(private_tmp))
    tmp_root = Path("/tmp")
    tmp_before = set(os.listdir(tmp_root))
    with ProcessWatch(private_tmp) as watch:
        dag = load_dag("lake_secret_probe_s3.py", "lake_secret_probe_s3")
        run = dag.test(run_conf={"broken": f"{namespace}.broken", "ok": f"{namespace}.ok",
                                 "event_log_dir": f"file://{events}"})
    captured = capfd.readouterr()
    log = captured.out + captured.err

    # The run did what this test needs: one failure inside Spark, one success, both logged.
    assert run.get_task_instance("rewrite_broken").state == "failed"
    assert run.get_task_instance("rewrite_ok").state == "success"
    assert "Spark job 'rewrite' failed" in log and "Rewrote 2 data files" in log
    xcom = run.get_task_instance("rewrite_ok").xcom_pull(task_ids="rewrite_ok")
    assert xcom["rewritten_data_files"] == 2
    mine = [argv for argv in watch.argv if str(private_tmp) in argv]
    assert any("SparkSubmit" in argv or "spark-submit" in argv for argv in mine)
    # One event log per application (a file, or a directory of files: Spark 4 rolls them): the Arrow
    # rewriter's failure on S3 started none.
    assert len(list(events.iterdir())) == 1
    event_text = "\n".join(_event_log_text(p) for p in events.rglob("*") if p.is_file())
    # Spark did log the catalog's settings, names and all: the search below is meaningful.
    assert "spark.sql.catalog.lake.credential" in event_text and "spark.hadoop.fs.s3a.secret.key" in event_text

    leaks = []
    for label, secret in secrets.items():
        leaks += [(label, "task log")] if secret in log else []
        leaks += [(label, "XCom")] if secret in json.dumps(xcom) else []
        leaks += [(label, f"argv {argv[:80]}") for argv in watch.argv if secret in argv]
        leaks += [(label, "Spark event log")] if secret in event_text else []
    left_in_tmp = [*_new_entries(tmp_root, tmp_before), *private_tmp.iterdir()]
    leaks += [(label, f"left in {path}") for path, label in _holding(_files_under(left_in_tmp), secrets)]
    assert not leaks, leaks

    # The job's private directory (spec file with the secrets) was 0700 / 0600 and is gone.
    job_dirs = {path for path in watch.modes if Path(path).name.startswith("lake-job-")}
    assert job_dirs, "the watcher never saw the job's directory"
    assert all(watch.modes[path] == 0o700 for path in job_dirs)
    assert all(mode == 0o600 for path, mode in watch.modes.items() if path.endswith("spec.json"))
    assert not [path for path in job_dirs if Path(path).exists()]
    # Nothing new in the temp directory that others may read holds anything of the run.
    readable = [str(p) for p in _files_under(left_in_tmp)
                if p.stat().st_mode & stat.S_IROTH and any(s.encode() in p.read_bytes() for s in secrets.values())]
    assert not readable
