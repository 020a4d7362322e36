"""lake_fleet_maintenance: keep every table of a fleet healthy, paying for Spark only where needed.

1. ``list_tables``: the tables to look at: the ``tables`` param, else every table of the
   ``namespace`` param, else the JSON list in the Airflow Variable ``lake_fleet_tables``.
2. ``plan`` (mapped, one task per table, no JVM): plan each table from its metadata. A missing
   or broken table fails its own task only.
3. ``select_work``: the tables whose plan has file groups.
4. ``rewrite`` then ``expire`` (mapped over those tables only): one Spark application per
   table that needs work, at most ``max_active_tis_per_dag`` at a time, in the ``lake_spark``
   pool when it exists (``LAKE_SPARK_POOL``) so all DAGs share one bound on Spark applications.
5. ``any_table_failed``: runs only when some table's task failed, and fails, so the run is
   marked failed although every other table was maintained.
"""

from __future__ import annotations

import json
import os

import pendulum
from airflow.sdk import DAG, Param, Variable, task

from airflow_lake_provider.dag_factory import OLDER_THAN_FROM_PARAMS, retention_params
from airflow_lake_provider.operators.expire import IcebergExpireSnapshotsOperator
from airflow_lake_provider.operators.plan import IcebergRewritePlanOperator
from airflow_lake_provider.operators.rewrite import IcebergRewriteDataFilesOperator

SPARK_POOL = os.environ.get("LAKE_SPARK_POOL", "default_pool")
MAX_CONCURRENT_SPARK_APPS = int(os.environ.get("LAKE_MAX_CONCURRENT_SPARK_APPS", "2"))

with DAG(
    dag_id="lake_fleet_maintenance",
    description="Plan every table of a fleet without a JVM; compact only the ones that need it",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,  # one fleet run at a time: never two maintenance runs on one table
    render_template_as_native_obj=True,
    tags=["iceberg", "maintenance", "fleet"],
    params={
        "tables": Param([], type="array", items={"type": "string"}, title="Tables",
                        description="namespace.table names. Empty: the namespace below, or the lake_fleet_tables Variable."),
        "namespace": Param(None, type=["null", "string"], title="Namespace",
                           description="Maintain every table of this namespace (when Tables is empty)."),
        "min_input_files": Param(5, type="integer", minimum=1, title="Minimum input files"),
        **retention_params(),
    },
) as dag:

    @task
    def list_tables(params: dict) -> list[str]:
        """Each table once (one maintenance task per table and run), in the order given."""
        if params.get("tables"):
            names = list(params["tables"])
        elif params.get("namespace"):
            from airflow_lake_provider.hooks.lake import IcebergLakeHook

            catalog = IcebergLakeHook().catalog
            names = [".".join(ident) for ident in catalog.list_tables(params["namespace"])]
        else:
            names = json.loads(Variable.get("lake_fleet_tables", default="[]"))
        return list(dict.fromkeys(str(name).strip() for name in names))

    tables = list_tables()
    plans = IcebergRewritePlanOperator.partial(
        task_id="plan", min_input_files="{{ params.min_input_files }}", skip_rewrite_when_empty=False
    ).expand(table=tables)

    @task(trigger_rule="all_done")
    def select_work(plans: list) -> list[dict]:
        """Tables with something to compact; failed plans (None) are left to their own task."""
        return [{"table": p["table"], "plan": p} for p in plans if p and p["groups"]]

    work = select_work(plans.output)
    rewrites = IcebergRewriteDataFilesOperator.partial(
        task_id="rewrite", pool=SPARK_POOL, max_active_tis_per_dag=MAX_CONCURRENT_SPARK_APPS,
    ).expand_kwargs(work)
    expires = IcebergExpireSnapshotsOperator.partial(
        task_id="expire", pool=SPARK_POOL, max_active_tis_per_dag=MAX_CONCURRENT_SPARK_APPS,
        override_table_retention="{{ params.override_table_retention }}", older_than=OLDER_THAN_FROM_PARAMS,
        retain_last="{{ params.retain_last }}",
    ).expand_kwargs(rewrites.output.map(lambda r: {"table": r["table"], "protected_snapshot_ids": r}))

    @task(trigger_rule="one_failed", retries=0)
    def any_table_failed() -> None:
        """Fail the run when any table's task failed (the others still ran): it must not look green."""
        raise RuntimeError("Maintenance failed for some tables of this run; their failed tasks say why.")

    [plans, rewrites, expires] >> any_table_failed()
