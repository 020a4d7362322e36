"""The clean step: Hudi's cleaner policies on Iceberg, plus orphan file removal."""

from __future__ import annotations

from airflow_lake_provider.operators.approval import GatedOperator
from airflow_lake_provider.steps.clean import CleanStep


class IcebergCleanPolicyOperator(GatedOperator):
    """Expire and clean stay two tasks; ``expire_result`` (``expire.output``) lets this one state what
    the two together keep."""

    step_class = CleanStep
