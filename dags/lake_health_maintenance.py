"""lake_health_maintenance: wait until a table needs it, then plan >> rewrite >> expire >> clean.

Instead of compacting on a clock, the run starts by measuring the table from its metadata
(no JVM) and waits until ANY of the thresholds in the params form is crossed: small files,
delete ratio, snapshot count, health score (docs/health-score.md). The sensor's health report
is its XCom value. If the table stays healthy for 6 hours the run ends *skipped*,
having started no Spark application.

The sensor checks every 15 minutes in reschedule mode (it frees its worker slot between
checks), or waits in the triggerer when Airflow's ``operators.default_deferrable`` is on.
Expiry and clean run when the sensor fired, even if the plan found nothing to compact (a long
snapshot history alone can be the reason); they are skipped with it otherwise.

Trigger it from the UI or the REST API with ``{"table": "db.events"}``. The maintenance params
are those of ``lake_maintenance`` (``airflow_lake_provider.dag_factory.maintenance_params``).
To run it on a schedule, set ``schedule`` and a default ``table``. With no ``lake_default``
connection it works on the embedded lake.
"""

from __future__ import annotations

import datetime as dt

import pendulum
from airflow.sdk import DAG, Param

from airflow_lake_provider.dag_factory import maintenance_params
from airflow_lake_provider.operators.clean import IcebergCleanPolicyOperator
from airflow_lake_provider.operators.expire import IcebergExpireSnapshotsOperator
from airflow_lake_provider.operators.plan import IcebergRewritePlanOperator
from airflow_lake_provider.operators.rewrite import IcebergRewriteDataFilesOperator
from airflow_lake_provider.sensors.health import IcebergTableHealthSensor

WAIT = dt.timedelta(hours=6)

with DAG(
    dag_id="lake_health_maintenance",
    description="Wait until an Iceberg table needs maintenance, then compact, expire and clean it",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    render_template_as_native_obj=True,
    tags=["iceberg", "maintenance", "health"],
    params={
        **maintenance_params(),
        "min_small_files": Param(
            100, type=["null", "integer"], minimum=1, title="Small files",
            description="Maintain once the table has this many small data files (below 75% of the target size). "
            "Empty: not a trigger.",
        ),
        "min_delete_ratio": Param(
            0.05, type=["null", "number"], exclusiveMinimum=0, maximum=1, title="Delete ratio",
            description="Maintain once deleted rows reach this share of the data rows (0.05 = 5%). "
            "Empty: not a trigger.",
        ),
        "min_snapshots": Param(
            None, type=["null", "integer"], minimum=1, title="Snapshots",
            description="Maintain once the table keeps this many snapshots. Empty: not a trigger.",
        ),
        "max_score": Param(
            70, type=["null", "number"], minimum=0, maximum=100, title="Health score",
            description="Maintain once the health score (0-100) falls to this or lower. Empty: not a trigger.",
        ),
    },
) as dag:
    wait_for_health = IcebergTableHealthSensor(
        task_id="wait_for_health",
        table="{{ params.table }}",
        min_small_files="{{ params.min_small_files }}",
        min_delete_ratio="{{ params.min_delete_ratio }}",
        min_snapshots="{{ params.min_snapshots }}",
        max_score="{{ params.max_score }}",
        mode="reschedule",
        poke_interval=15 * 60,
        timeout=WAIT,
        soft_fail=True,  # a table that stayed healthy is not a failure: the run ends skipped
    )
    plan = IcebergRewritePlanOperator(
        task_id="plan",
        table="{{ params.table }}",
        target_file_size_bytes="{{ params.target_file_size_bytes }}",
        min_input_files="{{ params.min_input_files }}",
        partition_filter="{{ params.partition_filter }}",
    )
    rewrite = IcebergRewriteDataFilesOperator(
        task_id="rewrite",
        table="{{ params.table }}",
        plan=plan.output,
        strategy="{{ params.strategy }}",
        rewrite_position_deletes=True,
        dry_run="{{ params.dry_run }}",
    )
    expire = IcebergExpireSnapshotsOperator(
        task_id="expire",
        table="{{ params.table }}",
        older_than="{{ params.expire_older_than_hours }}h",
        retain_last="{{ params.retain_last }}",
        protected_snapshot_ids="{{ [ti.xcom_pull(task_ids='rewrite')] }}",
        dry_run="{{ params.dry_run }}",
        trigger_rule="none_failed_min_one_success",
    )
    clean = IcebergCleanPolicyOperator(
        task_id="clean",
        table="{{ params.table }}",
        policy="{{ params.clean_policy }}",
        retained="{{ params.clean_retained }}",
        protected_snapshot_ids="{{ [ti.xcom_pull(task_ids='rewrite'), ti.xcom_pull(task_ids='expire')] }}",
        orphan_older_than_hours="{{ params.orphan_older_than_hours }}",
        dry_run="{{ params.dry_run }}",
        trigger_rule="none_failed_min_one_success",
    )
    wait_for_health >> plan >> rewrite >> expire >> clean
    # Direct edges too: a skipped rewrite (nothing to compact) still lets expiry and clean run when
    # the sensor fired, and a skipped sensor (healthy table) skips them.
    wait_for_health >> [expire, clean]
