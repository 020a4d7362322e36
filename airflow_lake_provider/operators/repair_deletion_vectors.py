"""Repair a format v3 table's deletion vectors (two for one data file, or of a file no longer live) in Spark."""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_lake_provider.operators.base import LakeMaintenanceOperator
from airflow_lake_provider.steps.repair_deletion_vectors import RepairDeletionVectorsStep


class IcebergRepairDeletionVectorsOperator(LakeMaintenanceOperator):
    """The commit carries the run's snapshot properties (``airflow.dag-id``, ``airflow.run-id``...): a
    retried task that finds its own commit returns it instead of repairing twice. A format v2 table starts
    no Spark application."""

    step_class = RepairDeletionVectorsStep

    if TYPE_CHECKING:
        # The step's dry_run setting shadows BaseOperator.dry_run(), which a maintenance step never uses.
        dry_run: bool  # type: ignore[assignment]
