"""lake_approval: the maintenance group with an approval gate that any deletion goes over (``max_files=0``).

The table comes from the run's conf; retention is overridden hard (keep 1 snapshot of main, none
older than 0 h), so the expiry would delete every older snapshot and waits for a person. Orphan
removal is off and the clean policy keeps 5 commits, so the clean's gate has nothing to ask
about (0 files is not over 0) and the clean starts no Spark application.
tests/test_approval_ui.py approves one run and rejects another in a browser.
"""

from __future__ import annotations

from airflow.sdk import DAG

from airflow_lake_provider.core.approval import DeletionThreshold
from airflow_lake_provider.dag_factory import AIRFLOW_START_DATE, table_param
from airflow_lake_provider.task_group import lake_maintenance_group

with DAG(
    dag_id="lake_approval",
    schedule=None,
    start_date=AIRFLOW_START_DATE,
    catchup=False,
    render_template_as_native_obj=True,
    params={"table": table_param()},
) as dag:
    lake_maintenance_group(
        table="{{ params.table }}", group_id="events", prefix_group_id=False,
        plan={"min_input_files": 1000},  # nothing to compact: the plan is empty
        expire={"override_table_retention": True, "older_than": "0h", "retain_last": 1},
        clean={"override_table_retention": True, "retained": 5, "remove_orphans": False},
        approve_deletions_over=DeletionThreshold(max_files=0),
    )
