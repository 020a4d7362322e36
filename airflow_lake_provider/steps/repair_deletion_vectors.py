"""The repair step: a format v3 table no engine can read (two deletion vectors for one data file) made readable."""

from __future__ import annotations

import dataclasses
from typing import ClassVar, cast

from airflow_lake_provider.core import step_names as names
from airflow_lake_provider.core.coercion import Seconds
from airflow_lake_provider.core.contracts import (
    AirflowRun,
    RepairDeletionVectorsJobArgs,
    RepairDeletionVectorsResult,
)
from airflow_lake_provider.core.settings import setting
from airflow_lake_provider.core.snapshots import commits_tagged, parent_of, table_state
from airflow_lake_provider.jobs.repair_deletion_vectors import REPAIR_ID_PROPERTY
from airflow_lake_provider.steps.base import (
    Outcome,
    Prepared,
    Step,
    TableReader,
    commit_retry_backoff_setting,
    max_commit_attempts_setting,
)


@dataclasses.dataclass(kw_only=True)
class RepairDeletionVectorsStep(Step[RepairDeletionVectorsJobArgs, RepairDeletionVectorsResult]):
    """Merge each data file's deletion vectors into one, and drop those whose data file is gone.

    A writer that adds a deletion vector (DV) without merging the file's existing one leaves a table
    every engine refuses to read ("Can't index multiple DVs", apache/iceberg#17206), and Iceberg has no
    procedure that mends it; the rewrite refuses such a table and names this step. The job reads each
    DV of an affected data file, writes one DV deleting every row any of them deleted, and swaps them
    in one commit validated against the snapshot it read; DVs of data files no longer in the table
    delete nothing and are dropped. No data file is rewritten. A format v2 table has no DVs and starts
    no Spark application; a retried task that finds its own commit returns it. Returns
    :class:`~airflow_lake_provider.core.contracts.RepairDeletionVectorsResult`
    (docs/operators/repair-deletion-vectors.md).
    """

    name: ClassVar[str] = names.REPAIR_DELETION_VECTORS

    dry_run: bool = setting(False, doc="Find the duplicated and dangling DVs in Spark and report them; write "
                                       "and commit nothing.")
    max_commit_attempts: int = max_commit_attempts_setting()
    commit_retry_backoff_seconds: Seconds = commit_retry_backoff_setting()

    def prepare(self, reader: TableReader, run: AirflowRun | None) -> Prepared:
        tags = run.snapshot_properties() if run else {}
        name = self.dotted
        args = RepairDeletionVectorsJobArgs(
            table=name, dry_run=self.dry_run, snapshot_properties=tags, max_attempts=self.max_commit_attempts,
            retry_backoff_seconds=cast("float", self.commit_retry_backoff_seconds),  # read as seconds
        ).validate()
        table = reader.load_table()
        before = table_state(table)
        version = int(table.metadata.format_version)
        current = table.current_snapshot()
        earlier = [s for s in commits_tagged(table, tags) if REPAIR_ID_PROPERTY in (s.summary or {})]
        if earlier and not self.dry_run:
            self.log.info("Found this task's own commit from an earlier try (%s): not repairing again.",
                          [s.snapshot_id for s in earlier])
            parent = parent_of(table, earlier[0])
            result = RepairDeletionVectorsResult.unchanged(name, version, parent.snapshot_id if parent else None)
            result = result.replace(committed_snapshot_ids=[s.snapshot_id for s in earlier],
                                    snapshot_id_after=earlier[-1].snapshot_id, recovered_from_earlier_try=True)
            return Prepared(before, done=Outcome(
                result, f"an earlier try already committed {result.committed_snapshot_ids}", changed=False))
        if version < 3 or current is None:
            why = f"format v{version} has no deletion vectors" if version < 3 else "the table has no snapshot"
            return Prepared(before, done=Outcome(RepairDeletionVectorsResult.unchanged(
                name, version, current.snapshot_id if current else None, dry_run=self.dry_run),
                f"nothing to repair: {why}", changed=False))
        return Prepared(before, args=args)

    def finish(self, prepared: Prepared, result: RepairDeletionVectorsResult) -> Outcome:
        found = result.found or {}
        duplicated, dangling = found.get("duplicated_data_files") or {}, found.get("dangling_deletion_vectors") or []
        if duplicated or dangling:
            self.say("Deletion vectors of %s at snapshot %s: data files with more than one: %d (%s); DVs whose "
                     "data file is not live: %d (%s).", self.dotted, result.repaired_snapshot_id, len(duplicated),
                     ", ".join(sorted(duplicated)[:5]) or "none", len(dangling), ", ".join(dangling[:5]) or "none")
        if not (duplicated or dangling):
            return Outcome(result, "nothing to repair: every data file has at most one deletion vector, each of a "
                                   "live data file", changed=False)
        done = (f"{'dry run: would merge' if self.dry_run else 'merged'} {result.merged_deletion_vectors:,} deletion "
                f"vectors of {result.repaired_data_files:,} data files into {result.added_deletion_vectors:,} "
                f"(deleting {result.deleted_rows:,} rows, every row any of them deleted) and "
                f"{'would drop' if self.dry_run else 'dropped'} {result.dropped_dangling_deletion_vectors:,} "
                "dangling ones")
        return Outcome(result, done, changed=bool(result.committed_snapshot_ids))
