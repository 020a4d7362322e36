"""Expire snapshots (and the files only they held) in Spark, by the table's own retention or an explicit override."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, timedelta
from typing import TYPE_CHECKING, Any

from airflow_lake_provider.core.coercion import SnapshotIds
from airflow_lake_provider.operators.approval import keeping_to_approval
from airflow_lake_provider.operators.base import LakeMaintenanceOperator
from airflow_lake_provider.steps.expire import ExpireStep

if TYPE_CHECKING:
    from airflow.sdk import Context


class IcebergExpireSnapshotsOperator(LakeMaintenanceOperator):
    """Expire snapshots of a table; Iceberg deletes the files that only expired snapshots held.

    Which snapshots go is decided from metadata in the Airflow worker, before any JVM. By default
    the table's own retention decides, exactly as Iceberg's ``expire_snapshots`` would: its
    ``history.expire.min-snapshots-to-keep`` / ``max-snapshot-age-ms`` / ``max-ref-age-ms``
    properties and every branch's and tag's own settings (tags and branches past their
    ``max-ref-age-ms`` are removed, ``main`` never). ``older_than`` / ``retain_last`` replace the
    table's rules for main only with ``override_table_retention=True``; given without it they are
    refused, so a DAG default can never silently shorten the time travel a table's owner asked for.
    Explicit ``snapshot_ids`` are expired as well. Never expired: the current snapshot, the head
    of a tag or branch that stays, and ``protected_snapshot_ids`` (e.g. the rewrite's output, pulled
    from XCom). Spark then expires exactly those IDs, re-checking them first. When nothing is to
    expire and no ref to remove, no Spark application is started.

    Returns :class:`~airflow_lake_provider.core.contracts.ExpireResult` as JSON (schema:
    ``docs/operators/expire.md``). The log lists the rule that kept or removed every snapshot.

    :param override_table_retention: apply ``older_than`` / ``retain_last`` instead of the table's
        own retention for main (templated; default false).
    :param older_than: with the override, a duration (``"7d"``, ``"36h"``, ``"P3D"``, a ``timedelta``)
        or a timestamp (ISO text, a ``datetime``) (templated); empty: the table's ``max-snapshot-age-ms``.
    :param retain_last: with the override, keep at least this many snapshots of main (>= 1,
        templated); empty: the table's ``min-snapshots-to-keep``.
    :param snapshot_ids: explicit snapshot IDs to expire (templated).
    :param protected_snapshot_ids: IDs, lists, or upstream step results whose snapshots must stay.
    :param dry_run: decide and report, change nothing.
    :param approved: the approval gate's result (``approve_expire.output``, templated): only the
        snapshots it names are expired; those the fresh decision adds (the table moved on while a
        person read the list) stay for the next run. ``None``: no gate, the decision alone.
    :param require_approval: set by the group with a gate: without an approval (rejected, skipped) the
        step skips itself and removes nothing.
    """

    template_fields: Sequence[str] = (
        *LakeMaintenanceOperator.template_fields,
        "override_table_retention", "older_than", "retain_last", "snapshot_ids", "protected_snapshot_ids", "dry_run",
        "approved",
    )
    template_fields_renderers = {**LakeMaintenanceOperator.template_fields_renderers, "approved": "json"}

    if TYPE_CHECKING:
        # The operator's dry_run parameter shadows BaseOperator.dry_run(), which a maintenance step never uses.
        dry_run: bool  # type: ignore[assignment]

    def __init__(
        self,
        *,
        override_table_retention: bool = False,
        older_than: str | date | timedelta | None = None,
        retain_last: int | None = None,
        snapshot_ids: SnapshotIds | None = None,
        protected_snapshot_ids: SnapshotIds | None = None,
        dry_run: bool = False,
        approved: dict[str, Any] | None = None,
        require_approval: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.override_table_retention = override_table_retention
        self.older_than = older_than
        self.retain_last = retain_last
        self.snapshot_ids = snapshot_ids
        self.protected_snapshot_ids = protected_snapshot_ids
        self.dry_run = dry_run
        self.approved = approved
        self.require_approval = require_approval

    def step(self, context: Context) -> ExpireStep:
        return keeping_to_approval(self, ExpireStep.of(self, table=self.table, log=self.log))
