"""Airflow Assets for maintained tables: what a step declares, and the event it emits.

A table's Asset is named by its location (:mod:`airflow_lake_provider.core.naming`: the URI
OpenLineage's Spark integration gives an Iceberg table, ``s3://bucket/wh/db/events``) with the
name ``<catalog>.<namespace>.<table>``. The location is only known once the catalog is read, and
the table is often templated, so each step that can change a table declares the asset alias
:data:`MAINTENANCE_ALIAS` as its outlet and, at the end of a run that changed the table, adds an
event for the table's Asset through it. A run that changed nothing adds none. See docs/assets.md.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import Asset, AssetAlias

from airflow_lake_provider.core.asset_events import maintenance_event_extra
from airflow_lake_provider.core.health import table_health
from airflow_lake_provider.core.naming import table_asset_name, table_asset_uri

#: The outlet every table-changing step declares; events name the table's own Asset.
MAINTENANCE_ALIAS = "iceberg-table-maintenance"


def table_asset(table: str, location: str, *, catalog_name: str = "lake") -> Asset:
    """The Asset of ``table`` (``namespace.table``) whose files live at ``location``."""
    return Asset(name=table_asset_name(catalog_name, table), uri=table_asset_uri(location))


def lake_table_asset(table: str, lake_conn_id: str = "lake_default") -> Asset:
    """The Asset of a table, its location read from the catalog (for ``schedule=[...]`` downstream).

    This reads the catalog when the DAG file is parsed; where that is unwelcome, write the
    location down and use :func:`table_asset`.
    """
    from airflow_lake_provider.hooks.lake import IcebergLakeHook

    hook = IcebergLakeHook(lake_conn_id)
    return table_asset(table, hook.load_table(table).location(), catalog_name=hook.config.name)


def maintenance_alias() -> AssetAlias:
    return AssetAlias(name=MAINTENANCE_ALIAS)


def emit_table_event(context: Any, table: str, location: str, catalog_name: str, extra: dict[str, Any]) -> Asset:
    """Add an event for the table's Asset through the maintenance alias."""
    asset = table_asset(table, location, catalog_name=catalog_name)
    context["outlet_events"][maintenance_alias()].add(asset, extra=extra)
    return asset


def announce_table_change(context: Any, lake_hook: Any, step: str, table: str, before: dict[str, Any],
                          after: dict[str, Any], result: Any, log: Any) -> None:
    """After a step on ``table``: an event for its Asset carrying the step's figures, if it changed the table."""
    extra = maintenance_event_extra(step, table, before, after, result)
    if extra is None:
        log.info("%s changed nothing: no asset event.", table)
        return
    loaded = lake_hook.load_table(table)
    extra["health_score"] = table_health(loaded, table_name=table).score
    asset = emit_table_event(context, table, loaded.location(), lake_hook.config.name, extra)
    log.info("Asset event for %s (%s): %s", asset.name, asset.uri, extra)
