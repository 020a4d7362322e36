"""The compaction conflict matrix: six races x use-starting-sequence-number x partial progress,
on both catalog databases (SQLite, the embedded lake; PostgreSQL, started by the test setup).
Two races cover what streaming writers leave: an equality delete committed as Flink does (e),
and the merge-on-read UPDATE of (c) on a format v3 table, whose deletes are deletion vectors.

Our rewrite is the job code (``jobs.rewrite.run``) on the shared in-process Spark session; the
other writer is a separate process (:class:`WriterProcess`: PyIceberg for appends, its own Spark
for merge-on-read UPDATE/DELETE, equality deletes and a second compaction). The race is made deterministic:
the rewrite refreshes the table and fixes the snapshot it plans on (B), then - at its first call
of Iceberg's actions API - the other writer commits and the rewrite carries on from B. Iceberg
validates a rewrite against its starting snapshot, so this is exactly "planned on B while
another writer commits C". docs/concurrency.md is written from what the cells observed.
"""

from __future__ import annotations

import datetime as dt
import dataclasses
import json
import os
import re
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from demo_data import create_events_table
from airflow_lake_provider.hooks.lake import IcebergLakeHook
from airflow_lake_provider.jobs import rewriters
from airflow_lake_provider.jobs import iceberg as jobs_iceberg
from airflow_lake_provider.jobs import rewrite as rewrite_job
import generated_pages
from generated_pages import REPO
from lake_checks import live_deletion_vectors, live_files, spark_fingerprint, table_fingerprint

DAY_A, DAY_B = dt.date(2026, 1, 1), dt.date(2026, 1, 2)
CONCURRENT_IDS = 100_000  # event ids of rows the other writer appends

# The other writer: a separate Python process taking one JSON command per line on stdin.
WRITER_SOURCE = r'''
import datetime as dt, json, sys, tempfile, traceback
import os
from airflow_lake_provider.catalog_config import CatalogConfig
from airflow_lake_provider.lake import embedded_catalog_config
from airflow_lake_provider.jars import resolve_classpath
from demo_data import _batch
from pyiceberg.catalog import load_catalog

# The catalog to write to: LAKE_WRITER_CATALOG (CatalogConfig fields as JSON), else the embedded lake.
given = os.environ.pop("LAKE_WRITER_CATALOG", None)
config = CatalogConfig(**json.loads(given)) if given else embedded_catalog_config()
catalog = load_catalog(config.name, **config.pyiceberg_catalog_properties())
spark = None
STAGED = {}

def session():
    global spark
    if spark is None:
        from airflow_lake_provider.jobs.session import local_session
        classpath = resolve_classpath(config.jdbc_driver, s3a=config.spark_uses_s3a)
        spark = local_session(config.spark_catalog_conf(), jars=classpath.jars, packages=classpath.packages,
                              warehouse_dir=tempfile.mkdtemp(prefix="writer-wh-"), app_name="other-writer")
    return spark

def handle(cmd):
    op = cmd["op"]
    if op == "spark":
        session(); return None
    if op == "append":
        table = catalog.load_table(cmd["table"])
        table.append(_batch(cmd["start_id"], cmd["rows"], dt.date.fromisoformat(cmd["day"]), ["a", "b", "c"]))
        return catalog.load_table(cmd["table"]).current_snapshot().snapshot_id
    if op == "stage_files":  # an in-flight writer: data files written, nothing committed yet
        from pyiceberg.io.pyarrow import _dataframe_to_data_files
        table = catalog.load_table(cmd["table"])
        batch = _batch(cmd["start_id"], cmd["rows"], dt.date.fromisoformat(cmd["day"]), ["a", "b", "c"])
        STAGED[cmd["token"]] = list(_dataframe_to_data_files(table.metadata, batch, table.io))
        return [f.file_path for f in STAGED[cmd["token"]]]
    if op == "commit_staged":  # the in-flight writer finishes: commit the files it wrote earlier
        table = catalog.load_table(cmd["table"])
        with table.transaction() as tx:
            with tx.update_snapshot(branch=cmd.get("branch") or "main").fast_append() as append:
                for data_file in STAGED.pop(cmd["token"]):
                    append.append_data_file(data_file)
        return catalog.load_table(cmd["table"]).refs()[cmd.get("branch") or "main"].snapshot_id
    if op == "sql":
        for statement in cmd["statements"]:
            session().sql(statement).collect()
        return catalog.load_table(cmd["table"]).current_snapshot().snapshot_id
    if op == "equality_delete":  # as Flink's upsert writer: an equality delete file committed with RowDelta
        sys.path.insert(0, os.path.join(os.getcwd(), "tests"))
        from equality_deletes import commit_equality_deletes
        return commit_equality_deletes(session(), cmd["table"], cmd["keys"], catalog=config.name,
                                       partition_path=cmd["partition_path"], pyiceberg_table=catalog.load_table(cmd["table"]))
    if op == "rewrite":
        from airflow_lake_provider.jobs import rewrite
        return rewrite.run(session(), config.name, cmd["args"])
    raise ValueError(f"unknown op {op}")

replies, sys.stdout = sys.stdout, sys.stderr  # what the jobs print goes to the log, not into a reply
for line in sys.stdin:
    try:
        reply = {"ok": True, "result": handle(json.loads(line))}
    except Exception as error:
        reply = {"ok": False, "error": f"{type(error).__name__}: {error}", "trace": traceback.format_exc()[-2000:]}
    print(json.dumps(reply, default=str), file=replies, flush=True)
'''


