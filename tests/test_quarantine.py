"""Quarantine instead of delete: the clean step moves orphans aside, a restore brings them back.

* The issue's scenario: a writer's in-flight file older than the floor is taken as an orphan,
  the writer then commits it and the table cannot read it; the restore puts it back and the
  table reads every row again (the same count and checksum as written).
* A purge removes only the runs past ``quarantine_days``; ``quarantine_days=0`` deletes at once.
* Bad settings are refused before any JVM starts; the operators (clean, then restore) run it
  through spark-submit.

Jobs run in the shared Spark session (seconds each), the operators once.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import generated_pages

from demo_data import _batch, create_events_table
from lake_checks import FakeTaskInstance, age_files, files_on_disk, local_path, rows_fingerprint, table_fingerprint
from test_kills import stray_checksums

from airflow_lake_provider.core.contracts import AirflowRun, CleanJobArgs, RestoreQuarantineJobArgs
from airflow_lake_provider.core.quarantine import DAY_MS, quarantine_root
from airflow_lake_provider.exceptions import LakeConfigError
from airflow_lake_provider.jobs import clean, restore_quarantine

FLOOR_HOURS = 24
RUN = AirflowRun(dag_id="tests", run_id="manual__quarantine", task_id="clean", try_number=1)


def _clean(spark, name: str, **args) -> dict:
    """The clean job, orphans only (nothing to expire), with the floor at ``FLOOR_HOURS``. References are
    checked in the test's own namespace: the session's catalog holds every test's tables."""
    cutoff = int((time.time() - FLOOR_HOURS * 3600) * 1000)
    args.setdefault("reference_namespaces", [name.split(".")[0]])
    return clean.run(spark, "lake", CleanJobArgs(table=name, orphan_older_than_ms=cutoff, airflow_run=RUN,
                                                 **args).to_json())


def _restore(spark, name: str, run: str | None, **args) -> dict:
    return restore_quarantine.run(spark, "lake", RestoreQuarantineJobArgs(table=name, quarantine_run=run,
                                                                          **args).to_json())


def _in_flight_files(table, start_id: int, rows: int):
    """A writer's data files, written but not committed: PyIceberg's own writer, as an appender uses it."""
    from pyiceberg.io.pyarrow import _dataframe_to_data_files

    batch = _batch(start_id, rows, dt.date(2026, 1, 1), ["a", "b", "c"])
    return list(_dataframe_to_data_files(table.metadata, batch, table.io)), batch


def _commit(table, data_files) -> None:
    with table.transaction() as tx:
        with tx.update_snapshot().fast_append() as append:
            for data_file in data_files:
                append.append_data_file(data_file)


def _quarantine_root(table) -> Path:
    return Path(local_path(quarantine_root(table.location(), "x.events")))


def test_a_wrongly_taken_in_flight_file_is_restored_and_the_table_reads_it_again(spark, lake_hook, namespace):
    name = f"{namespace}.events"
    table = create_events_table(lake_hook.catalog, name, days=1, commits_per_day=3, rows_per_commit=10)
    committed_rows = table.scan().to_arrow().to_pylist()
    staged, batch = _in_flight_files(table, start_id=5000, rows=7)
    staged_paths = {local_path(f.file_path) for f in staged}
    sizes = {path: os.path.getsize(path) for path in staged_paths}
    # The writer is slow: its files are older than the floor when the clean step lists them.
    age_files(staged_paths, hours=FLOOR_HOURS + 2)
    mtimes = {path: int(os.path.getmtime(path) * 1000) for path in staged_paths}

    result = _clean(spark, name)
    assert result["orphan_file_count"] == len(staged) == result["quarantined_file_count"]
    run = result["quarantine_run"]
    assert run.endswith(tuple("0123456789abcdef")) and "tests.clean" in run
    # Gone from the table location, present in quarantine under the same relative path.
    on_disk = files_on_disk(lake_hook.load_table(name))
    assert not staged_paths & on_disk and not stray_checksums(table)
    root = _quarantine_root(table)
    location = Path(local_path(table.location()))
    assert not root.is_relative_to(location)
    for path in staged_paths:
        assert (root / run / "files" / Path(path).relative_to(location)).is_file()
    manifest = json.loads(Path(local_path(result["quarantine_manifest"])).read_text())
    assert manifest["table"] == name and manifest["run_key"] == run
    assert manifest["airflow_run"] == RUN.to_json()
    assert {local_path(f["original_path"]): (f["size"], f["modified_ms"]) for f in manifest["files"]} == \
        {path: (sizes[path], mtimes[path]) for path in staged_paths}

    # The writer commits: the table now names files that are not there.
    _commit(lake_hook.load_table(name), staged)
    with pytest.raises(Exception, match="(?i)not found|no such file"):
        lake_hook.load_table(name).scan().to_arrow()

    restored = _restore(spark, name, run)
    assert restored["restored_count"] == len(staged) and restored["skipped"] == {}
    assert {local_path(p) for p in restored["restored"]} == staged_paths
    assert not stray_checksums(table)
    expected = rows_fingerprint(committed_rows + batch.to_pylist())
    assert table_fingerprint(lake_hook.load_table(name)) == expected and expected[0] == 37
    # A restored file counts as new for the floor: the next clean leaves it (and it is referenced anyway).
    assert all(time.time() - os.path.getmtime(path) < 600 for path in staged_paths)

    # Restoring again overwrites nothing: every file is skipped with its reason.
    again = _restore(spark, name, result["quarantine_manifest"])
    assert again["restored_count"] == 0 and set(again["skipped"].values()) == {restore_quarantine.NOT_OVERWRITTEN}
    # Listing: the run is there, with what it moved.
    listed = _restore(spark, name, None)["runs"]
    assert listed[run]["files"] == len(staged) and listed[run]["airflow_run"]["task_id"] == "clean"
    generated_pages.save_figure("quarantine", (
        f"Quarantine: a writer's in-flight files ({len(staged)}) taken as orphans were moved, not deleted; after the "
        f"writer's commit the table could not be read; one restore brought them back and it read all {expected[0]} "
        "rows with the written checksum (`tests/test_quarantine.py`)"))


