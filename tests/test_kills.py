"""SIGKILL the Spark application of plan, rewrite, expire and clean at varied moments.

After every kill the table reads the same rows; the next run of the task succeeds; and the files
the killed runs left behind are taken by the clean step (moved to its quarantine) once they are past the orphan floor.
Two ways to kill: the whole spark-submit process group (what the operator's ``on_kill`` does)
and only the Python driver process (the JVM then loses its application).

The moments are phases of the run, not seconds on a clock: a pilot run of each step on a twin
table, untouched by kills, shows how long this machine spends starting the JVM, in the job before
it writes, writing data files and committing; each kill lands a share of the way into one phase,
measured from when the killed run itself entered it. So every moment lands inside its run on a
fast machine and a slow one alike. (The plan's pilot runs on the table itself: a plan changes
nothing, and its result is the plan the rewrite then takes.)

Before its first write every step's run is the same thing (the JVM's start, then the job's setup),
so each step is killed there by both kinds of kill at least once, not more (tests/BUDGET.md, P3.2);
the rewrite's window from its first data file to its commit, where a rare bug would hide, is swept.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import psutil
import pytest

from demo_data import create_events_table
from airflow_lake_provider.operators.clean import IcebergCleanPolicyOperator
from airflow_lake_provider.operators.expire import IcebergExpireSnapshotsOperator
from airflow_lake_provider.operators.plan import IcebergRewritePlanOperator
from airflow_lake_provider.operators.rewrite import IcebergRewriteDataFilesOperator
import generated_pages
from lake_checks import FakeTaskInstance, age_files, files_on_disk, job_processes, table_fingerprint

pytestmark = [pytest.mark.slow, pytest.mark.spark_submit]
KILLS: list[dict] = []
#: The phases of a run, in order, each named by the event that opens it.
PHASES = ("start", "driver", "data", "metadata")
PHASE_NAMES = {"start": "the JVM's start", "driver": "the job before it writes",
               "data": "writing data files", "metadata": "the commit and after"}


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


@dataclass
class Timeline:
    """Seconds since the task started at which its run entered each phase (None: it never did)."""

    start: float = 0.0
    driver: float | None = None  # the JVM started the Python driver: the job runs
    data: float | None = None  # its first new data file
    metadata: float | None = None  # its first new metadata file (manifests: the commit comes next)
    end: float | None = None  # its Spark application exited (the task's own wrap-up is no phase)

    def length(self, phase: str) -> float:
        """How long the run stayed in ``phase``: until the next phase it entered, or its end."""
        opened = getattr(self, phase)
        assert opened is not None, f"the pilot run never entered the phase {phase!r}: {self}"
        later = [getattr(self, p) for p in (*PHASES, "end") if getattr(self, p) is not None]
        return min(t for t in later if t > opened) - opened


@dataclass(frozen=True)
class Moment:
    """Kill ``how`` (``spark-submit`` or ``driver``) ``share`` of the way into ``phase``, the phase's
    length taken from the pilot run."""

    how: str
    phase: str
    share: float


def files_under(folder: Path) -> set[str]:
    """Files under ``folder``, recursively (Hadoop's ``.NAME.crc`` side files left out); none if it is missing."""
    try:
        entries = list(os.scandir(folder))
    except FileNotFoundError:
        return set()
    found: set[str] = set()
    for entry in entries:
        if entry.is_dir(follow_symlinks=False):
            found |= files_under(Path(entry.path))
        elif not (entry.name.startswith(".") and entry.name.endswith(".crc")):
            found.add(entry.path)
    return found


def run_watched(op, context: dict, table, moment: Moment | None = None, pilot: Timeline | None = None):
    """Run ``op`` in a thread, noting when its run enters each phase; with ``moment``, SIGKILL its
    Spark application there. Returns the run's timeline, the second of the kill (None: never) and
    the task's result (None: it failed).

    The watching is kept cheap, since it competes with the JVM for the cores 20 times a second: a
    folder (``data/``, ``metadata/``) is listed only until its phase opened, and the job's driver
    process is looked up only until it was found."""
    outcome: dict = {}
    root = Path(urlsplit(table.location()).path)
    folders = {phase: root / phase for phase in ("data", "metadata")}
    baseline = {phase: files_under(folder) for phase, folder in folders.items()}
    timeline = Timeline()
    drivers: list[psutil.Process] = []

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
        running = process is not None and process.poll() is None
        if process is not None and not running and timeline.end is None:
            timeline.end = elapsed
        if running and not drivers:
            drivers = job_processes(under=process.pid, drivers_only=True)
            if drivers and timeline.driver is None:
                timeline.driver = elapsed
        for phase, folder in folders.items():
            if getattr(timeline, phase) is None and files_under(folder) - baseline[phase]:
                setattr(timeline, phase, elapsed)
        opened = getattr(timeline, moment.phase) if moment else None
        if opened is not None and running and elapsed >= opened + moment.share * pilot.length(moment.phase):
            if moment.how == "spark-submit":
                op.on_kill()
                killed_at = elapsed
            else:
                for driver in drivers:
                    try:
                        driver.send_signal(signal.SIGKILL)  # psutil checks it is still the driver (no reused pid)
                        killed_at = elapsed
                    except psutil.NoSuchProcess:
                        pass
            if killed_at is not None:
                break
        time.sleep(0.05)
    thread.join(timeout=180)
    if timeline.end is None:
        timeline.end = time.monotonic() - started
    if moment is None:
        assert "result" in outcome, f"the pilot run of {op.task_id} failed: {outcome.get('error')!r}"
        return timeline, None, outcome["result"]
    at = f"{killed_at:.1f}s" if killed_at is not None else "never (it finished first)"
    if killed_at is not None:
        at += f" ({moment.share:.0%} into {PHASE_NAMES[moment.phase]})"
    state = "finished" if "result" in outcome else f"failed: {type(outcome.get('error')).__name__}"
    KILLS.append({"task": op.task_id, "how": moment.how, "at": at, "state": state})
    return timeline, killed_at, outcome.get("result")


def kill_at_each(make_op, task_id: str, table_name: str, lake_hook, moments, pilot: Timeline, fingerprint,
                 undo=None) -> list[Moment]:
    """Run a fresh ``make_op(moment)`` per moment, killed there; read the table back after each. A moment
    the run outlived is tried once more halfway there, after ``undo()`` puts back what the finished
    run changed (nothing can be undone by then for some steps: ``undo`` None). Returns those missed."""
    missed = []
    for moment in moments:
        for attempt in (moment, Moment(moment.how, moment.phase, moment.share / 2)):
            table = lake_hook.load_table(table_name)
            _, killed_at, _ = run_watched(make_op(moment), _context(task_id), table, attempt, pilot)
            assert table_fingerprint(lake_hook.load_table(table_name)) == fingerprint
            if killed_at is not None:
                break
            KILLS.pop()  # the run finished first: not a kill
            if undo is None:
                missed.append(moment)
                break
            undo()
        else:
            missed.append(moment)
    return missed


def test_kills_of_rewrite_expire_and_clean_lose_nothing_and_leave_no_orphans(lake_hook, namespace):
    name, twin = f"{namespace}.events", f"{namespace}.pilot_events"
    for identifier in (name, twin):
        create_events_table(lake_hook.catalog, identifier, days=2, commits_per_day=30, rows_per_commit=10)
    table = lake_hook.load_table(name)
    fingerprint = table_fingerprint(table)
    missed: list[tuple[str, Moment]] = []

    def step(task_id: str, make_op, moments, undo=None, pilot_on: str = twin):
        """The pilot run of ``make_op(pilot_on)`` times the phases; then ``make_op(name, moment)`` is killed at each
        moment. Returns the pilot run's result."""
        pilot, _, result = run_watched(make_op(pilot_on), _context(task_id), lake_hook.load_table(pilot_on))
        missed.extend((task_id, m) for m in kill_at_each(lambda moment: make_op(name, moment), task_id, name, lake_hook, moments,
                                                         pilot, fingerprint, undo))
        return result

    # Plan on the Spark engine: killed while the JVM starts and while it plans; it changes nothing, so its
    # pilot runs on the table itself and gives the plan the rewrite takes. The twin's plan (for the rewrite's
    # pilot) is made by PyIceberg, without a JVM: tests/test_plan_engines.py shows both engines plan alike.
    def plan_op(identifier, moment=None):
        return IcebergRewritePlanOperator(task_id="plan", table=identifier, engine="spark")

    plans = {name: step("plan", plan_op, [Moment("spark-submit", "start", 0.5), Moment("driver", "driver", 0.2)],
                        undo=lambda: None, pilot_on=name)}
    twin_plan = IcebergRewritePlanOperator(task_id="plan", table=twin, engine="pyiceberg")
    plans[twin] = twin_plan.execute(_context("plan"))
    assert plans[name]["totals"]["groups"] >= 1 and plans[twin]["totals"]["groups"] >= 1
    assert plans[name]["snapshot_id"] == lake_hook.load_table(name).current_snapshot().snapshot_id

    # Rewrite: killed while the job plans, then swept across the window from its first data
    # file to its commit and after (the window where a rare bug would hide), by both kinds of kill.
    # A run that outlived its moment committed: rolled back to the planned snapshot, it is tried again.
    def rewrite_op(identifier, moment=None):
        return IcebergRewriteDataFilesOperator(task_id="rewrite", table=identifier, plan=plans[identifier])

    def roll_back_the_rewrite():
        lake_hook.load_table(name).manage_snapshots().rollback_to_snapshot(plans[name]["snapshot_id"]).commit()

    step("rewrite", rewrite_op, [
        Moment("spark-submit", "driver", 0.7),
        Moment("driver", "data", 0.0), Moment("spark-submit", "data", 0.0), Moment("driver", "data", 0.3),
        Moment("spark-submit", "data", 0.6), Moment("driver", "metadata", 0.0), Moment("spark-submit", "metadata", 0.3),
    ], undo=roll_back_the_rewrite)
    result = rewrite_op(name).execute(_context("rewrite"))
    assert result["failed_groups"] == []
    KILLS.append({"task": "rewrite", "how": "next run", "at": "-",
                  "state": "recovered its commit" if result.get("recovered_from_earlier_try") else "rewrote"})
    assert table_fingerprint(lake_hook.load_table(name)) == fingerprint

    # Expire: killed at varied moments, the last ones after its commit (while it deletes files). The
    # first kill after a commit finds its snapshots expired for good, so that run keeps the last ten:
    # the last moment's run has those to expire.
    just_after_commit = Moment("driver", "metadata", 0.0)

    expire_ops = []

    def expire_op(identifier, moment=None):
        expire_ops.append(IcebergExpireSnapshotsOperator(
            task_id="expire", table=identifier, override_table_retention=True,
            engine="spark",  # its job's driver is what is killed
            older_than="0h", retain_last=10 if moment == just_after_commit else 1))
        return expire_ops[-1]

    expired = step("expire", expire_op, [
        Moment("spark-submit", "start", 0.5), Moment("driver", "driver", 0.3),
        just_after_commit, Moment("spark-submit", "metadata", 0.3),
    ])
    # The pilot: Iceberg's ExpireSnapshots in the job's driver JVM, which started no Spark application.
    assert (expired["expired_by"], expire_ops[0]._job_hook.application_id) == ("driver", None), expired
    expire_op(name).execute(_context("expire"))
    assert table_fingerprint(lake_hook.load_table(name)) == fingerprint

    # Clean (with orphan removal at the normal floor): killed, then it succeeds. Each run does the same.
    def clean_op(identifier, moment=None):
        return IcebergCleanPolicyOperator(task_id="clean", table=identifier, retained=1, override_table_retention=True,
                                          orphan_older_than_hours=48, reference_namespaces=[namespace],
                                          engine="spark")  # its policy's expiry inside the killed application

    # As old as production tables are: a live data file past the floor, so the worker cannot rule out
    # orphans and clean's Spark job lists them (its moments below kill it); being live, it is never taken.
    for identifier in (name, twin):
        age_files([next(iter(lake_hook.load_table(identifier).scan().plan_files())).file.file_path], hours=72)
    step("clean", clean_op, [Moment("spark-submit", "start", 0.3), Moment("driver", "driver", 0.8)],
         undo=lambda: None)

    # What the killed runs left behind: on disk, referenced by nothing.
    table = lake_hook.load_table(name)
    leftovers = files_on_disk(table) - referenced_files(table)
    young = clean_op(name).execute({})
    assert young["orphan_file_count"] == 0  # all younger than the floor: kept
    assert leftovers <= files_on_disk(lake_hook.load_table(name))
    # Past the floor (made three days old), the clean step removes exactly them.
    old = time.time() - 72 * 3600
    for path in leftovers:
        os.utime(path, (old, old))
    cleaned = clean_op(name).execute({})
    table = lake_hook.load_table(name)
    assert {urlsplit(p).path for p in cleaned["orphan_files"]} == leftovers
    assert not files_on_disk(table) - referenced_files(table)
    assert not stray_checksums(table)
    assert table_fingerprint(table) == fingerprint

    hits = [k for k in KILLS if k["at"][0].isdigit()]
    assert not missed, (missed, KILLS)  # every moment hit a running application
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
        "sets). Each moment is a share of the way into a phase of the run (the JVM's start, the job before",
        "it writes, writing data files, the commit and after), the phase's length timed by a run of the same",
        "step on a twin table just before. After every kill the table was read back (row count and checksum) and the next run of the",
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