class WriterProcess:
    """Another writer in its own process (PyIceberg, and Spark when asked), on ``catalog`` (a
    :class:`CatalogConfig`; default: the embedded lake)."""

    def __init__(self, catalog=None) -> None:
        self.log = tempfile.NamedTemporaryFile(prefix="other-writer-", suffix=".log", delete=False)
        env = os.environ.copy()
        if catalog is not None:
            env["LAKE_WRITER_CATALOG"] = json.dumps(dataclasses.asdict(catalog))
        self.process = subprocess.Popen(
            [sys.executable, "-c", WRITER_SOURCE], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self.log, text=True, cwd=REPO, env=env,
        )

    def __call__(self, op: str, **args):
        self.process.stdin.write(json.dumps({"op": op, **args}) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"The other writer died; its log: {Path(self.log.name).read_text()[-3000:]}")
        reply = json.loads(line)
        if not reply["ok"]:
            raise RuntimeError(f"The other writer failed: {reply['error']}\n{reply['trace']}")
        return reply["result"]

    def close(self) -> None:
        self.process.stdin.close()
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
        os.unlink(self.log.name)


@pytest.fixture(scope="module")
def writer(lake_hook):
    """The other writer on the embedded lake (SQLite catalog)."""
    lake_hook.catalog  # catalog tables exist before the other process opens them
    process = WriterProcess()
    process("spark")  # start its JVM once
    yield process
    process.close()


@dataclass
class Backend:
    """One catalog database the matrix runs on: its hook (both faces) and the other writer on it."""

    label: str
    hook: IcebergLakeHook
    writer: WriterProcess
    #: Who rewrites (RewriteJobArgs.rewriter): SQLite runs the matrix with Iceberg's Spark action, PostgreSQL
    #: with ``auto``, which takes Arrow on every attempt of a race (a retry applies the other writer's
    #: deletes, deletion vectors on v3). The reading compares their outcomes.
    rewriter: str

    @property
    def catalog(self) -> str:
        """The Spark catalog name (``catalog.namespace.table`` in SQL)."""
        return self.hook.config.name

    def new_table_name(self) -> str:
        namespace = f"m_{uuid.uuid4().hex[:10]}"
        self.hook.catalog.create_namespace(namespace)
        return f"{namespace}.events"


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def backend(request, lake_hook, spark, writer):
    """The embedded lake (SQLite), then a PostgreSQL catalog registered in the shared Spark session."""
    if request.param == "sqlite":
        yield Backend("SQLite", lake_hook, writer, rewriter="iceberg")
        return
    server = request.getfixturevalue("postgres_server")
    warehouse = Path(tempfile.mkdtemp(prefix="lake-pg-matrix-"))
    connection = server.connection(server.create_database(), warehouse, catalog_name="pglake")
    os.environ["AIRFLOW_CONN_LAKE_PG_MATRIX"] = json.dumps(connection)
    hook = IcebergLakeHook("lake_pg_matrix")
    hook.catalog  # PyIceberg creates the catalog tables first (init-catalog-tables=false on the Spark side)
    for key, value in hook.spark_catalog_conf().items():
        if key.startswith(f"spark.sql.catalog.{hook.config.name}"):
            spark.conf.set(key, value)  # catalogs are resolved lazily: a runtime conf registers one
    other = WriterProcess(hook.config)
    other("spark")
    try:
        yield Backend("PostgreSQL", hook, other, rewriter="auto")
    finally:
        other.close()
        os.environ.pop("AIRFLOW_CONN_LAKE_PG_MATRIX", None)