def test_purge_removes_only_the_runs_past_their_days_and_zero_days_deletes_at_once(spark, lake_hook, namespace):
    name = f"{namespace}.events"
    table = create_events_table(lake_hook.catalog, name, days=1, commits_per_day=2, rows_per_commit=5)
    fingerprint = table_fingerprint(table)
    runs = []
    for start in (100, 200):
        staged, _ = _in_flight_files(table, start_id=start, rows=3)
        age_files([f.file_path for f in staged], hours=FLOOR_HOURS + 2)
        runs.append(_clean(spark, name)["quarantine_run"])
    old, young = runs
    assert old < young  # run keys sort by time
    root = _quarantine_root(table)
    # The first run was moved 8 days ago (its manifest says so), the second just now.
    manifest_path = root / old / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["moved_at_ms"] -= 8 * DAY_MS
    manifest_path.write_text(json.dumps(manifest))

    dry = _clean(spark, name, dry_run=True)
    assert dry["purged_runs"] == [old] and dry["purged_file_count"] == 1 and (root / old).is_dir()
    purged = _clean(spark, name)
    assert purged["purged_runs"] == [old] and purged["purged_file_count"] == 1
    assert purged["quarantine_run"] is None  # no orphans left to take
    assert not (root / old).exists() and (root / young / "files").is_dir()
    assert _clean(spark, name, quarantine_days=7)["purged_runs"] == []  # 7 days: the young run stays

    # quarantine_days=0: today's behaviour, orphans deleted at once; every run left is purged too.
    staged, _ = _in_flight_files(table, start_id=300, rows=3)
    age_files([f.file_path for f in staged], hours=FLOOR_HOURS + 2)
    at_once = _clean(spark, name, quarantine_days=0)
    assert at_once["orphan_file_count"] == 1 and at_once["quarantine_run"] is None
    assert at_once["purged_runs"] == [young]
    assert not any(os.path.exists(local_path(f.file_path)) for f in staged)
    assert not root.exists() or not any(root.iterdir())
    assert not stray_checksums(table)
    assert table_fingerprint(lake_hook.load_table(name)) == fingerprint


@pytest.mark.parametrize(("operator", "given", "message"), [
    ("clean", {"quarantine_days": -1}, "quarantine_days must be a number of days >= 0"),
    ("clean", {"quarantine_days": "a week"}, "quarantine_days must be a number"),
    ("clean", {"quarantine_location": "{location}/quarantine"}, "is inside the location of table"),
    ("clean", {"quarantine_location": "{location}_quarantine"}, "or begins with its name"),
    ("clean", {"quarantine_location": "quarantine"}, "must be an absolute path or URI"),
    ("restore", {"quarantine_run": "../../data"}, "quarantine_run must be a quarantine run key"),
    ("restore", {"quarantine_location": "{location}/q", "quarantine_run": None}, "is inside the location of table"),
])
def test_bad_quarantine_settings_are_refused_before_spark(lake_hook, namespace, bad_input, operator, given, message):
    from airflow_lake_provider.operators.clean import IcebergCleanPolicyOperator
    from airflow_lake_provider.operators.restore import IcebergRestoreQuarantineOperator

    name = f"{namespace}.events"
    table = create_events_table(lake_hook.catalog, name, days=1, commits_per_day=2, rows_per_commit=5)
    before = table_fingerprint(table), table.current_snapshot().snapshot_id, files_on_disk(table)
    given = {k: (v.replace("{location}", table.location()) if isinstance(v, str) else v) for k, v in given.items()}
    kind = IcebergCleanPolicyOperator if operator == "clean" else IcebergRestoreQuarantineOperator
    task = None
    with pytest.raises(LakeConfigError, match=message) as raised:  # at construction (a parse) or at execute
        task = kind(task_id=operator, table=name, **given)
        task.execute({"ti": FakeTaskInstance(task_id=operator)})
    assert task is None or task._job_hook is None  # no Spark application was started
    table = lake_hook.load_table(name)
    assert (table_fingerprint(table), table.current_snapshot().snapshot_id, files_on_disk(table)) == before
    bad_input(kind.__name__, ", ".join(f"{k}={v!r}" for k, v in given.items()), raised.value, table_checked=True)


