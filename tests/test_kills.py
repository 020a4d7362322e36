"""SIGKILL the Spark application of plan, rewrite, expire and clean at varied moments.

After every kill the table reads the same rows; the next run of the task succeeds; and the files
the killed runs left behind are taken by the clean step (moved to its quarantine) once they are past the orphan floor.
Two ways to kill: the whole spark-submit process group (what the operator's ``on_kill`` does)
and only the Python driver process (the JVM then loses its application).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from demo_data import create_events_table
from airflow_lake_provider.operators.clean import IcebergCleanPolicyOperator
from airflow_lake_provider.operators.expire import IcebergExpireSnapshotsOperator
from airflow_lake_provider.operators.plan import IcebergRewritePlanOperator
from airflow_lake_provider.operators.rewrite import IcebergRewriteDataFilesOperator
import generated_pages
from lake_checks import FakeTaskInstance, files_on_disk, job_processes, table_fingerprint

pytestmark = [pytest.mark.slow, pytest.mark.spark_submit]
KILLS: list[dict] = []


def _context(task_id: str) -> dict:
    return {"ti": FakeTaskInstance(task_id=task_id, run_id="manual__kills")}


def stray_checksums(table) -> list[str]:
    """Checksum side files whose file is gone: there must be none."""
    root = Path(urlsplit(table.location()).path)
    return [str(p) for p in root.rglob(".*.crc") if not (p.parent / p.name[1:-4]).exists()]


def referenced_files(table) -> set[str]:
    """Every file some snapshot, tag, branch or metadata log entry of the table references."""
    paths = {urlsplit(table.metadata_location).path}
    paths |= {urlsplit(entry.metadata_file).path for entry in table.metadata.metadata_log}
    for snapshot in table.snapshots():
        paths.add(urlsplit(snapshot.manifest_list).path)
        for manifest in snapshot.manifests(table.io):
            paths.add(urlsplit(manifest.manifest_path).path)
            for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=False):
                paths.add(urlsplit(entry.data_file.file_path).path)
    return paths


def run_and_kill(op, context: dict, after_seconds: float, how: str, trigger=None, then_wait: float = 0.0) -> str:
    """Run ``op`` in a thread; SIGKILL its Spark application after ``after_seconds``, or ``then_wait``
    seconds after ``trigger()()`` first holds (a moment inside the run: its first data file...)."""
    outcome: dict = {}
    when = trigger() if trigger else None
    held_since = None

    def target() -> None:
        try:
            outcome["result"] = op.execute(context)
        except Exception as error:  # noqa: BLE001 - the kill is expected to fail the task
            outcome["error"] = error

    thread = threading.Thread(target=target, daemon=True)
    started = time.monotonic()
    thread.start()
    killed_at = None
    while thread.is_alive():
        elapsed = time.monotonic() - started
        process = getattr(getattr(op._job_hook, "_submit_hook", None), "_submit_sp", None) if op._job_hook else None
        if when and held_since is None and when():
            held_since = elapsed
        due = held_since is not None and elapsed - held_since >= then_wait if when else elapsed >= after_seconds
        if process is not None and process.poll() is None and (due or elapsed >= after_seconds):
            if how == "spark-submit":
                op.on_kill()
                killed_at = elapsed
            else:
                drivers = job_processes(under=process.pid)
                for driver in drivers:
                    os.kill(driver.pid, signal.SIGKILL)
                if drivers:
                    killed_at = elapsed
            if killed_at is not None:
                break
        time.sleep(0.1)
    thread.join(timeout=180)
    moment = f"{killed_at:.1f}s" if killed_at is not None else "never (it finished first)"
    if killed_at is not None and when:
        moment += f" ({then_wait:g}s after {getattr(trigger, 'label', 'the trigger')})"
    state = "finished" if "result" in outcome else f"failed: {type(outcome.get('error')).__name__}"
    KILLS.append({"task": op.task_id, "how": how, "at": moment, "state": state})
    return state


def test_kills_of_rewrite_expire_and_clean_lose_nothing_and_leave_no_orphans(lake_hook, namespace):
    name = f"{namespace}.events"
    create_events_table(lake_hook.catalog, name, days=2, commits_per_day=30, rows_per_commit=10)
    table = lake_hook.load_table(name)
    fingerprint = table_fingerprint(table)
    # Plan on the Spark engine: killed while the JVM starts and while it plans; it changes nothing.
    for seconds, how in ((2, "spark-submit"), (5, "driver"), (8, "spark-submit")):
        run_and_kill(IcebergRewritePlanOperator(task_id="plan", table=name, engine="spark"), _context("plan"), seconds, how)
        assert table_fingerprint(lake_hook.load_table(name)) == fingerprint
    plan = IcebergRewritePlanOperator(task_id="plan", table=name, engine="spark").execute(_context("plan"))
    assert plan["totals"]["groups"] >= 1

    def first_new_file(folder: str):
        def start():  # called as the run starts: files from here on are the run's own
            baseline = files_on_disk(table)
            return lambda: any(f"/{folder}/" in path for path in files_on_disk(table) - baseline)
        start.label = f"its first new {folder} file"
        return start

    # Rewrite: killed while the JVM starts or plans, then swept across the window from its first
    # data file to its commit (the window where a rare bug would hide), by both kinds of kill.
    moments = [(2, "spark-submit", None, 0), (4, "driver", None, 0), (6, "spark-submit", None, 0)]
    moments += [(90, how, first_new_file("data"), wait)
                for wait, how in ((0, "driver"), (0, "spark-submit"), (0.5, "driver"), (1.0, "spark-submit"),
                                  (1.5, "driver"), (2.0, "spark-submit"), (3.0, "driver"))]
    for seconds, how, when, wait in moments:
        op = IcebergRewriteDataFilesOperator(task_id="rewrite", table=name, plan=plan)
        run_and_kill(op, _context("rewrite"), seconds, how, when, wait)
        assert table_fingerprint(lake_hook.load_table(name)) == fingerprint
    result = IcebergRewriteDataFilesOperator(task_id="rewrite", table=name, plan=plan).execute(_context("rewrite"))
    assert result["failed_groups"] == []
    KILLS.append({"task": "rewrite", "how": "next run", "at": "-",
                  "state": "recovered its commit" if result.get("recovered_from_earlier_try") else "rewrote"})
    assert table_fingerprint(lake_hook.load_table(name)) == fingerprint

    # Expire: killed at varied moments, the last one just after its commit (while it deletes files).
    for seconds, how, when, wait in ((2.5, "driver", None, 0), (5, "spark-submit", None, 0), (7, "driver", None, 0),
                                     (90, "driver", first_new_file("metadata"), 0),
                                     (90, "spark-submit", first_new_file("metadata"), 0.3)):
        op = IcebergExpireSnapshotsOperator(task_id="expire", table=name, override_table_retention=True, older_than="0h", retain_last=1)
        run_and_kill(op, _context("expire"), seconds, how, when, wait)
        assert table_fingerprint(lake_hook.load_table(name)) == fingerprint
    IcebergExpireSnapshotsOperator(task_id="expire", table=name, override_table_retention=True, older_than="0h", retain_last=1).execute(_context("expire"))
    assert table_fingerprint(lake_hook.load_table(name)) == fingerprint

    # Clean (with orphan removal at the normal floor): killed, then it succeeds.
    for seconds, how in ((2, "spark-submit"), (4, "driver"), (6, "spark-submit"), (8, "driver"), (11, "spark-submit")):
        op = IcebergCleanPolicyOperator(task_id="clean", table=name, retained=1, override_table_retention=True,
                                    orphan_older_than_hours=48, reference_namespaces=[namespace])
        run_and_kill(op, _context("clean"), seconds, how)
        assert table_fingerprint(lake_hook.load_table(name)) == fingerprint

    # What the killed runs left behind: on disk, referenced by nothing.
    table = lake_hook.load_table(name)
    leftovers = files_on_disk(table) - referenced_files(table)
    young = IcebergCleanPolicyOperator(task_id="clean", table=name, retained=1, override_table_retention=True,
                                    orphan_older_than_hours=48, reference_namespaces=[namespace]).execute({})
    assert young["orphan_file_count"] == 0  # all younger than the floor: kept
    assert leftovers <= files_on_disk(lake_hook.load_table(name))
    # Past the floor (made three days old), the clean step removes exactly them.
    old = time.time() - 72 * 3600
    for path in leftovers:
        os.utime(path, (old, old))
    cleaned = IcebergCleanPolicyOperator(task_id="clean", table=name, retained=1, override_table_retention=True,
                                    orphan_older_than_hours=48, reference_namespaces=[namespace]).execute({})
    table = lake_hook.load_table(name)
    assert {urlsplit(p).path for p in cleaned["orphan_files"]} == leftovers
    assert not files_on_disk(table) - referenced_files(table)
    assert not stray_checksums(table)
    assert table_fingerprint(table) == fingerprint

    hits = [k for k in KILLS if k["at"][0].isdigit()]
    assert len(hits) >= 16, KILLS  # a late moment may find the run already finished
    assert {k["task"] for k in hits} == {"plan", "rewrite", "expire", "clean"}
    generated_pages.save("kills", {"hits": hits, "leftovers": len(leftovers), "rows": fingerprint[0]})


def report(hits: list[dict], leftovers: int, rows: int, task_process: list[dict] | None = None) -> str:
    """docs/kills.md from the kills that hit a running application (``make docs``); ``task_process``:
    the kills of the Airflow task process (tests/test_kills_task_process.py), when that test ran."""
    task_process = task_process or []
    every = hits + task_process
    by_task = {task: sum(1 for k in every if k["task"] == task) for task in ("plan", "rewrite", "expire", "clean")}
    lines = [
        "# Kill tests: the observed run",
        "",
        "<!-- GENERATED by `make docs` from what tests/test_kills.py and tests/test_kills_task_process.py observed; "
        "do not edit by hand. -->",
        "",
        "SIGKILL at the moments below, in all four steps: of the running Spark application (the whole",
        "spark-submit process group, as the operator's `on_kill` does, or only the Python driver), and of",
        "the Airflow task process itself, on a real Airflow whose scheduler then retried the step (no",
        "`on_kill` runs then; spark-submit dies with the task through the parent-death signal the job hook",
        "sets). After every kill the table was read back (row count and checksum) and the next run of the",
        "task succeeded; the files the killed runs left behind were kept by the clean step while younger",
        "than the orphan floor and taken once past it (moved to the quarantine beside the table), leaving no",
        "unreferenced file under the table.",
        "",
        f"- Kills that hit a running step: **{len(every)}** (plan {by_task['plan']}, rewrite {by_task['rewrite']}, "
        f"expire {by_task['expire']}, clean {by_task['clean']}), of which **{len(task_process)}** of the Airflow "
        "task process.",
        f"- Rows lost or resurrected: **0** (the table kept its {rows} rows and checksum throughout).",
        f"- Leftover files taken by the clean step once past the floor: **{leftovers}**.",
        "",
        "| step | what was killed | when (since the task started) | the killed task |",
        "|---|---|---|---|",
    ]
    lines += [f"| {k['task']} | {k['how']} | {k['at']} | {k['state']} |" for k in every]
    return "\n".join(lines) + "\n"
