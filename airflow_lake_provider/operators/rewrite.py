"""Rewrite (compact) the planned data files in one Spark application."""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_lake_provider.operators.base import LakeMaintenanceOperator
from airflow_lake_provider.steps.rewrite import RewriteStep

__all__ = ["IcebergRewriteDataFilesOperator"]


class IcebergRewriteDataFilesOperator(LakeMaintenanceOperator):
    """A group whose commit Iceberg dropped is listed in ``failed_groups`` and fails the task; the
    committed part is pushed under the XCom key ``partial_result``."""

    step_class = RewriteStep
    consumes_plan = True

    if TYPE_CHECKING:
        # The step's dry_run setting shadows BaseOperator.dry_run(), which a maintenance step never uses.
        dry_run: bool  # type: ignore[assignment]