def before_iceberg_acts(monkeypatch, concurrent) -> None:
    """Call ``concurrent()`` each time the rewrite reaches Iceberg after planning on B: its actions API
    (Iceberg's Spark rewriter) or its commit manager (the Arrow rewriter, its files written)."""
    real_actions, real_commit = jobs_iceberg.actions, rewriters.commit_manager

    def actions(spark):
        concurrent()
        return real_actions(spark)

    def commit_manager(*args, **kwargs):
        concurrent()
        return real_commit(*args, **kwargs)

    monkeypatch.setattr(jobs_iceberg, "actions", actions)
    monkeypatch.setattr(rewriters, "commit_manager", commit_manager)


def inject_before_first_action(monkeypatch, concurrent) -> dict:
    """Run ``concurrent()`` once, when the rewrite first reaches Iceberg after planning on B."""
    state: dict = {"calls": 0}

    def once():
        state["calls"] += 1
        if state["calls"] == 1:
            state["result"] = concurrent()

    before_iceberg_acts(monkeypatch, once)
    return state


# -- the four races ---------------------------------------------------------------------------
def _append(backend: Backend, name, day):
    return backend.writer("append", table=name, start_id=CONCURRENT_IDS, rows=20, day=day.isoformat())


def race_append(backend: Backend, name):
    """(a) another writer appends C to partition A."""
    return [_append(backend, name, DAY_A)]


def race_second_compaction(backend: Backend, name):
    """(b) a second compaction, planned on the same snapshot, commits first."""
    result = backend.writer("rewrite", args={"table": name, "options": {"min-input-files": "2"}})
    return result["committed_snapshot_ids"]


def race_mor_update(backend: Backend, name):
    """(c) another writer updates rows of A with merge-on-read position deletes."""
    return [backend.writer("sql", table=name, statements=[
        f"UPDATE {backend.catalog}.{name} SET amount = amount + 1000 WHERE day = DATE '{DAY_A}' AND event_id % 10 = 1"])]


def race_append_then_delete(backend: Backend, name):
    """(d) another writer appends C, then deletes rows of C (merge-on-read)."""
    appended = _append(backend, name, DAY_A)
    deleted = backend.writer("sql", table=name, statements=[
        f"DELETE FROM {backend.catalog}.{name} WHERE event_id >= {CONCURRENT_IDS} AND event_id % 2 = 0"])
    return [appended, deleted]


def race_equality_delete_then_reinsert(backend: Backend, name):
    """(e) as a Flink upsert writer: an equality delete of keys of A, then rows with those keys again."""
    table = backend.hook.load_table(name)
    keys = sorted(row["event_id"] for row in table.scan(selected_fields=("event_id", "day")).to_arrow().to_pylist()
                  if row["day"] == DAY_A and row["event_id"] % 10 == 1)
    deleted = backend.writer("equality_delete", table=name, keys=[{"event_id": key} for key in keys],
                             partition_path=f"day={DAY_A}")
    values = ", ".join(f"({key}, DATE '{DAY_A}', 'upsert', {key + 0.5}, 'new version of {key}')" for key in keys)
    reinserted = backend.writer("sql", table=name, statements=[f"INSERT INTO {backend.catalog}.{name} VALUES {values}"])
    return [deleted, reinserted]


@dataclass(frozen=True)
class Race:
    """What the other writer does while our rewrite runs, on which kind of table, and what Iceberg should do."""

    label: str
    concurrent: Callable[[Backend, str], list[int]]
    # use-starting-sequence-number values with which the first attempt must meet a conflict
    conflicts_with_ssn: frozenset[bool] = frozenset()
    format_version: int = 2
    equality_deletes: bool = False  # PyIceberg 0.12 cannot read the table: Spark alone reads it back
    # (use-starting-sequence-number, partial progress) cells where Iceberg 1.10 brings deleted rows back
    resurrects: frozenset[tuple[bool, bool]] = frozenset()

    @property
    def deletion_vectors(self) -> bool:
        """Format v3: merge-on-read deletes are deletion vectors."""
        return self.format_version >= 3


BOTH = frozenset({True, False})
RACES = {
    "a": Race("append to A", race_append),
    "b": Race("second compaction", race_second_compaction, BOTH),
    "c": Race("merge-on-read UPDATE of A", race_mor_update, BOTH),
    "c-v3": Race("merge-on-read UPDATE of A, format v3 (deletion vectors)", race_mor_update, BOTH,
                 format_version=3),
    "d": Race("append C, then DELETE rows of C", race_append_then_delete),
    # With use-starting-sequence-number=true Iceberg skips the check for new equality deletes, and its
    # single commit of both groups drops the concurrent equality delete as "older than every data
    # file": it ignores that the new files carry the older starting sequence number (apache/iceberg#10962).
    "e": Race("equality DELETE of keys of A (as Flink), then those keys inserted again", race_equality_delete_then_reinsert,
              frozenset({False}), equality_deletes=True, resurrects=frozenset({(True, False)})),
}
CELLS: list[dict] = []
PERSISTENT: dict[tuple[str, str], str] = {}
DEFAULT_RUNS: dict[str, str] = {}  # race (e) with the job's default use-starting-sequence-number


