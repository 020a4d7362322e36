"""Test DAG: plan >> rewrite of ``dag_run.conf['table']``, run by tests/test_lineage.py with
OpenLineage's file transport."""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from airflow_lake_provider.operators.plan import IcebergRewritePlanOperator
from airflow_lake_provider.operators.rewrite import IcebergRewriteDataFilesOperator

with DAG("lake_lineage", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), catchup=False,
         tags=["test"]) as dag:
    plan = IcebergRewritePlanOperator(task_id="plan", table="{{ dag_run.conf['table'] }}", min_input_files=2)
    # Iceberg's Spark rewriter: the test checks the link to the Spark application's own lineage run, and the
    # Arrow rewriter (auto's choice on this table) starts no Spark application to link.
    plan >> IcebergRewriteDataFilesOperator(task_id="rewrite", table="{{ dag_run.conf['table'] }}", plan=plan.output,
                                            rewriter="iceberg")