@pytest.mark.spark_submit
def test_the_operators_quarantine_then_restore_through_spark_submit(lake_hook, namespace, tmp_path):
    """The Airflow face: the clean operator quarantines into a configured location, the hand
    command (the restore operator outside any DAG), handed the clean result's run, brings the file
    back and the table reads it."""
    from airflow_lake_provider.operators.clean import IcebergCleanPolicyOperator

    name = f"{namespace}.events"
    table = create_events_table(lake_hook.catalog, name, days=1, commits_per_day=2, rows_per_commit=5)
    staged, batch = _in_flight_files(table, start_id=900, rows=4)
    age_files([f.file_path for f in staged], hours=FLOOR_HOURS + 2)
    expected = rows_fingerprint(table.scan().to_arrow().to_pylist() + batch.to_pylist())
    where = f"file://{tmp_path}/quarantine"

    ti = FakeTaskInstance(dag_id="lake_maintenance", run_id="manual__q", task_id="clean")
    cleaned = IcebergCleanPolicyOperator(task_id="clean", table=name, retained=5, orphan_older_than_hours=FLOOR_HOURS,
                                         quarantine_location=where, quarantine_days="3",
                                         reference_namespaces=[namespace]).execute({"ti": ti})
    assert cleaned["quarantined_file_count"] == 1 and cleaned["quarantine_days"] == 3
    assert cleaned["quarantine_manifest"].startswith(f"{where}/{namespace}/events/{cleaned['quarantine_run']}/")
    assert not os.path.exists(local_path(staged[0].file_path))
    _commit(lake_hook.load_table(name), staged)  # the slow writer commits the file the clean step took

    # The documented hand command (docs/operators/restore.md): the restore operator outside any DAG.
    hand = subprocess.run([sys.executable, "-m", "airflow_lake_provider.operators.restore", name,
                           cleaned["quarantine_run"], "--quarantine-location", where],
                          capture_output=True, text=True, timeout=300, env=os.environ.copy())
    assert hand.returncode == 0, hand.stderr[-3000:]
    restored = json.loads(hand.stdout[hand.stdout.rindex("\n{\n") + 1:] if not hand.stdout.startswith("{")
                          else hand.stdout)
    assert restored["restored_count"] == 1 and restored["quarantine_run"] == cleaned["quarantine_run"]
    assert table_fingerprint(lake_hook.load_table(name)) == expected and expected[0] == 14


# -- the pure decisions (no Spark) -------------------------------------------------------------


def test_quarantine_locations_keep_paths_exact_whatever_the_spelling_of_the_store():
    from airflow_lake_provider.core.quarantine import quarantined_path

    run = "20261123T211530123Z-dag.clean-1a2b3c4d"
    assert quarantine_root("file:///wh/db.db/events", "db.events") == "file:///wh/db.db/.lake-quarantine/events"
    assert quarantine_root("s3://b/wh/db/events/", "db.events", "s3a://ops/q/") == "s3a://ops/q/db/events"
    # Iceberg's listing names local files file:/..., S3 ones s3:// while the table may say s3a://.
    assert quarantined_path("/q", run, "file:///wh/db.db/events", "file:/wh/db.db/events/data/d=1/x.parquet") \
        == f"/q/{run}/files/data/d=1/x.parquet"
    assert quarantined_path("s3://q", run, "s3a://b/events", "s3://b/events/metadata/m.avro") \
        == f"s3://q/{run}/files/metadata/m.avro"
    with pytest.raises(LakeConfigError, match="not under the table location"):
        quarantined_path("/q", run, "s3://b/events", "s3://b/events_old/data/x.parquet")
    # A shared root whose table path would be the table location itself (a REST catalog's ns/table layout).
    with pytest.raises(LakeConfigError, match="overlaps the table's location"):
        quarantine_root("s3://tables/db/events", "db.events", "s3://tables")
    with pytest.raises(LakeConfigError, match="no parent for the default quarantine"):
        quarantine_root("s3://bucket", "db.events")


def test_purge_decision_and_run_keys():
    from airflow_lake_provider.core.quarantine import run_key, run_key_time_ms, runs_to_purge

    now = 1_795_000_000_000
    first, second = run_key(now - 8 * DAY_MS, RUN), run_key(now - 6 * DAY_MS, RUN)
    assert first < second and run_key_time_ms(first) == now - 8 * DAY_MS
    assert run_key(now, RUN) != run_key(now, AirflowRun(**{**RUN.to_json(), "try_number": 2}))
    runs = {first: None, second: now - 6 * DAY_MS, "not-a-run": 0}
    assert runs_to_purge(runs, 7, now) == [first]  # no manifest: the key's own time counts
    assert runs_to_purge(runs, 5.5, now) == [first, second]
    assert runs_to_purge(runs, 0, now) == [first, second]  # never a directory that is not a run
    assert runs_to_purge({second: now - 8 * DAY_MS}, 7, now) == [second]  # the manifest's moved_at decides