def _iceberg_did(first: dict, rebased: bool) -> str:
    if first["outcome"] == "conflict":
        return f"fail: {first['detail'][:110]}"
    if first["detail"]:
        return f"commit nothing for some groups: {first['detail']} (only logged)"
    if first["outcome"] == "nothing to commit":
        return "commit nothing (no work left)"
    return "retry then commit (rebased on the concurrent commit)" if rebased else "commit"


def equality_delete_reach(spark, qualified: str) -> str:
    """Whether the live equality delete of A still applies to a live data file of A: it does to files
    whose data sequence number is lower than its own (entries' ``sequence_number``)."""
    entries = spark.sql(f"SELECT sequence_number, data_file.content AS content FROM {qualified}.entries "
                        f"WHERE status < 2 AND data_file.partition.day = DATE '{DAY_A}'").collect()
    deletes = [e.sequence_number for e in entries if e.content == 2]
    older = sum(1 for e in entries if e.content == 0 and deletes and e.sequence_number < max(deletes))
    if not deletes:
        return "equality delete dropped"
    return (f"equality delete still applies to {older} data files" if older
            else "equality delete applies to no live file (already applied by the rewrite)")


def read_back(backend: Backend, spark, name: str, race: Race) -> tuple[int, str]:
    """Row count and checksum read by Spark, and by PyIceberg where it can read the table (they must agree)."""
    by_spark = spark_fingerprint(spark, name, catalog=backend.catalog)
    if not race.equality_deletes:
        assert table_fingerprint(backend.hook.load_table(name)) == by_spark
    return by_spark


def run_race(backend: Backend, spark, monkeypatch, scenario: Race, options: dict[str, str]) -> dict:
    """One race: a fresh table, our rewrite planned on B, the other writer committing before it commits.

    Returns the table's name, the planned snapshot, what the other writer committed (its snapshot
    IDs, the rows then read back, its delete files), our result or conflict message, and the rows
    read back at the end.
    """
    lake_hook, name = backend.hook, backend.new_table_name()
    create_events_table(lake_hook.catalog, name, days=2, commits_per_day=6, rows_per_commit=10)
    if scenario.format_version != 2:  # PyIceberg 0.12 writes v2 only: Spark upgrades the table
        spark.sql(f"ALTER TABLE {backend.catalog}.{name} SET TBLPROPERTIES ('format-version' = '{scenario.format_version}')")
        # The first commit after an upgrade gives the files their first row IDs (a table upgraded and never
        # committed to since has none: its rewrite is Iceberg's, tests/test_arrow_rewrite.py).
        jobs_iceberg.load_table(spark, backend.catalog, name).newAppend().commit()
    planned_on = lake_hook.load_table(name).current_snapshot().snapshot_id

    def other_writer():
        snapshot_ids = scenario.concurrent(backend, name)
        written = lake_hook.load_table(name)
        return {"snapshot_ids": snapshot_ids, "committed": read_back(backend, spark, name, scenario),
                "deletion_vectors": live_deletion_vectors(written), "delete_files": live_files(written)}

    state = inject_before_first_action(monkeypatch, other_writer)
    args = {
        "table": name, "planned_snapshot_id": planned_on, "partitions": None,
        "options": {"min-input-files": "2", **options},
        "rewrite_position_deletes": True, "snapshot_properties": {"airflow.task-id": "rewrite"},
        "max_attempts": 3, "retry_backoff_seconds": 0.2, "rewriter": backend.rewriter,
    }
    error = result = None
    try:
        result = rewrite_job.run(spark, backend.catalog, args)
    except rewrite_job.RewriteConflict as conflict:
        error = str(conflict)
    monkeypatch.undo()
    return {"name": name, "planned_on": planned_on, "other": state["result"], "result": result, "error": error,
            "final": read_back(backend, spark, name, scenario)}


