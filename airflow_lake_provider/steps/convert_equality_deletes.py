"""The convert step: a table's equality deletes turned into position deletes (v2) or deletion vectors (v3)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, ClassVar, cast

from airflow_lake_provider.core import step_names as names
from airflow_lake_provider.core.coercion import Seconds, SnapshotIds
from airflow_lake_provider.core.contracts import (
    AirflowRun,
    ConvertEqualityDeletesJobArgs,
    ConvertEqualityDeletesResult,
)
from airflow_lake_provider.core.settings import setting
from airflow_lake_provider.core.snapshots import (
    commits_tagged,
    has_equality_deletes,
    parent_of,
    require_in_lineage,
    summary_int,
    table_state,
)
from airflow_lake_provider.jobs.convert_equality_deletes import CONVERT_ID_PROPERTY
from airflow_lake_provider.steps.base import (
    Outcome,
    Prepared,
    Step,
    TableReader,
    commit_retry_backoff_setting,
    max_commit_attempts_setting,
)

if TYPE_CHECKING:
    from pyiceberg.table import Table


@dataclasses.dataclass(kw_only=True)
class ConvertEqualityDeletesStep(Step[ConvertEqualityDeletesJobArgs, ConvertEqualityDeletesResult]):
    """Turn a table's equality deletes into position deletes (v2) or deletion vectors (v3).

    Streaming upsert and CDC writers (Flink) delete rows by key: every reader then compares each
    row with every deleted key, and PyIceberg cannot read such a table at all. The job finds, in
    Spark, the positions those keys delete (with Iceberg's own delete semantics), writes one
    file-scoped position delete file or deletion vector per affected data file, and swaps them for
    the equality delete files in one commit validated against the snapshot it converted. No data
    file is rewritten and no row changes; the job counts the rows of the affected files again
    after its commit and fails loudly if they differ. Returns
    :class:`~airflow_lake_provider.core.contracts.ConvertEqualityDeletesResult`
    (docs/operators/convert-equality-deletes.md).

    A table whose current snapshot has no equality deletes starts no Spark application; a retried
    task that finds its own commit returns it instead of converting twice.
    """

    name: ClassVar[str] = names.CONVERT_EQUALITY_DELETES

    snapshot_id: SnapshotIds | None = setting(None, doc=(
        "The snapshot an upstream task saw (an ID or its result); the step refuses to run if it is no longer the "
        "current snapshot or one of its ancestors. The current snapshot, which holds every delete the given one "
        "did, is converted."))
    dry_run: bool = setting(False, doc="Plan the conversion in Spark and report its figures; write and commit nothing.")
    max_commit_attempts: int = max_commit_attempts_setting()
    commit_retry_backoff_seconds: Seconds = commit_retry_backoff_setting()

    def prepare(self, reader: TableReader, run: AirflowRun | None) -> Prepared:
        tags = run.snapshot_properties() if run else {}
        name = self.dotted
        job_args = ConvertEqualityDeletesJobArgs(
            table=name, dry_run=self.dry_run, snapshot_properties=tags,
            max_attempts=self.max_commit_attempts,
            retry_backoff_seconds=cast("float", self.commit_retry_backoff_seconds),  # read as seconds
        ).validate()
        table = reader.load_table()
        given: list[int] = self.snapshot_id or []
        for snapshot_id in given[-1:]:  # a step result names its last snapshot last
            require_in_lineage(table, snapshot_id, table_name=name, role="given")
        before = table_state(table)
        current = table.current_snapshot()
        version = int(table.metadata.format_version)

        earlier = [s for s in commits_tagged(table, tags, after=given[-1] if given else None)
                   if CONVERT_ID_PROPERTY in (s.summary or {})]
        if earlier and not self.dry_run:
            self.log.info("Found this task's own commit from an earlier try (%s): not converting again.",
                          [s.snapshot_id for s in earlier])
            return Prepared(before, done=Outcome(
                _recovered(name, table, version, earlier),
                f"an earlier try already committed {[s.snapshot_id for s in earlier]}", changed=False))

        if current is None or not has_equality_deletes(table, current):
            self.log.info("%s has no equality deletes in its current snapshot: nothing to convert.", name)
            return Prepared(before, done=Outcome(
                ConvertEqualityDeletesResult.unchanged(
                    name, version, current.snapshot_id if current is not None else None, dry_run=self.dry_run),
                "no equality deletes, nothing to convert", changed=False))
        return Prepared(before, args=job_args, state=version)

    def finish(self, prepared: Prepared, result: ConvertEqualityDeletesResult) -> Outcome:
        kind = "deletion vectors" if prepared.state >= 3 else "position delete files"
        conflicts = [a for a in result.attempts if a["outcome"] == "conflict"]
        if conflicts:
            self.log.warning("The conversion met concurrent commits and planned again: %s", conflicts)
        done = (
            f"{'dry run: would convert' if self.dry_run else 'converted'} {result.converted_equality_delete_files:,} "
            f"equality delete files ({result.equality_delete_records:,} keys) applying to "
            f"{result.affected_data_files:,} data files into {result.added_delete_files:,} {kind} deleting "
            f"{result.deleted_rows:,} rows"
        )
        self.log.info("%s; commits %s; snapshot %s -> %s.", done, result.committed_snapshot_ids,
                      result.snapshot_id_before, result.snapshot_id_after)
        return Outcome(result, done, changed=bool(result.committed_snapshot_ids))


def _recovered(name: str, table: Table, version: int, commits: list[Any]) -> ConvertEqualityDeletesResult:
    """The earlier try's result, rebuilt from its commits' summaries (no JVM)."""
    first, last = commits[0], commits[-1]
    added = "added-dvs" if version >= 3 else "added-position-delete-files"
    replaced = "removed-dvs" if version >= 3 else "removed-position-delete-files"
    parent = parent_of(table, first)
    return ConvertEqualityDeletesResult.unchanged(name, version, parent.snapshot_id if parent else None).replace(
        committed_snapshot_ids=[s.snapshot_id for s in commits],
        snapshot_id_after=last.snapshot_id,
        converted_equality_delete_files=sum(summary_int(s, "removed-equality-delete-files") for s in commits),
        equality_delete_records=sum(summary_int(s, "removed-equality-deletes") for s in commits),
        added_delete_files=sum(summary_int(s, added) for s in commits),
        replaced_delete_files=sum(summary_int(s, replaced) for s in commits),
        deleted_rows=sum(summary_int(s, "added-position-deletes") for s in commits),
        recovered_from_earlier_try=True,
    )
