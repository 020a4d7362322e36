"""Test DAGs: a maintenance DAG and a downstream DAG scheduled on the maintained table's Asset.

``lake_asset_producer`` plans and rewrites ``dag_run.conf['table']``. ``lake_asset_consumer`` is
scheduled on that table's Asset; which table is read when the file is parsed, from
``$LAKE_HOME/asset-consumer.json`` (``{"table": ..., "location": ...}``) that the test writes (a
placeholder Asset until then).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pendulum
from airflow.sdk import DAG, Asset, task

from airflow_lake_provider.assets import table_asset
from airflow_lake_provider.operators.plan import IcebergRewritePlanOperator
from airflow_lake_provider.operators.rewrite import IcebergRewriteDataFilesOperator

START = pendulum.datetime(2026, 1, 1, tz="UTC")

with DAG("lake_asset_producer", schedule=None, start_date=START, catchup=False, tags=["test"]) as producer:
    plan = IcebergRewritePlanOperator(task_id="plan", table="{{ dag_run.conf['table'] }}", min_input_files=2)
    plan >> IcebergRewriteDataFilesOperator(task_id="rewrite", table="{{ dag_run.conf['table'] }}", plan=plan.output)

_WATCHED = Path(os.environ.get("LAKE_HOME", "/nonexistent")) / "asset-consumer.json"
_watched = json.loads(_WATCHED.read_text()) if _WATCHED.is_file() else None
_asset = (table_asset(_watched["table"], _watched["location"]) if _watched
          else Asset(name="lake-asset-consumer-unset", uri="file:///nonexistent/lake-asset-consumer-unset"))

with DAG("lake_asset_consumer", schedule=[_asset], start_date=START, catchup=False, tags=["test"]) as consumer:

    @task
    def read_the_compacted_table(*, triggering_asset_events=None) -> list[dict]:
        return [event.extra for events in (triggering_asset_events or {}).values() for event in events]

    read_the_compacted_table()