@pytest.mark.parametrize("partial", [False, True], ids=["pp-off", "pp-on"])
@pytest.mark.parametrize("starting_seq", [True, False], ids=["ssn-true", "ssn-false"])
@pytest.mark.parametrize("race", sorted(RACES))
def test_compaction_racing_another_writer(backend, spark, monkeypatch, race, starting_seq, partial):
    scenario = RACES[race]
    label = scenario.label
    outcome = run_race(backend, spark, monkeypatch, scenario, {
        "partial-progress.enabled": str(partial).lower(), "use-starting-sequence-number": str(starting_seq).lower()})
    lake_hook, name, planned_on = backend.hook, outcome["name"], outcome["planned_on"]
    other = outcome["other"]
    result, error, final = outcome["result"], outcome["error"], outcome["final"]
    table = lake_hook.load_table(name)
    committed = other["committed"]
    # No row lost or resurrected: the table holds exactly what the writers committed, except in the
    # cells where Iceberg 1.10 is known to resurrect rows (see Race.resurrects); there it must still do so.
    known_loss = (starting_seq, partial) in scenario.resurrects
    assert (final != committed) == known_loss, (final, committed)
    if scenario.deletion_vectors:  # the other writer's deletes were deletion vectors, and only those
        written = other["delete_files"]
        assert other["deletion_vectors"] > 0 and written["POSITION_DELETES"] == other["deletion_vectors"]
    if scenario.equality_deletes:
        assert other["delete_files"]["EQUALITY_DELETES"] == 1
    history = [s.snapshot_id for s in table.snapshots()]
    concurrent_ids = other["snapshot_ids"]
    assert all(sid in history for sid in concurrent_ids)
    cell = {"backend": backend.label, "rewriter": backend.rewriter, "race": race, "label": label, "ssn": starting_seq, "partial": partial,
            "final_rows": final[0], "lost": final != committed}
    if error is not None:
        # A failure says what happened and what to do, in plain words.
        assert "conflicted with another writer" in error and "What to do" in error
        cell.update(iceberg="fail on every attempt", ours=f"task fails: {error[:200]}...", attempts=[])
    else:
        attempts = result["attempts"]
        first = attempts[0]
        assert first["starting_snapshot_id"] == planned_on  # the race did happen: planned on B
        if backend.rewriter == "auto":  # Arrow, a retry applying the other writer's deletes (DVs on v3)
            assert result["rewriter"] == "arrow", result["rewriter_note"]
        ours = result["committed_snapshot_ids"]
        assert not set(ours) & set(concurrent_ids)  # another writer's snapshot is never reported as ours
        for sid in ours:
            assert table.snapshot_by_id(sid).summary["airflow.task-id"] == "rewrite"
        assert result["snapshot_id_before"] == planned_on and result["snapshot_id_after"] == table.current_snapshot().snapshot_id
        # Never success for dropped groups: a drop is retried, or reported in failed_groups.
        data_attempts = [a for a in attempts if a["stage"] == "rewrite data files"]
        if data_attempts[-1]["detail"]:
            assert result["failed_groups"]
        replaces = [sid for sid in ours if table.snapshot_by_id(sid).summary.operation.value == "replace"]
        rebased = bool(replaces) and table.snapshot_by_id(replaces[0]).parent_snapshot_id != planned_on
        retries = "; ".join(f"attempt {a['attempt']}: {a['outcome']}" + (f" ({a['detail'][:70]})" if a["detail"] else "")
                            for a in data_attempts)
        cell.update(
            iceberg=_iceberg_did(first, rebased),
            ours=(f"success: {result['rewritten_data_files']} files -> {result['added_data_files']}, "
                  f"{len(result['failed_groups'])} failed groups, {len(ours)} commits [{retries}]"),
            attempts=attempts,
        )
        if starting_seq not in scenario.conflicts_with_ssn:
            assert rebased and result["failed_groups"] == [] and len(data_attempts) == 1
    # Iceberg's validation: whether the first attempt met a conflict (failed, or dropped groups).
    met_conflict = error is not None or bool(cell["attempts"][0]["outcome"] == "conflict" or cell["attempts"][0]["detail"])
    assert met_conflict == (starting_seq in scenario.conflicts_with_ssn)
    after = live_files(table)
    cell["note"] = ""
    if scenario.deletion_vectors:
        if error is None and not result["failed_groups"]:
            assert live_deletion_vectors(table) == 0 == after["POSITION_DELETES"]  # applied, then dropped with their files
        cell["note"] = f"; deletion vectors after: {live_deletion_vectors(table)}"
    if scenario.equality_deletes:
        reach = equality_delete_reach(spark, f"{backend.catalog}.{name}")
        if starting_seq and not known_loss:  # the rewritten files kept the old data sequence number
            assert reach.startswith("equality delete still applies")
        if known_loss:
            assert reach == "equality delete dropped"
        cell["note"] = f"; {reach}"
    cell["rows"] = committed[0]
    cell["files_after"] = after["DATA"]
    CELLS.append(cell)


