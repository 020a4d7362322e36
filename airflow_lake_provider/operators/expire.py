"""Expire snapshots (and the files only they held) in Spark, by the table's own retention or an explicit override."""

from __future__ import annotations

from airflow_lake_provider.operators.approval import GatedOperator
from airflow_lake_provider.steps.expire import ExpireStep


class IcebergExpireSnapshotsOperator(GatedOperator):
    """When nothing is to expire and no ref to remove, no Spark application is started."""

    step_class = ExpireStep
