"""Test DAG: one task that runs a Spark job on the catalog of connection ``lake_secret_probe``."""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG, task

with DAG("lake_secret_probe", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), catchup=False) as dag:

    @task
    def count_rows(table: str) -> dict:
        from airflow_lake_provider.hooks.lake import IcebergLakeHook
        from airflow_lake_provider.hooks.spark_job import LakeSparkJobHook
        from airflow_lake_provider.core.contracts import SqlJobArgs

        hook = IcebergLakeHook("lake_secret_probe")
        result = LakeSparkJobHook(lake_hook=hook).run(SqlJobArgs(statements=[f"SELECT count(*) AS n FROM {table}"]))
        return {"rows": result.rows, "catalog": hook.config.describe()}

    count_rows("{{ dag_run.conf['table'] }}")
