"""The clean step: Hudi's cleaner policies on Iceberg, plus orphan file removal."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow_lake_provider.core.coercion import SnapshotIds
from airflow_lake_provider.core.contracts import DEFAULT_QUARANTINE_DAYS
from airflow_lake_provider.core.retention_settings import (
    DEFAULT_CLEAN_POLICY,
    DEFAULT_CLEAN_RETAINED,
)
from airflow_lake_provider.operators.approval import keeping_to_approval
from airflow_lake_provider.operators.base import LakeMaintenanceOperator
from airflow_lake_provider.steps.clean import CleanStep

if TYPE_CHECKING:
    from airflow.sdk import Context

__all__ = ["IcebergCleanPolicyOperator"]


class IcebergCleanPolicyOperator(LakeMaintenanceOperator):
    """Remove snapshots by a cleaner policy, then orphan files older than a floor.

    Policies (resolved from metadata in the Airflow worker into the exact snapshots to remove):

    * ``KEEP_LATEST_COMMITS`` (``retained`` = n): keep the last n commits of main;
    * ``KEEP_LATEST_FILE_VERSIONS`` (n): keep, for every partition, the snapshots holding its last n versions;
    * ``KEEP_LATEST_BY_HOURS`` (h): keep every snapshot that was current in the last h hours.

    The table's own retention is a floor no policy goes under: a snapshot is removed only when
    the policy AND the table's retention (its ``history.expire.*`` properties and its refs'
    settings, as Iceberg's ``expire_snapshots`` resolves them) both let it go, unless
    ``override_table_retention=True``, when the policy alone decides main's history. Other
    branches and tags always follow their own rules (a tag past its ``max-ref-age-ms`` is removed
    as Iceberg would). The current snapshot and ``protected_snapshot_ids`` (pending work) are never
    removed. The log lists the rule that kept or removed every snapshot. Orphan files (under the
    table location, referenced by no snapshot, tag or branch)
    older than ``orphan_older_than_hours`` (default 72) are taken; less than 24 hours is refused
    unless ``force_orphan_floor=True``, since a writer still in flight owns young files. Taken
    orphans are moved to a quarantine (a manifest per run) and deleted by a later clean after
    ``quarantine_days``, so one wrongly taken can be put back
    (:class:`~airflow_lake_provider.operators.restore.IcebergRestoreQuarantineOperator`);
    ``quarantine_days=0`` deletes them at once.
    ``dry_run=True`` returns exactly what would be removed and removes nothing.

    Expire and clean stay two tasks; what the two together keep is stated once
    (:func:`~airflow_lake_provider.core.retention_settings.effective_retention`), in the log and in the
    result's ``effective_retention``, from this step's settings, the table's retention and the
    expire step's settings (``expire_result``). Returns
    :class:`~airflow_lake_provider.core.contracts.CleanResult` as JSON (schema: ``docs/operators/clean.md``).

    :param policy: one of the policies above (templated).
    :param override_table_retention: let the policy go under the table's own retention for main (templated).
    :param retained: n or h for the policy (templated).
    :param protected_snapshot_ids: IDs, lists, or upstream step results whose snapshots must stay.
    :param remove_orphans: take orphan files at all (templated; default true; false: only snapshots).
    :param orphan_older_than_hours: the orphan floor in hours (templated; ``None``: 72).
    :param force_orphan_floor: allow a floor under 24 hours.
    :param dry_run: report, change nothing.
    :param reference_namespaces: the namespaces whose tables are checked for references to this
        table's files before an orphan is taken (templated; ``None``: every namespace of the catalog).
    :param expire_result: the expire step's result (e.g. ``expire.output``, templated), for the
        statement of what the two steps together keep; empty: the statement covers this step alone.
    :param quarantine_location: the root of the orphans' quarantine, a path or URI outside the table
        location (templated); ``None``: ``.lake-quarantine`` beside the table location. Each table's
        runs sit under ``<quarantine_location>/<namespace>/<table>``.
    :param quarantine_days: days a quarantined orphan is kept before a later clean deletes it
        (templated; default 7; 0: delete orphans at once, with no quarantine).
    :param approved: the approval gate's result (``approve_clean.output``, templated): only the
        snapshots and orphan files it names are removed (see ``docs/operators/approval.md``).
    :param require_approval: set by the group with a gate: without an approval (rejected, skipped) the
        step skips itself and removes nothing.
    """

    template_fields: Sequence[str] = (
        *LakeMaintenanceOperator.template_fields,
        "policy", "retained", "override_table_retention", "protected_snapshot_ids", "remove_orphans",
        "orphan_older_than_hours",
        "dry_run", "expire_result", "reference_namespaces", "quarantine_location", "quarantine_days", "approved",
    )
    template_fields_renderers = {**LakeMaintenanceOperator.template_fields_renderers, "expire_result": "json",
                                 "approved": "json"}

    if TYPE_CHECKING:
        # The operator's dry_run parameter shadows BaseOperator.dry_run(), which a maintenance step never uses.
        dry_run: bool  # type: ignore[assignment]

    def __init__(
        self,
        *,
        policy: str = DEFAULT_CLEAN_POLICY.value,
        retained: int = DEFAULT_CLEAN_RETAINED,
        override_table_retention: bool = False,
        protected_snapshot_ids: SnapshotIds | None = None,
        remove_orphans: bool = True,
        orphan_older_than_hours: float | None = None,
        force_orphan_floor: bool = False,
        dry_run: bool = False,
        expire_result: dict[str, Any] | None = None,
        reference_namespaces: list[str] | None = None,
        quarantine_location: str | None = None,
        quarantine_days: float = DEFAULT_QUARANTINE_DAYS,
        approved: dict[str, Any] | None = None,
        require_approval: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.policy = policy
        self.retained = retained
        self.override_table_retention = override_table_retention
        self.protected_snapshot_ids = protected_snapshot_ids
        self.remove_orphans = remove_orphans
        self.orphan_older_than_hours = orphan_older_than_hours
        self.force_orphan_floor = force_orphan_floor
        self.dry_run = dry_run
        self.expire_result = expire_result
        self.reference_namespaces = reference_namespaces
        self.quarantine_location = quarantine_location
        self.quarantine_days = quarantine_days
        self.approved = approved
        self.require_approval = require_approval

    def step(self, context: Context) -> CleanStep:
        return keeping_to_approval(self, CleanStep.of(self, table=self.table, log=self.log))
