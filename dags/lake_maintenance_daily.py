"""lake_maintenance_daily: the maintenance chain every day, scoped to that day's partitions.

Each scheduled run, and each run of a backfill, plans only the partitions of its own data
interval (the table's day/hour/month transform, or identity on a date column), so
``airflow backfill create --dag-id lake_maintenance_daily --from-date 2026-01-01 --to-date
2026-01-31 --dag-run-conf '{"table": "db.events"}'`` compacts each day in its own run.
Paused when first deployed; the default table comes from ``$LAKE_DAILY_TABLE``. The first day
it maintains is ``$LAKE_DAILY_START_DATE`` (``YYYY-MM-DD``, default 2026-01-01): a run for an
earlier day (a backfill, or a manual run for that date) fails in its first task,
``check_run``, with a sentence naming the setting, instead of reporting success having
done nothing. An environment variable, not an Airflow Variable: it is read every time the file
is parsed, and a Variable read at parse time costs a metadata-database query per parse.
"""

import os

from airflow.sdk import CronDataIntervalTimetable

from airflow_lake_provider.core.scoping import parse_first_day
from airflow_lake_provider.dag_factory import build_maintenance_dag

START_DATE_SETTING = "LAKE_DAILY_START_DATE"

dag = build_maintenance_dag(
    "lake_maintenance_daily",
    # A data-interval timetable: each run covers [midnight, next midnight), the day it scopes to.
    schedule=CronDataIntervalTimetable("0 0 * * *", timezone="UTC"),
    table_default=os.environ.get("LAKE_DAILY_TABLE", "demo.events"),
    first_day=parse_first_day(os.environ.get(START_DATE_SETTING) or "2026-01-01", setting=START_DATE_SETTING),
    first_day_setting=START_DATE_SETTING,
    is_paused_upon_creation=True,
    description="Compact, expire and clean one Iceberg table, one day's partitions per run",
)
