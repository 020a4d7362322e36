"""lake_two_tables: two tables maintained in one DAG, one ``lake_maintenance_group`` each.

The second group sits inside another TaskGroup (task ids ``sales.orders.rewrite`` ...), so the
test sees the XCom wiring hold at two depths. Tables come from the run's conf; retention is
overridden hard (keep 1 snapshot of main, none older than 0 h), so a snapshot survives expiry
only when something protects it. The ``remove_orphans`` param (default true) turns the events
group's orphan listing off: the test's second, idempotence run needs none (it could only find
files over the 72 h floor, and run 1 already took the one there is). tests/test_maintenance_dag.py
runs it.
"""

from __future__ import annotations

from airflow.sdk import DAG, Param, TaskGroup

from airflow_lake_provider.dag_factory import AIRFLOW_START_DATE, table_param
from airflow_lake_provider.task_group import lake_maintenance_group

HARD_RETENTION = {"expire": {"override_table_retention": True, "older_than": "0h", "retain_last": 1},
                  "clean": {"override_table_retention": True, "retained": 5}}

with DAG(
    dag_id="lake_two_tables",
    schedule=None,
    start_date=AIRFLOW_START_DATE,
    catchup=False,
    render_template_as_native_obj=True,
    params={"events": table_param(), "orders": table_param(),
            "remove_orphans": Param(True, type="boolean", title="Remove orphans (events)")},
) as dag:
    # Settings by step reach their own step's job: Iceberg's rewrite options, orphans deleted at once.
    events = lake_maintenance_group(table="{{ params.events }}", group_id="events",
                                    rewrite={"options": {"max-concurrent-file-group-rewrites": 1}},
                                    expire=HARD_RETENTION["expire"],
                                    clean={**HARD_RETENTION["clean"], "quarantine_days": 0,
                                           "remove_orphans": "{{ params.remove_orphans }}"})
    with TaskGroup("sales"):
        # No orphan removal: nothing left to expire then means no Spark application for the clean step.
        orders = lake_maintenance_group(table="{{ params.orders }}", group_id="orders",
                                        expire=HARD_RETENTION["expire"],
                                        clean={**HARD_RETENTION["clean"], "remove_orphans": False})
