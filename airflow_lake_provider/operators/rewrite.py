"""Rewrite (compact) the planned data files in one Spark application."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from airflow.sdk.bases.xcom import BaseXCom
from airflow.sdk.exceptions import AirflowSkipException

from airflow_lake_provider.operators.base import LakeMaintenanceOperator
from airflow_lake_provider.steps.rewrite import RewriteStep

__all__ = ["IcebergRewriteDataFilesOperator"]


class IcebergRewriteDataFilesOperator(LakeMaintenanceOperator):
    """A group whose commit Iceberg dropped is listed in ``failed_groups`` and fails the task; the
    committed part is pushed under the XCom key ``partial_result``."""

    step_class = RewriteStep

    def pre_execute(self, context: Any) -> None:
        """An empty plan: nothing to rewrite. The task records a ``None`` result, so the steps that
        protect its output read one rather than Airflow's "XCom not found", and skips itself before
        it renews the lease or reads the table."""
        self.coerce_rendered_fields()
        plan = cast("RewriteStep", self.step(context)).read_plan() if isinstance(self.plan, Mapping) else None
        if plan is not None and plan.is_empty:
            context["ti"].xcom_push(key=BaseXCom.XCOM_RETURN_KEY, value=None)
            raise AirflowSkipException("The plan has no file groups: nothing to rewrite.")
        super().pre_execute(context)

    if TYPE_CHECKING:
        # The step's dry_run setting shadows BaseOperator.dry_run(), which a maintenance step never uses.
        dry_run: bool  # type: ignore[assignment]
        plan: dict[str, Any] | None
