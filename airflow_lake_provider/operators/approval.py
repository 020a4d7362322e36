"""The approval gate before a big deletion: unattended under a threshold, a person's Approve/Reject above it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from functools import cached_property
from typing import TYPE_CHECKING, Any

from airflow.providers.standard.operators.hitl import ApprovalOperator
from airflow.sdk.exceptions import AirflowSkipException

from airflow_lake_provider.core.approval import (
    Approval,
    DeletionPreview,
    DeletionThreshold,
    approval_body,
    approval_needed,
    approval_subject,
    approver_name,
    check_gate,
    deletion_preview,
    human_bytes,
)
from airflow_lake_provider.core.identifiers import TableIdentifier
from airflow_lake_provider.hooks.lake import IcebergLakeHook
from airflow_lake_provider.operators.base import LakeMaintenanceOperator
from airflow_lake_provider.steps.approval import GateClosed, under_gate

#: The XCom key the gate keeps its preview under while it waits (a resumed task is a new object).
PREVIEW_XCOM_KEY = "preview"


class LakeDeletionApprovalOperator(ApprovalOperator):
    """Let a deletion step run unattended under ``threshold``; above it, wait for a person's approval.

    ``preview`` is the result of the same step run with ``dry_run=True`` (``expire_preview.output``
    or ``clean_preview.output``). From it and the table's manifests (PyIceberg, in the worker, no
    JVM) the gate works out what the real step would delete: the snapshots, the data and delete
    files only they hold, and (clean) the orphan files, measured against the table's live files.

    * At or under every limit of ``threshold``: returns at once, logging that it runs unattended.
    * Over any limit: the task waits for input (Airflow's Required Actions, state
      ``awaiting_input``) with a subject and a body listing what would go. **Approve** lets the
      step run; **Reject** skips the step and ``also_skip_on_reject`` (the task ids of the deletions
      that follow in the same group), so nothing is removed. With ``response_timeout`` and no
      answer, Airflow fails the task: no answer is no approval.

    Returns :class:`~airflow_lake_provider.core.approval.Approval` as JSON (``approved_by``:
    ``"threshold"`` or the user; ``snapshot_ids`` and ``orphan_files``: what the step may
    remove; ``digest``), which the step's ``approved`` argument takes. On reject it returns
    Airflow's HITL response (``chosen_options: ["Reject"]``) and the step does not run.

    :param table: ``namespace.table`` (templated).
    :param step: ``"expire"`` or ``"clean"``: which step's result ``preview`` is.
    :param preview: the dry-run step's result (templated; an ``XComArg``).
    :param threshold: a :class:`DeletionThreshold` or a mapping of its fields (templated).
    :param also_skip_on_reject: task ids skipped with the direct downstream on reject.
    :param lake_conn_id: the ``iceberg_lake`` connection.
    """

    template_fields: Sequence[str] = (*ApprovalOperator.template_fields, "table", "lake_conn_id", "preview",
                                      "threshold")
    template_fields_renderers = {**getattr(ApprovalOperator, "template_fields_renderers", {}), "preview": "json",
                                 "threshold": "json"}
    ui_color = "#ffe6b3"

    def __init__(
        self,
        *,
        table: str,
        step: str,
        preview: Any,
        threshold: DeletionThreshold | Mapping[str, Any],
        also_skip_on_reject: Sequence[str] = (),
        lake_conn_id: str = IcebergLakeHook.default_conn_name,
        response_timeout: timedelta | None = None,
        **kwargs: Any,
    ) -> None:
        check_gate(step, threshold)
        # subject and body are set in execute, from the preview; the UI shows them only while waiting.
        super().__init__(subject=f"Approve the {step} of {table}", body=None, response_timeout=response_timeout,
                         **kwargs)
        self.table = table
        self.step = step
        self.preview = preview
        self.threshold = threshold
        self.also_skip_on_reject = list(also_skip_on_reject)
        self.lake_conn_id = lake_conn_id

    @cached_property
    def lake_hook(self) -> IcebergLakeHook:
        return IcebergLakeHook(self.lake_conn_id)

    def deletion_preview(self) -> DeletionPreview:
        """What the step would delete (:func:`~airflow_lake_provider.core.approval.deletion_preview`)."""
        ident = TableIdentifier.parse(self.table)
        return deletion_preview(self.lake_hook.load_table(ident), ident.dotted, self.step, self.preview)

    def execute(self, context: Any) -> Any:
        threshold = DeletionThreshold.from_json(self.threshold)
        preview = self.deletion_preview()
        over = approval_needed(threshold, preview)
        if not over:
            self.log.info("The %s of %s runs unattended: %d files (%s, %.1f%% of the table) is under the threshold "
                          "of %s.", self.step, preview.table, preview.file_count, human_bytes(preview.byte_count),
                          100 * preview.share, threshold.describe())
            return Approval.of(preview, "threshold").to_json()
        self.log.info("The %s of %s waits for approval: %s.", self.step, preview.table, "; ".join(over))
        context["ti"].xcom_push(key=PREVIEW_XCOM_KEY, value=preview.to_json())
        self.subject = approval_subject(preview)
        self.body = approval_body(preview, threshold)
        return super().execute(context)

    def execute_complete(self, context: Any, event: dict[str, Any]) -> Any:
        response = super(ApprovalOperator, self).execute_complete(context=context, event=event)
        if response["chosen_options"][0] != self.APPROVE:
            names = sorted({*self.downstream_task_ids, *self.also_skip_on_reject})
            self.log.info("Rejected by %s: nothing is removed; skipping %s.", response["responded_by_user"], names)
            dag = context["dag"]
            self.skip(ti=context["ti"], tasks=[dag.get_task(task_id) for task_id in names])
            return response
        preview = DeletionPreview.from_json(
            context["ti"].xcom_pull(task_ids=self.task_id, key=PREVIEW_XCOM_KEY, map_indexes=context["ti"].map_index))
        approval = Approval.of(preview, approver_name(response["responded_by_user"]))
        self.log.info("Approved by %s: the %s of %s may remove %d snapshots and %d orphan files (digest %s).",
                      approval.approved_by, self.step, preview.table, len(approval.snapshot_ids),
                      len(approval.orphan_files), approval.digest)
        return approval.to_json()


class GatedOperator(LakeMaintenanceOperator):
    """Base of the deleting steps' operators (expire, clean), which may run under an approval gate.

    :param require_approval: set by the group with a gate: without an approval (rejected, skipped)
        the step skips itself and removes nothing.
    """

    if TYPE_CHECKING:
        # The step's dry_run setting shadows BaseOperator.dry_run(), which a maintenance step never uses.
        dry_run: bool  # type: ignore[assignment]
        approved: dict[str, Any] | None

    def __init__(self, *, require_approval: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.require_approval = require_approval

    def step(self, context: Any) -> Any:
        """The step with the approval it runs under (:func:`~airflow_lake_provider.steps.approval.under_gate`):
        its gate's, or none; a gated step without one skips here, before it reads the table."""
        try:
            return under_gate(super().step(context), require_approval=self.require_approval)
        except GateClosed as closed:
            raise AirflowSkipException(str(closed)) from None
