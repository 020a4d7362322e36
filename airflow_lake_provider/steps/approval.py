"""The deleting steps' side of the approval gate: remove only what a person approved."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from airflow_lake_provider.core.approval import Approval
from airflow_lake_provider.core.retention_decision import RetentionDecision
from airflow_lake_provider.exceptions import LakeError

if TYPE_CHECKING:
    from airflow_lake_provider.steps.base import StepLog


def keep_to_approval(approved: Mapping[str, Any], decision: RetentionDecision, table: str, step: str,
                     log: StepLog) -> RetentionDecision:
    """``decision`` cut down to the snapshots ``approved`` (the gate's result) names.

    Why the approved part and not a refusal when the fresh decision adds snapshots: a person may
    take hours to answer, and on a table with age-based retention more snapshots come of age
    meanwhile; refusing would fail every slow approval. Expiring a subset of the approved
    snapshots deletes a subset of the files shown (the snapshots that stay only hold more), so
    nothing that was not approved is deleted. The rest is left, named in the log, for the next run.
    """
    approval = Approval.from_json(approved)
    kept, left = approval.keep_to(table, step, decision.expire_ids)
    if left:
        log.warning("Not in the approval by %s, kept for the next run to decide: snapshots %s of %s.",
                    approval.approved_by, left, table)
    log.info("Approved by %s (digest %s): removing %d of the %d approved snapshots.", approval.approved_by,
             approval.digest, len(kept), len(approval.snapshot_ids))
    reasons = dict(decision.reasons)
    for sid in left:
        reasons[sid] = "kept: not in the approval given for this run (the next run decides again)"
    return dataclasses.replace(decision, expire_ids=tuple(kept), kept_ids=(*decision.kept_ids, *left),
                               reasons=reasons)


class GateClosed(LakeError):
    """A gated deleting step that no approval reached: it skips itself and removes nothing."""


def under_gate(step: Any, *, require_approval: bool) -> Any:
    """A deleting step (expire, clean) with the approval it runs under (``step.approved``, its gate's
    result, or none), decided before it reads the table.

    A gated step (``require_approval``, set by the group) whose gate passed nothing (rejected,
    skipped, or never run) raises :class:`GateClosed`: the trigger rule alone cannot say so, since
    the step must still run after a skipped rewrite. A dry run removes nothing and needs no approval.
    """
    if step.dry_run:
        return dataclasses.replace(step, approved=None)
    if step.approved is None and require_approval:
        raise GateClosed(f"The {step.name} of {step.table} runs only with its approval gate's answer, and none "
                         "reached it (the gate rejected, skipped or did not run): nothing is removed.")
    return step
