"""lake_outcomes: the maintenance group inside someone else's DAG, ``before >> group >> after``.

tests/test_group_outcomes.py runs one scenario per DAG run through the real scheduler (success,
nothing to do, plan refused, a step failing, lease busy with wait, skip and fail, dry run,
approval rejected or timed out) and records, for each, the run's state, whether ``after`` ran,
whether the lease was given back and what the XCom says: the outcome table of docs/your-own-dag.md.
Every scenario setting comes from the run's conf (``params``), so one DAG serves them all; the
approval gate changes the group's shape, so the gated scenarios have DAGs of their own.
"""

from __future__ import annotations

from datetime import timedelta

from airflow.sdk import DAG, Param, task

from airflow_lake_provider.core.approval import DeletionThreshold
from airflow_lake_provider.dag_factory import AIRFLOW_START_DATE, table_param
from airflow_lake_provider.task_group import lake_maintenance_group

PARAMS = {
    "table": table_param(),
    "min_input_files": Param(2, type="integer"),
    "override_table_retention": Param(False, type="boolean"),
    "older_than": Param(None, type=["null", "string"]),
    "retain_last": Param(None, type=["null", "integer"]),
    "partition_filter": Param(None, type=["null", "string"]),
    "dry_run": Param(False, type="boolean"),
    "on_busy": Param("wait", type="string"),
    "wait_timeout_seconds": Param(600, type="number"),
}


def outcome_dag(dag_id: str, **group_options) -> DAG:
    with DAG(dag_id, schedule=None, start_date=AIRFLOW_START_DATE, catchup=False, render_template_as_native_obj=True,
             params=PARAMS, tags=["test"]) as dag:

        @task
        def before() -> str:
            return "ran"

        @task
        def after() -> str:
            return "ran"

        group = lake_maintenance_group(
            table="{{ params.table }}", group_id="maintenance", prefix_group_id=False,
            plan={"min_input_files": "{{ params.min_input_files }}", "partition_filter": "{{ params.partition_filter }}"},
            expire={"override_table_retention": "{{ params.override_table_retention }}",
                    "older_than": "{{ params.older_than }}", "retain_last": "{{ params.retain_last }}"},
            clean={"remove_orphans": False}, dry_run="{{ params.dry_run }}",
            lease={"on_busy": "{{ params.on_busy }}", "wait_timeout_seconds": "{{ params.wait_timeout_seconds }}",
                   "poke_interval_seconds": 10, "holder": "outcomes"},
            **group_options,
        )
        before() >> group >> after()
    return dag


plain = outcome_dag("lake_outcomes")
gated = outcome_dag("lake_outcomes_gated", approve_deletions_over=DeletionThreshold(max_files=0))
gated_timeout = outcome_dag("lake_outcomes_gated_timeout", approve_deletions_over=DeletionThreshold(max_files=0),
                            approval_timeout=timedelta(seconds=5))
