"""Test DAG: two rewrites on the S3 + REST catalog of connection ``lake_secret_s3``, one that
fails (a data file deleted behind the table's back: the Arrow rewriter, reading S3 with the
table's keys, meets it) and one that succeeds in a Spark application (Iceberg's rewriter), with
Spark's event log on, so the secrets test can search everything the run left behind."""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from airflow_lake_provider.operators.rewrite import IcebergRewriteDataFilesOperator

with DAG("lake_secret_probe_s3", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), catchup=False) as dag:
    spark_conf = {"spark.eventLog.enabled": "true", "spark.eventLog.dir": "{{ dag_run.conf['event_log_dir'] }}"}
    for task_id, table, rewriter in (("rewrite_broken", "{{ dag_run.conf['broken'] }}", "auto"),
                                     ("rewrite_ok", "{{ dag_run.conf['ok'] }}", "iceberg")):
        IcebergRewriteDataFilesOperator(task_id=task_id, table=table, lake_conn_id="lake_secret_s3", rewriter=rewriter,
                                        spark_conf=spark_conf, options={"rewrite-all": "true"}, retries=0)
