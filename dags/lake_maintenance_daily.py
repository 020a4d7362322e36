"""lake_maintenance_daily: the maintenance chain every day, scoped to that day's partitions.

Each scheduled run, and each run of a backfill, plans only the partitions of its own data
interval (the table's day/hour/month transform, or identity on a date column), so
``airflow backfill create --dag-id lake_maintenance_daily --from-date 2026-01-01 --to-date
2026-01-31 --dag-run-conf '{"table": "db.events"}'`` compacts each day in its own run.
Paused when first deployed; the default table comes from ``$LAKE_DAILY_TABLE``.
"""

import os

from airflow.sdk import CronDataIntervalTimetable

from airflow_lake_provider.dag_factory import build_maintenance_dag

dag = build_maintenance_dag(
    "lake_maintenance_daily",
    # A data-interval timetable: each run covers [midnight, next midnight), the day it scopes to.
    schedule=CronDataIntervalTimetable("0 0 * * *", timezone="UTC"),
    table_default=os.environ.get("LAKE_DAILY_TABLE", "demo.events"),
    is_paused_upon_creation=True,
    description="Compact, expire and clean one Iceberg table, one day's partitions per run",
)
