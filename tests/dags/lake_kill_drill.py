"""Test DAG: the four steps on one table, each with retries, for killing the Airflow task process.

``tests/test_kills_task_process.py`` SIGKILLs the task process of each step while its Spark
application runs; the retry must converge on the same table. The plan runs on the Spark engine
so that all four steps have an application to kill.
"""

from __future__ import annotations

import datetime as dt

import pendulum
from airflow.sdk import DAG

from airflow_lake_provider.operators.clean import IcebergCleanPolicyOperator
from airflow_lake_provider.operators.expire import IcebergExpireSnapshotsOperator
from airflow_lake_provider.operators.plan import IcebergRewritePlanOperator
from airflow_lake_provider.operators.rewrite import IcebergRewriteDataFilesOperator

TABLE = "{{ dag_run.conf['table'] }}"

with DAG("lake_kill_drill", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), catchup=False,
         default_args={"retries": 2, "retry_delay": dt.timedelta(seconds=1)}) as dag:
    plan = IcebergRewritePlanOperator(task_id="plan", table=TABLE, engine="spark")
    rewrite = IcebergRewriteDataFilesOperator(task_id="rewrite", table=TABLE, plan=plan.output)
    expire = IcebergExpireSnapshotsOperator(task_id="expire", table=TABLE, override_table_retention=True,
                                            older_than="0h", retain_last=1, engine="spark",
                                            protected_snapshot_ids=rewrite.output)
    clean = IcebergCleanPolicyOperator(task_id="clean", table=TABLE, retained=1, override_table_retention=True,
                                       orphan_older_than_hours=48, protected_snapshot_ids=rewrite.output,
                                       reference_namespaces="{{ dag_run.conf['table'].split('.')[0] }}", engine="spark")
    plan >> rewrite >> expire >> clean