def test_by_default_rows_an_equality_delete_removed_stay_deleted(backend, spark, monkeypatch):
    """Race (e) in the cell where Iceberg's default resurrects rows, with the job's own default
    (use-starting-sequence-number unset): the delete is a conflict, and the retry applies it."""
    outcome = run_race(backend, spark, monkeypatch, RACES["e"], {"partial-progress.enabled": "false"})
    assert outcome["final"] == outcome["other"]["committed"]
    first, *later = [a for a in outcome["result"]["attempts"] if a["stage"] == "rewrite data files"]
    assert first["outcome"] == "conflict" and "found new delete for replaced data file" in first["detail"]
    assert [a["outcome"] for a in later] == ["committed"] and outcome["result"]["failed_groups"] == []
    DEFAULT_RUNS[backend.label] = (f"{outcome['final'][0]} rows (checksum equal); attempt 1: conflict "
                                   f"({first['detail'][:60]}...), attempt 2: committed")


@pytest.mark.parametrize("partial", [False, True], ids=["pp-off", "pp-on"])
def test_a_conflict_on_every_attempt_is_reported_never_hidden(backend, spark, monkeypatch, partial):
    """The other writer updates A before each of the two attempts: bounded retries, then a plain failure."""
    lake_hook, name = backend.hook, backend.new_table_name()
    create_events_table(lake_hook.catalog, name, days=2, commits_per_day=6, rows_per_commit=10)
    planned_on = lake_hook.load_table(name).current_snapshot().snapshot_id
    calls = {"n": 0}

    def update_a():
        calls["n"] += 1
        if calls["n"] <= 2:
            race_mor_update(backend, name)
            calls["committed"] = table_fingerprint(lake_hook.load_table(name))

    before_iceberg_acts(monkeypatch, update_a)
    args = {"table": name, "planned_snapshot_id": planned_on, "partitions": None,
            "options": {"min-input-files": "2", "partial-progress.enabled": str(partial).lower()},
            "rewrite_position_deletes": False, "max_attempts": 2, "retry_backoff_seconds": 0.1,
            "rewriter": backend.rewriter}
    if partial:
        result = rewrite_job.run(spark, backend.catalog, args)
        data = [a["outcome"] for a in result["attempts"] if a["stage"] == "rewrite data files"]
        assert data == ["committed", "nothing to commit"]
        assert [g["partition"] for g in result["failed_groups"]] == [f"day={DAY_A}"]  # reported: the task fails
        PERSISTENT[(backend.label, "on")] = f"returns failed_groups {result['failed_groups']} (the operator then fails the task)"
    else:
        with pytest.raises(rewrite_job.RewriteConflict) as raised:
            rewrite_job.run(spark, backend.catalog, args)
        message = str(raised.value)
        assert "conflicted with another writer's commit on all 2 attempts" in message
        assert "found new" in message and "This run changed nothing in the table." in message
        assert "run the task again later" in message and "partial-progress.enabled" in message
        PERSISTENT[(backend.label, "off")] = f"fails: {message}"
    monkeypatch.undo()
    assert table_fingerprint(lake_hook.load_table(name)) == calls["committed"]


CELLS_PER_BACKEND = 4 * len(RACES)


@pytest.fixture(scope="module", autouse=True)
def concurrency_doc():
    yield
    if len(CELLS) == 2 * CELLS_PER_BACKEND:  # the whole matrix ran: write what it observed
        generated_pages.save("concurrency", {"cells": CELLS, "persistent": {"|".join(k): v for k, v in PERSISTENT.items()},
                                             "default_runs": DEFAULT_RUNS})


def _plain(text: str) -> str:
    """A cell's text without file paths (they differ per run and per backend)."""
    text = re.sub(r"GenericDataFile\{[^;)]*", "{data-file}", text)
    text = re.sub(r"\bm_[0-9a-f]{10}\.", "{namespace}.", text)
    return re.sub(r"file:/[^\s,;)}]*", "{path}", text).replace("|", "/")


def _rows(cell: dict) -> str:
    if cell["lost"]:
        return (f"**{cell['final_rows']}: {cell['final_rows'] - cell['rows']:+d} rows, DELETED ROWS RESURRECTED** "
                f"(the writers committed {cell['rows']}{cell['note']})")
    return f"{cell['rows']} (checksum equal{cell['note']})"


