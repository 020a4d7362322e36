"""lake_maintenance: plan >> rewrite >> expire >> clean on one Iceberg table, on demand.

Trigger it from the UI (the params form) or the REST API with ``{"table": "db.events"}``.
With no ``lake_default`` connection it works on the embedded lake under ``$LAKE_HOME``.
Snapshot IDs flow through XCom: ``plan`` records the snapshot it planned on, ``rewrite``
checks it is still in the table's lineage and returns the snapshots it committed,
``expire`` and ``clean`` never remove those.
"""

from airflow_lake_provider.dag_factory import build_maintenance_dag

dag = build_maintenance_dag(
    "lake_maintenance",
    description="Compact, expire and clean one Iceberg table (on demand)",
)
