"""lake_on_demand__<table>: maintain a table when it needs it, with no schedule (event-driven).

For each watched table, an Asset meaning "<table> needs maintenance" is watched by an
``IcebergMaintenanceNeededTrigger`` in the triggerer (PyIceberg metadata only, no JVM): it fires
when the table crosses any threshold (health score, small files, delete ratio, snapshots, commits
since its last maintenance). Each event starts one run of that table's DAG: the leased
plan >> rewrite >> expire >> clean group. A healthy table starts nothing.

Which tables: the Airflow Variable ``lake_watched_tables`` (or the environment variable
``LAKE_WATCHED_TABLES``), a JSON list read when this file is parsed::

    [{"table": "db.events", "thresholds": {"max_score": 70, "min_commits": 50}},
     {"table": "db.orders", "lake_conn_id": "lake_prod", "poll_interval": 300,
      "maintenance": {"min_input_files": 10}}]

``thresholds`` defaults to ``{"max_score": 70, "min_commits": 100}``; ``maintenance`` holds
``lake_maintenance_group`` options. With nothing configured this file defines no DAG. See
docs/event-driven.md.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pendulum
from airflow.sdk import DAG, Asset, AssetWatcher, Variable

from airflow_lake_provider.core.identifiers import TableIdentifier
from airflow_lake_provider.exceptions import LakeConfigError
from airflow_lake_provider.task_group import lake_maintenance_group
from airflow_lake_provider.triggers.maintenance_needed import IcebergMaintenanceNeededTrigger

DEFAULT_THRESHOLDS = {"max_score": 70, "min_commits": 100}
_KEYS = {"table", "lake_conn_id", "thresholds", "poll_interval", "maintenance"}


def watched_tables() -> list[dict[str, Any]]:
    """The watched tables' settings, validated (a bad setting is an import error with a sentence)."""
    # The watched tables decide which DAGs this file defines, so they are read when it is parsed (not in a task).
    text = Variable.get("lake_watched_tables", default=None) or os.environ.get("LAKE_WATCHED_TABLES") or "[]"  # noqa: AIR003
    try:
        entries = json.loads(text)
    except json.JSONDecodeError as error:
        raise LakeConfigError(f"lake_watched_tables is not JSON: {error.msg}.") from None
    if not isinstance(entries, list) or not all(isinstance(e, dict) and "table" in e for e in entries):
        raise LakeConfigError('lake_watched_tables must be a JSON list of objects with a "table" key.')
    for entry in entries:
        unknown = set(entry) - _KEYS
        if unknown:
            raise LakeConfigError(f"lake_watched_tables: unknown keys {sorted(unknown)} for {entry['table']!r}; "
                                  f"expected {sorted(_KEYS)}.")
    return entries


def needs_maintenance_asset(table: str) -> Asset:
    """The signal "<table> needs maintenance" (not the table's data Asset: its consumers must not run)."""
    name = TableIdentifier.parse(table).dotted
    return Asset(name=f"{name} needs maintenance", uri=f"iceberg-maintenance://{name.replace('.', '/')}")


for entry in watched_tables():
    table = TableIdentifier.parse(entry["table"]).dotted
    conn_id = entry.get("lake_conn_id", "lake_default")
    signal = needs_maintenance_asset(table)
    signal.watchers.append(AssetWatcher(
        name=f"needs_maintenance__{table.replace('.', '__')}",
        trigger=IcebergMaintenanceNeededTrigger(table=table, lake_conn_id=conn_id,
                                                thresholds=entry.get("thresholds") or DEFAULT_THRESHOLDS,
                                                poll_interval=float(entry.get("poll_interval", 60)))))
    dag_id = f"lake_on_demand__{table.replace('.', '__')}"
    with DAG(dag_id, description=f"Maintain {table} when it needs it (event-driven)", schedule=[signal],
             start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), catchup=False, max_active_runs=1,
             tags=["iceberg", "maintenance", "event-driven"]) as dag:
        lake_maintenance_group(table=table, lake_conn_id=conn_id, group_id="maintenance", prefix_group_id=False,
                               **entry.get("maintenance", {}))
    globals()[dag_id] = dag
