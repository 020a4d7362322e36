"""The clean step's shortcut: no Spark job when no file under the table location is older than
the orphan floor. Iceberg's own listing (the shared session) is the judge: the worker may only
say "nothing old" where Iceberg finds no orphan, and must say "look" for any aged file, taken or
not (it cannot tell an aged live file from an orphan without the metadata)."""

from __future__ import annotations

import time
from pathlib import Path

from demo_data import create_events_table
from lake_checks import age_files, files_on_disk, local_path

from airflow_lake_provider.core.orphan_precheck import find_file_older_than, quarantine_purge_due
from airflow_lake_provider.core.quarantine import access_denied, quarantine_root, run_key
from airflow_lake_provider.jobs import iceberg
from airflow_lake_provider.jobs.orphan_listing import list_with_spark_action
from airflow_lake_provider.steps.clean import CleanStep
from airflow_lake_provider.steps.runner import CatalogTable, run_step

HOUR_MS = 3_600_000


def test_the_worker_skips_only_what_icebergs_listing_finds_empty(spark, lake_hook, namespace):
    name = f"{namespace}.events"
    table = create_events_table(lake_hook.catalog, name, days=2, commits_per_day=3, rows_per_commit=5)
    cutoff = int(time.time() * 1000) - 72 * HOUR_MS
    jtable = iceberg.load_table(spark, "lake", name)

    def both():
        return find_file_older_than(table.io, table.location(), cutoff), list_with_spark_action(spark, jtable, cutoff)

    # A new table: nothing is old, Iceberg finds nothing; every file was looked at (checksums too).
    listing, candidates = both()
    assert listing.nothing_old and candidates == []
    assert listing.seen >= len(files_on_disk(table)) > 10

    # The clean step through the Airflow-free runner: no job at all, and the log says why.
    def no_job(args):
        raise AssertionError(f"a Spark job was started: {args}")

    run = run_step(CleanStep(table=name), CatalogTable(lake_hook.catalog, name), None, no_job)
    assert run.result.orphan_file_count == 0 and run.result.orphan_older_than_ms is not None
    assert run.outcome.summary.startswith("nothing to clean: every snapshot kept, none of the")

    # A dead writer's file deep in a partition, aged past the floor: both see it.
    stray = Path(local_path(table.location())) / "data" / "day=2026-01-01" / "dead-writer.parquet"
    stray.write_bytes(b"not a table file")
    age_files([str(stray)], hours=100)
    listing, candidates = both()
    assert listing.decided and listing.found == str(stray)
    assert [local_path(path) for path in candidates] == [str(stray)]

    # The stray gone, a live data file aged: Iceberg takes nothing, the worker still says "look".
    stray.unlink()
    live = local_path(next(iter(table.scan().plan_files())).file.file_path)
    age_files([live], hours=100)
    listing, candidates = both()
    assert candidates == [] and listing.found == live


def test_the_quarantine_and_other_file_ios_leave_it_to_the_job(lake_hook, namespace, tmp_path):
    """A run past its days is due (the job purges it); a FileIO the worker cannot list decides nothing."""
    from pyiceberg.io.fsspec import FsspecFileIO

    name = f"{namespace}.events"
    table = create_events_table(lake_hook.catalog, name, days=1, commits_per_day=2, rows_per_commit=5)
    now = int(time.time() * 1000)
    root = quarantine_root(table.location(), name, str(tmp_path / "quarantine"))
    assert quarantine_purge_due(table.io, root, 7, now, default_root=False).nothing_old  # no quarantine yet
    recent, old = run_key(now - 24 * HOUR_MS), run_key(now - 8 * 24 * HOUR_MS)
    (Path(local_path(root)) / recent).mkdir(parents=True)
    assert quarantine_purge_due(table.io, root, 7, now, default_root=False).nothing_old  # a day old: kept 7 days
    (Path(local_path(root)) / old).mkdir()
    due = quarantine_purge_due(table.io, root, 7, now, default_root=False)
    assert due.decided and due.found == old

    # pyarrow's refusal is recognised as one (a default root the store refuses to list holds nothing, as
    # in the job's purge; test_s3fileio meets it with credentials vended for the table alone).
    assert access_denied(OSError("AWS Error ACCESS_DENIED during ListObjectsV2 operation: Access Denied."))
    listing = find_file_older_than(FsspecFileIO({}), table.location(), now)
    assert not listing.decided and listing.why_undecided == "FsspecFileIO cannot list"
