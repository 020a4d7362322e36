"""lake_fleet_maintenance: keep every table of a fleet healthy, paying for Spark only where needed.

1. ``list_tables``: the tables to look at: the ``tables`` param, else every table of the
   ``namespace`` param, else the JSON list in the Airflow Variable ``lake_fleet_tables``.
2. ``plan`` (one task, no JVM): plan every table from its metadata, each as the single-table
   plan operator does. A missing or broken table is named in the task's failure; the others
   are planned and handed on.
3. ``select_work``: the tables whose plan has file groups, in batches of ``tables_per_application``.
4. ``rewrite`` (mapped over the batches): one Spark application per batch compacts its tables
   one after another (one JVM start per batch, not per table), at most
   ``max_active_tis_per_dag`` at a time, in the ``lake_spark`` pool when it exists
   (``LAKE_SPARK_POOL``) so all DAGs share one bound on Spark applications. Each table's
   maintenance lease is taken here (a table another run holds is left for the next run).
5. ``expire`` (mapped over the compacted tables) renews the table's lease; ``release_lease``
   gives it back whatever became of the expiry (docs/lease.md).
6. ``any_table_failed``: runs only when some task failed, and fails, so the run is marked
   failed although every other table was maintained.

Where the time of a fleet goes, and why one task per step: docs/operators/fleet.md.
"""

from __future__ import annotations

import json
import os
from typing import Any, cast

import pendulum
from airflow.sdk import DAG, Param, Variable, task

from airflow_lake_provider.dag_factory import retention_params
from airflow_lake_provider.operators.expire import IcebergExpireSnapshotsOperator
from airflow_lake_provider.operators.fleet import IcebergFleetPlanOperator, IcebergFleetRewriteOperator
from airflow_lake_provider.operators.lease import IcebergReleaseLeaseOperator

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
                        description="namespace.table names. Empty: the namespace below, "
                        "or the lake_fleet_tables Variable."),
        "namespace": Param(None, type=["null", "string"], title="Namespace",
                           description="Maintain every table of this namespace (when Tables is empty)."),
        "min_input_files": Param(5, type="integer", minimum=1, title="Minimum input files"),
        "tables_per_application": Param(10, type="integer", minimum=1, maximum=200,
                                        title="Tables per Spark application",
                                        description="Tables compacted one after another by one Spark application."),
        **retention_params(),
    },
) as dag:

    @task
    def list_tables(params: dict[str, Any] | None = None) -> list[str]:
        """Each table once (one maintenance task per table and run), in the order given."""
        params = params or {}  # Airflow passes the run's params (a context key)
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
    # The XComArgs below are the upstream results once Airflow resolves them.
    plans = IcebergFleetPlanOperator(task_id="plan", tables=cast("list[str]", tables),
                                     plan_settings={"min_input_files": "{{ params.min_input_files }}"})

    @task(trigger_rule="all_done")
    def select_work(plans: list | None, params: dict[str, Any] | None = None) -> list[list[dict]]:
        """Tables with something to compact, in batches (one Spark application each)."""
        params = params or {}  # Airflow passes the run's params (a context key)
        work = [{"table": p["table"], "plan": p} for p in plans or [] if p["groups"]]
        size = int(params["tables_per_application"])
        return [work[i:i + size] for i in range(0, len(work), size)]

    rewrites = IcebergFleetRewriteOperator.partial(
        task_id="rewrite", pool=SPARK_POOL, max_active_tis_per_dag=MAX_CONCURRENT_SPARK_APPS,
        release_leases=False,  # handed on to each table's expire; release_lease gives them back
    ).expand(work=select_work(cast("list[Any]", plans.output)))

    @task
    def compacted(batches: list) -> list[dict]:
        """The expire step's arguments, one per compacted table: its rewrite's snapshots protected,
        and the table's maintenance lease the rewrite took (the expiry renews it, release gives it back)."""
        return [{"table": r["table"], "protected_snapshot_ids": r, "lease": r.get("lease")}
                for batch in batches for r in batch or []]

    compacted_tables = compacted(cast("list[Any]", rewrites.output))
    expires = IcebergExpireSnapshotsOperator.partial(
        task_id="expire", pool=SPARK_POOL, max_active_tis_per_dag=MAX_CONCURRENT_SPARK_APPS,
        override_table_retention="{{ params.override_table_retention }}", older_than="{{ params.older_than }}",
        retain_last="{{ params.retain_last }}",
    ).expand_kwargs(compacted_tables)
    releases = IcebergReleaseLeaseOperator.partial(task_id="release_lease", trigger_rule="all_done").expand(
        lease=compacted_tables.map(lambda c: c["lease"]))
    expires >> releases

    @task(trigger_rule="one_failed", retries=0)
    def any_table_failed() -> None:
        """Fail the run when any table's task failed (the others still ran): it must not look green."""
        raise RuntimeError("Maintenance failed for some tables of this run; their failed tasks say why.")

    [plans, rewrites, expires, releases] >> any_table_failed()