def _first_outcomes(cells: list[dict], race: str, ssn: bool, *, kind_only: bool = False) -> str:
    """What Iceberg did on the first attempt in a race's cells with one use-starting-sequence-number
    value, without and with partial progress (``kind_only``: fail / commit nothing / commit, no message)."""
    def seen(partial: bool) -> str:
        texts = {_plain(c["iceberg"]).split(" (")[0].split(": {")[0] for c in cells
                 if c["race"] == race and c["ssn"] == ssn and c["partial"] == partial}
        return " / ".join(sorted(t.split(":")[0] if kind_only else t for t in texts))
    return f"without partial progress \"{seen(False)}\", with it \"{seen(True)}\""


def doc(cells: list[dict], persistent: dict[tuple[str, str], str], default_runs: dict[str, str]) -> str:
    """docs/concurrency.md from the observed cells, the persistent-conflict outcomes and race (e) with
    the job's defaults (``make docs``: a fresh process, so everything comes in as arguments)."""
    backends = sorted({c["backend"] for c in cells}, key=lambda b: b != "SQLite")
    rewriters = {c["backend"]: c.get("rewriter", "iceberg") for c in cells}
    lost = [c for c in cells if c["lost"]]
    lines = [
        "# Compaction racing other writers: the observed matrix",
        "",
        "<!-- GENERATED by `make docs` from what tests/test_concurrency_matrix.py observed; do not edit by hand. -->",
        "",
        "Each cell is a real race on one table (2 day partitions A and B, 6 small files each): our rewrite",
        "(`airflow_lake_provider.jobs.rewrite.run`, in-process Spark) plans on snapshot B, then another",
        "process commits (PyIceberg for appends, a second Spark for merge-on-read UPDATE/DELETE, equality",
        "deletes and the second compaction) before the rewrite commits. The rewrite runs with `max_attempts=3`.",
        "\"Iceberg did\" is the first attempt; \"our rewrite reported\" is the task's final result.",
        "Race (e) commits an equality delete file of 6 keys of A the way Flink's upsert writer does (Parquet",
        "with field IDs, Java `RowDelta`), then inserts rows with those keys again. Race (c-v3) is (c) on a",
        "format v3 table (written as v2 by PyIceberg, which cannot write v3, then upgraded by Spark and",
        "committed to once, which gives its rows their IDs): the UPDATE's deletes are deletion vectors.",
        f"The matrix runs once per catalog database ({' and '.join(backends)}, the latter started by the",
        "test setup on 127.0.0.1), each with one rewriter: "
        + ", ".join(f"{label} with `rewriter='{rewriters[label]}'`" for label in backends)
        + " (`iceberg`: Iceberg's Spark action; `auto`: the Arrow rewriter, Iceberg's planner and commit with"
        " Arrow's Parquet, on every attempt of a race, a retry applying the other writer's deletes, deletion"
        " vectors on v3). Rows are read back by Spark in every cell, and by PyIceberg too (the two",
        "must agree) except for (e): PyIceberg 0.12 cannot read equality deletes. "
        + ("In every cell the table's row count and checksum equal those of what the writers committed."
           if not lost else f"In all cells but {len(lost)} the table's row count and checksum equal those of what"
                            " the writers committed; see the first point of the reading."),
    ]
    for label in backends:
        mine = sorted((c for c in cells if c["backend"] == label), key=lambda c: (c["race"], not c["ssn"], c["partial"]))
        lines += [
            "",
            f"## {label} catalog, rewriter `{rewriters[label]}`",
            "",
            "| race | use-starting-sequence-number | partial-progress | Iceberg did | our rewrite reported | rows |",
            "|---|---|---|---|---|---|",
        ]
        for cell in mine:
            lines.append(f"| ({cell['race']}) {cell['label']} | {str(cell['ssn']).lower()} | "
                         f"{str(cell['partial']).lower()} | {_plain(cell['iceberg'])} | {_plain(cell['ours'])} | "
                         f"{_rows(cell)} |")
    outcome = {label: [(c["race"], c["ssn"], c["partial"], c["iceberg"].split(":")[0], c["lost"]) for c in
                       sorted((c for c in cells if c["backend"] == label), key=lambda c: (c["race"], c["ssn"], c["partial"]))]
               for label in backends}
    same = len({tuple(v) for v in outcome.values()}) == 1
    conflicted = sum(1 for c in cells if c["iceberg"].startswith(("fail", "commit nothing")))
    ssn_matters = sorted({c["race"] for c in cells if _first_outcomes(cells, c["race"], True, kind_only=True)
                          != _first_outcomes(cells, c["race"], False, kind_only=True)} | {c["race"] for c in lost})
    lines += ["", "## Reading", ""]
    if lost:
        where = ", ".join(f"({race}) use-starting-sequence-number={str(ssn).lower()}, partial progress {str(pp).lower()}"
                          for race, ssn, pp in sorted({(c["race"], c["ssn"], c["partial"]) for c in lost}))
        lines += [
            f"- **Rows resurrected in {len(lost)} cells**: {where}; on {' and '.join(sorted({c['backend'] for c in lost}))}.",
            "  With `use-starting-sequence-number=true` Iceberg does not check for equality deletes committed",
            "  during the rewrite (the new files keep the starting snapshot's data sequence number, so such a",
            "  delete should still apply to them). But its commit then",
            "  drops every delete file older than the oldest data sequence number of the files it keeps, and that",
            "  minimum ignores the files it adds: once the re-insert left only newer files besides the rewritten",
            "  ones, the equality delete was dropped and the deleted rows came back (Iceberg 1.10.2; the fix,",
            "  apache/iceberg#10962, is not released). With partial progress each group commits alone, the other",
            "  partition's rewritten files keep the minimum low, and the delete survived: luck, not a guarantee.",
            "  **Our rewrite therefore defaults to `use-starting-sequence-number=false`** (`SAFE_OPTION_DEFAULTS` in",
            "  `jobs/rewrite.py`; the operator's `use_starting_sequence_number` is false unless set): the",
            "  concurrent equality delete is then a conflict, and the retry, planned on the current snapshot,",
            "  applies it while rewriting. Race (e) run with that default:",
        ]
        lines += [f"  - {label}: {_plain(default_runs.get(label, 'not run'))}" for label in backends]
    lines += [
        f"- {len(cells)} cells reproduced ({CELLS_PER_BACKEND} per catalog database), rows lost or resurrected in"
        f" {len(lost)}. {conflicted} cells met a real conflict on the first attempt.",
        "- Neither the catalog database nor the rewriter " + (
            "changed any outcome: Iceberg's conflict detection is the same whichever database holds the catalog's"
            " pointer, and the Arrow rewriter commits through the same Iceberg commit as the Spark action."
            if same else "changed some outcomes: compare the tables above."),
        "- Appends (a, and the append of d) never conflict with a rewrite: Iceberg refreshes, finds no",
        "  conflicting change, and commits on top of the other writer's snapshot (\"retry then commit\").",
        "  A delete of rows in files the rewrite does not replace (d) does not conflict either.",
        "- A merge-on-read UPDATE of files being rewritten (c) or a second compaction (b) conflicts. Without",
        "  partial progress Iceberg fails the whole rewrite; with it, Iceberg only logs the dropped groups.",
        "  Our rewrite finds dropped groups itself (it plans the groups before the rewrite and compares),",
        "  plans the same partitions again from the current snapshot and retries (bounded backoff); what is",
        "  still missing after the last attempt is reported in `failed_groups` and fails the task.",
        "- Deletion vectors (c-v3) " + ("conflict exactly as position deletes (c) do"
                                        if all(_first_outcomes(cells, "c", ssn) == _first_outcomes(cells, "c-v3", ssn)
                                               for ssn in (True, False)) else "differ from position deletes (c)")
        + ". With use-starting-sequence-number true:",
        f"  {_first_outcomes(cells, 'c-v3', True)};",
        f"  false: {_first_outcomes(cells, 'c-v3', False)}.",
        "  The retry applied them, and they were dropped with the files they covered (deletion vectors",
        "  after: 0 in every cell with no failed group).",
        "- An equality delete (e) is seen by Iceberg's check only with use-starting-sequence-number false:",
        f"  {_first_outcomes(cells, 'e', False)};",
        f"  true: {_first_outcomes(cells, 'e', True)}.",
        "  Where no row came back, the checksum shows both sides of an upsert: deleted rows stay deleted,",
        "  rows re-inserted with the same keys stay visible.",
        "- A writer that conflicts on every attempt (the UPDATE of A before each of 2 attempts):",
    ]
    for label in backends:
        lines += [
            f"  - {label}, partial progress off: {_plain(persistent.get((label, 'off'), 'not run'))}",
            f"  - {label}, partial progress on: {_plain(persistent.get((label, 'on'), 'not run'))}",
        ]
    lines += [
        "- `use-starting-sequence-number` changed what Iceberg did in race(s) "
        f"{', '.join(f'({r})' for r in ssn_matters) or 'none'} only: it decides which data sequence",
        "  number the new files get, and so whether Iceberg checks for equality deletes committed meanwhile;",
        "  position deletes and deletion vectors are checked either way (only the message differs).",
    ]
    return "\n".join(lines) + "\n"
