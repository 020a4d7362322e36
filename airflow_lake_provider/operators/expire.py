"""Expire snapshots (and the files only they held) in Spark, by the table's own retention or an explicit override."""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import date, timedelta
from typing import Any

from airflow_lake_provider.core.coercion import SnapshotIds, parse_older_than
from airflow_lake_provider.core.contracts import (
    ExpireJobArgs,
    ExpireResult,
    ExpiryOutcome,
)
from airflow_lake_provider.core.retention_decision import resolve_expiry
from airflow_lake_provider.core.retention_settings import ExpirySettings
from airflow_lake_provider.operators.approval import keep_to_approval, passed_gate
from airflow_lake_provider.operators.base import LakeMaintenanceOperator


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

    def execute(self, context: Any) -> dict[str, Any]:
        self.coerce_rendered_fields()
        gated = passed_gate(self, "expire")
        now_ms = int(time.time() * 1000)
        cutoff = parse_older_than(self.older_than, now_ms=now_ms)
        settings = ExpirySettings.requested(self.override_table_retention, older_than_ms=cutoff,
                                            retain_last=self.retain_last, now_ms=now_ms)
        digest = self.read_digest()
        name = self.table_identifier.dotted
        history = digest.history()
        decision = resolve_expiry(
            history, settings, now_ms=now_ms,
            snapshot_ids=self.snapshot_ids or (), protected_ids=self.protected_snapshot_ids or (),
        )
        override = settings.override_table_retention
        self.log.info("Retention of %s (%s):\n%s", name,
                      "override_table_retention: the values given replace the table's rules for main" if override
                      else "the table's own settings", decision.explain())
        if gated:
            decision = keep_to_approval(self, decision, name, "expire")
        before = digest.state()
        current_id = history.current_snapshot_id
        removed_refs = sorted(decision.removed_refs)
        if self.dry_run or not (decision.expire_ids or removed_refs):
            self.log.info("%s %d snapshots of %s: %s; refs: %s", "Would expire" if self.dry_run else "Nothing to expire;",
                          len(decision.expire_ids), name, list(decision.expire_ids), removed_refs)
            self.log_summary(before, f"dry run, would expire {len(decision.expire_ids)} snapshots" if self.dry_run
                             else "nothing to expire", changed=False)
            outcome = ExpiryOutcome(would_expire_snapshot_ids=list(decision.expire_ids), would_remove_refs=removed_refs,
                                    snapshot_id_after=current_id)
        else:
            job_args = ExpireJobArgs(
                table=name, snapshot_ids=list(decision.expire_ids), protected_ids=list(self.protected_snapshot_ids or ()),
                refs={ref.name: ref.snapshot_id for ref in history.refs}, removed_refs=removed_refs,
            ).validate()
            outcome = ExpiryOutcome.from_json(self.run_job("expire", job_args.to_json()))
            self.log.info("Expired %d snapshots of %s, removed refs %s; deleted files: %s.",
                          len(outcome.expired_snapshot_ids), name, outcome.removed_refs, outcome.deleted_files)
            self.log_summary(before, f"expired {len(outcome.expired_snapshot_ids)} snapshots, deleted "
                             f"{outcome.deleted_file_count} files no live snapshot needs")
        explained = decision.to_dict()
        return ExpireResult(
            **outcome.to_json(), table=name, snapshot_id=current_id, retention_source="override" if override else "table",
            kept=explained["kept"], removed=explained["removed"], removed_ref_reasons=explained["removed_refs"],
            dry_run=self.dry_run, retain_last=settings.retain_last, max_snapshot_age_ms=settings.max_snapshot_age_ms,
        ).to_json()
