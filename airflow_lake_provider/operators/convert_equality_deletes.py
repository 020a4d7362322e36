"""Convert equality deletes into position deletes (v2) or deletion vectors (v3) in Spark."""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_lake_provider.operators.base import LakeMaintenanceOperator
from airflow_lake_provider.steps.convert_equality_deletes import ConvertEqualityDeletesStep


class IcebergConvertEqualityDeletesOperator(LakeMaintenanceOperator):
    """The commit carries the run's snapshot properties (``airflow.dag-id``, ``airflow.run-id``...): a
    retried task that finds its own commit returns it instead of converting twice. A table whose current
    snapshot has no equality deletes starts no Spark application."""

    step_class = ConvertEqualityDeletesStep

    if TYPE_CHECKING:
        # The step's dry_run setting shadows BaseOperator.dry_run(), which a maintenance step never uses.
        dry_run: bool  # type: ignore[assignment]
