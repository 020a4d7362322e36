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
from typing import cast

import pendulum
from airflow.sdk import DAG, Param

from airflow_lake_provider.dag_factory import maintenance_chain, maintenance_params
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
        # Rendered text, which the sensor reads as the numbers its parameters declare.
        min_small_files=cast("int | None", "{{ params.min_small_files }}"),
        min_delete_ratio=cast("float | None", "{{ params.min_delete_ratio }}"),
        min_snapshots=cast("int | None", "{{ params.min_snapshots }}"),
        max_score=cast("float | None", "{{ params.max_score }}"),
        mode="reschedule",
        poke_interval=15 * 60,
        timeout=WAIT,
        soft_fail=True,  # a table that stayed healthy is not a failure: the run ends skipped
    )
    # Expiry and clean also run when the sensor fired but the plan found nothing to compact (a
    # long snapshot history alone can be the reason), and are skipped with a skipped sensor.
    maintenance = maintenance_chain(cleanup_trigger_rule="none_failed_min_one_success")
    wait_for_health >> maintenance
    # Direct edges: what makes the trigger rule above see the sensor.
    wait_for_health >> [maintenance.expire, maintenance.clean]
