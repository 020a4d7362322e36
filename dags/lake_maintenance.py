"""lake_maintenance: plan >> rewrite >> expire >> clean on one Iceberg table.

Trigger it from the UI (the params form below) or the REST API with ``{"table": "db.events"}``.
With no ``lake_default`` connection it works on the embedded lake under ``$LAKE_HOME``.

Snapshot IDs flow through XCom: ``plan`` records the snapshot it planned on, ``rewrite``
checks that snapshot is still in the table's lineage and returns the snapshots it committed,
``expire`` and ``clean`` never remove those.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG, Param

from airflow_lake_provider.operators.clean import IcebergCleanPolicyOperator
from airflow_lake_provider.operators.expire import IcebergExpireSnapshotsOperator
from airflow_lake_provider.operators.plan import IcebergRewritePlanOperator
from airflow_lake_provider.operators.rewrite import IcebergRewriteDataFilesOperator
from airflow_lake_provider.retention import CleanPolicy

TABLE_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+$"

with DAG(
    dag_id="lake_maintenance",
    description="Compact, expire and clean one Iceberg table",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    render_template_as_native_obj=True,
    tags=["iceberg", "maintenance"],
    params={
        "table": Param(
            type="string", pattern=TABLE_PATTERN, title="Table",
            description="The table to maintain, as namespace.table (for example demo.events).",
        ),
        "target_file_size_bytes": Param(
            None, type=["null", "integer"], minimum=1024 * 1024, maximum=16 * 1024**3,
            title="Target file size (bytes)",
            description="Size the rewrite aims for. Empty: the table's write.target-file-size-bytes (512 MiB by default).",
        ),
        "min_input_files": Param(
            5, type="integer", minimum=1, maximum=100000, title="Minimum input files",
            description="A partition's group of small files is compacted only when it has at least this many files.",
        ),
        "partition_filter": Param(
            None, type=["null", "string"], title="Partition filter",
            description="Only plan these rows, as a PyIceberg filter, e.g. day = '2026-01-01'. Empty: whole table.",
        ),
        "strategy": Param("binpack", enum=["binpack", "sort", "zorder"], title="Rewrite strategy"),
        "retain_last": Param(
            1, type="integer", minimum=1, maximum=10000, title="Snapshots to keep at least",
            description="Expiry never goes below this many snapshots of main.",
        ),
        "expire_older_than_hours": Param(
            120, type="integer", minimum=0, maximum=24 * 3650, title="Expire snapshots older than (hours)",
            description="Snapshots older than this are expired (Iceberg's default is 5 days = 120 h).",
        ),
        "clean_policy": Param(
            CleanPolicy.KEEP_LATEST_COMMITS.value, enum=[p.value for p in CleanPolicy], title="Clean policy",
            description="Which snapshots the clean step keeps: the last N commits, the last N versions of every "
            "partition, or everything current in the last N hours.",
        ),
        "clean_retained": Param(
            10, type="integer", minimum=1, maximum=100000, title="Clean policy N",
            description="N for the clean policy (commits, versions or hours).",
        ),
        "orphan_older_than_hours": Param(
            72, type="integer", minimum=24, maximum=24 * 3650, title="Orphan files older than (hours)",
            description="Unreferenced files younger than this are never deleted (24 h at least: writers in flight own them).",
        ),
        "dry_run": Param(
            False, type="boolean", title="Dry run",
            description="Plan and report what expiry and clean would remove; change nothing.",
        ),
    },
) as dag:
    plan = IcebergRewritePlanOperator(
        task_id="plan",
        table="{{ params.table }}",
        target_file_size_bytes="{{ params.target_file_size_bytes }}",
        min_input_files="{{ params.min_input_files }}",
        partition_filter="{{ params.partition_filter }}",
    )
    rewrite = IcebergRewriteDataFilesOperator(
        task_id="rewrite",
        table="{{ params.table }}",
        plan=plan.output,
        strategy="{{ params.strategy }}",
        rewrite_position_deletes=True,
        dry_run="{{ params.dry_run }}",
    )
    expire = IcebergExpireSnapshotsOperator(
        task_id="expire",
        table="{{ params.table }}",
        older_than="{{ params.expire_older_than_hours }}h",
        retain_last="{{ params.retain_last }}",
        protected_snapshot_ids="{{ [ti.xcom_pull(task_ids='rewrite')] }}",
        dry_run="{{ params.dry_run }}",
        trigger_rule="none_failed",
    )
    clean = IcebergCleanPolicyOperator(
        task_id="clean",
        table="{{ params.table }}",
        policy="{{ params.clean_policy }}",
        retained="{{ params.clean_retained }}",
        protected_snapshot_ids="{{ [ti.xcom_pull(task_ids='rewrite'), ti.xcom_pull(task_ids='expire')] }}",
        orphan_older_than_hours="{{ params.orphan_older_than_hours }}",
        dry_run="{{ params.dry_run }}",
        trigger_rule="none_failed",
    )
    plan >> rewrite >> expire >> clean
