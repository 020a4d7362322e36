"""Airflow's provider conventions, checked on every operator and sensor of the package.

Keyword-only arguments, connection ids a DAG author can template, and renderers for the
structured fields so the UI's "Rendered Template" tab shows JSON, not a Python repr.
"""

from __future__ import annotations

import inspect

import pendulum
import pytest
from airflow.sdk import DAG

from airflow_lake_provider.operators.approval import LakeDeletionApprovalOperator
from airflow_lake_provider.operators.clean import IcebergCleanPolicyOperator
from airflow_lake_provider.operators.convert_equality_deletes import IcebergConvertEqualityDeletesOperator
from airflow_lake_provider.operators.expire import IcebergExpireSnapshotsOperator
from airflow_lake_provider.operators.fleet import IcebergFleetPlanOperator, IcebergFleetRewriteOperator
from airflow_lake_provider.operators.lease import IcebergAcquireLeaseOperator, IcebergReleaseLeaseOperator
from airflow_lake_provider.operators.plan import IcebergRewritePlanOperator
from airflow_lake_provider.operators.repair_deletion_vectors import IcebergRepairDeletionVectorsOperator
from airflow_lake_provider.operators.restore import IcebergRestoreQuarantineOperator
from airflow_lake_provider.operators.rewrite import IcebergRewriteDataFilesOperator
from airflow_lake_provider.sensors.health import IcebergTableHealthSensor
from airflow_lake_provider.sensors.snapshot import IcebergSnapshotSensor

WITH_TABLE = [IcebergRewritePlanOperator, IcebergRewriteDataFilesOperator, IcebergExpireSnapshotsOperator,
              IcebergCleanPolicyOperator, IcebergConvertEqualityDeletesOperator, IcebergRestoreQuarantineOperator,
              IcebergRepairDeletionVectorsOperator,
              IcebergAcquireLeaseOperator, IcebergTableHealthSensor, IcebergSnapshotSensor]
EVERY = [*WITH_TABLE, IcebergReleaseLeaseOperator, LakeDeletionApprovalOperator, IcebergFleetPlanOperator,
         IcebergFleetRewriteOperator]


@pytest.mark.parametrize("kind", EVERY, ids=lambda k: k.__name__)
def test_connection_ids_are_templated_and_renderers_name_template_fields(kind):
    assert "lake_conn_id" in kind.template_fields
    renderers = getattr(kind, "template_fields_renderers", {})
    assert set(renderers) <= set(kind.template_fields), f"{kind.__name__} renders fields it does not template"
    for name, parameter in inspect.signature(kind.__init__).parameters.items():
        if name not in ("self", "kwargs"):
            assert parameter.kind is inspect.Parameter.KEYWORD_ONLY, f"{kind.__name__}({name}) is not keyword-only"


def test_a_templated_connection_id_reaches_the_hooks():
    """``lake_conn_id="{{ params.lake }}"`` renders before the hooks are made (they are made lazily)."""
    with DAG("conventions", schedule=None, start_date=pendulum.datetime(2026, 1, 1),
             params={"lake": "lake_prod", "spark": "spark_cluster"}):
        plan = IcebergRewritePlanOperator(task_id="plan", table="db.events", lake_conn_id="{{ params.lake }}",
                                          spark_conn_id="{{ params.spark }}")
        sensor = IcebergTableHealthSensor(task_id="health", table="db.events", lake_conn_id="{{ params.lake }}",
                                          min_small_files=1)
    for task in (plan, sensor):
        task.render_template_fields({"params": {"lake": "lake_prod", "spark": "spark_cluster"}})
    assert plan.lake_hook.lake_conn_id == "lake_prod" and plan.spark_conn_id == "spark_cluster"
    assert sensor.lake_conn_id == "lake_prod"
    assert IcebergRewriteDataFilesOperator.template_fields_renderers["options"] == "json"
