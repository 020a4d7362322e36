"""Convert equality deletes into position deletes (v2) or deletion vectors (v3) in Spark."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow_lake_provider.core.coercion import SnapshotIds
from airflow_lake_provider.core.contracts import DEFAULT_COMMIT_RETRY
from airflow_lake_provider.operators.base import LakeMaintenanceOperator
from airflow_lake_provider.steps.convert_equality_deletes import ConvertEqualityDeletesStep

if TYPE_CHECKING:
    from airflow.sdk import Context


class IcebergConvertEqualityDeletesOperator(LakeMaintenanceOperator):
    """Turn a table's equality deletes into position deletes (v2) or deletion vectors (v3).

    Streaming upsert and CDC writers (Flink) delete rows by key: every reader then compares each
    row with every deleted key, and PyIceberg cannot read such a table at all. This step finds,
    in Spark, the positions those keys delete (with Iceberg's own delete semantics), writes one
    file-scoped position delete file or deletion vector per affected data file, and swaps them for
    the equality delete files in one commit. No data file is rewritten and no row changes; the job
    counts the rows of the affected files again after its commit and fails loudly if they differ.

    The commit is validated against the snapshot it converted: if another writer meanwhile
    deleted rows from, or compacted, those data files, the commit is refused and the conversion
    runs again on the new snapshot (``max_commit_attempts``); appends do not conflict. The commit
    carries the run's snapshot properties (``airflow.dag-id``, ``airflow.run-id``...): a retried
    task that finds its own commit returns it instead of converting twice. A table whose current
    snapshot has no equality deletes starts no Spark application.

    Returns :class:`~airflow_lake_provider.core.contracts.ConvertEqualityDeletesResult` as JSON
    (schema: ``docs/operators/convert-equality-deletes.md``).

    :param snapshot_id: the snapshot an upstream task saw (an ID or its result, templated); the
        step refuses to run if it is no longer the current snapshot or one of its ancestors.
        The current snapshot, which holds every delete the given one did, is converted.
    :param dry_run: plan the conversion in Spark and report its figures; write and commit nothing.
    :param max_commit_attempts: attempts when the commit conflicts with another writer (1-10, default
        :class:`~airflow_lake_provider.core.contracts.CommitRetry`'s, 3).
    :param commit_retry_backoff_seconds: wait before the first retry, doubled for each further one.
    """

    template_fields: Sequence[str] = (
        *LakeMaintenanceOperator.template_fields,
        "snapshot_id", "dry_run", "max_commit_attempts", "commit_retry_backoff_seconds",
    )

    if TYPE_CHECKING:
        # The operator's dry_run parameter shadows BaseOperator.dry_run(), which a maintenance step never uses.
        dry_run: bool  # type: ignore[assignment]

    def __init__(
        self,
        *,
        snapshot_id: SnapshotIds | None = None,
        dry_run: bool = False,
        max_commit_attempts: int = DEFAULT_COMMIT_RETRY.max_attempts,
        commit_retry_backoff_seconds: float = DEFAULT_COMMIT_RETRY.retry_backoff_seconds,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.snapshot_id = snapshot_id
        self.dry_run = dry_run
        self.max_commit_attempts = max_commit_attempts
        self.commit_retry_backoff_seconds = commit_retry_backoff_seconds

    def step(self, context: Context) -> ConvertEqualityDeletesStep:
        return ConvertEqualityDeletesStep.of(self, table=self.table, log=self.log)
