"""Test DAGs: two DAGs maintaining the same table (``dag_run.conf['table']``), each in a leased group.

Triggered at once, one run takes the table's maintenance lease and the other waits for it
(``on_busy="wait"``, asking every 10 s). The first run's expiry really expires (override, keep 1).
"""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from airflow_lake_provider.task_group import lake_maintenance_group

for dag_id in ("lake_lease_race_a", "lake_lease_race_b"):
    with DAG(dag_id, schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), catchup=False,
             render_template_as_native_obj=True, tags=["test"]) as dag:
        lake_maintenance_group(
            table="{{ dag_run.conf['table'] }}", group_id="maintenance", prefix_group_id=False,
            plan={"min_input_files": 2},
            expire={"override_table_retention": True, "older_than": "0h", "retain_last": 1},
            clean={"remove_orphans": False},
            lease={"ttl_seconds": 600, "on_busy": "wait", "wait_timeout_seconds": 900, "poke_interval_seconds": 10,
                   "holder": "e2e"},
        )
    globals()[dag_id] = dag
