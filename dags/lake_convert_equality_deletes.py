"""lake_convert_equality_deletes: one table's equality deletes become position deletes or deletion vectors.

For tables written by streaming upsert and CDC pipelines (Flink): between compactions, this
cheap step (it rewrites no data file) makes reads cheaper and lets PyIceberg read the table
again. Trigger it from the UI or the REST API with ``{"table": "db.events"}``; a table without
equality deletes returns at once and starts no Spark application. To run it on a schedule,
copy this file and set ``schedule`` (e.g. ``"@hourly"``) and a default table.
"""

from typing import cast

from airflow.sdk import DAG, Param

from airflow_lake_provider.dag_factory import AIRFLOW_START_DATE, table_param
from airflow_lake_provider.operators.convert_equality_deletes import (
    IcebergConvertEqualityDeletesOperator,
)

with DAG(
    dag_id="lake_convert_equality_deletes",
    description="Turn one Iceberg table's equality deletes into position deletes / deletion vectors (on demand)",
    schedule=None,
    start_date=AIRFLOW_START_DATE,
    catchup=False,
    max_active_runs=1,
    render_template_as_native_obj=True,
    tags=["iceberg", "maintenance"],
    params={
        "table": table_param(),
        "dry_run": Param(False, type="boolean", title="Dry run",
                         description="Find what would be converted and report it; write and commit nothing."),
    },
) as dag:
    IcebergConvertEqualityDeletesOperator(
        task_id="convert_equality_deletes", table="{{ params.table }}",
        dry_run=cast(bool, "{{ params.dry_run }}"),  # rendered text, read as the bool the parameter declares
    )
