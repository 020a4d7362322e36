"""Event-driven maintenance: when a table needs work, and a trigger that says so once per need.

The decision and the trigger's poll loop run against real PyIceberg tables of the shared lake
(no Airflow stack); tests/test_event_driven_dag.py runs the shipped DAG on a real triggerer.
"""

from __future__ import annotations

import asyncio
import datetime as dt

import pytest
from demo_data import _batch, create_events_table

from airflow_lake_provider.core.maintenance_need import MaintenanceNeed, assess, commits_since_maintenance
from airflow_lake_provider.exceptions import LakeConfigError
from airflow_lake_provider.triggers.maintenance_needed import IcebergMaintenanceNeededTrigger

DAY = dt.date(2026, 1, 1)


def _commit(table, *, maintenance: bool = False, start: int = 10_000):
    """One small append; a maintenance commit carries the airflow.* properties every step's commit has."""
    properties = {"airflow.dag-id": "lake_maintenance", "airflow.task-id": "rewrite"} if maintenance else {}
    table.append(_batch(start, 3, DAY, ["a"]), snapshot_properties=properties)


def test_commits_since_the_last_maintenance_are_read_from_the_tables_history(lake_hook, namespace):
    table = create_events_table(lake_hook.catalog, f"{namespace}.t", days=1, commits_per_day=4, rows_per_commit=3)
    assert commits_since_maintenance(table) == (4, None)  # never maintained: every commit counts
    _commit(table, maintenance=True)
    maintained = lake_hook.load_table(f"{namespace}.t")
    assert commits_since_maintenance(maintained) == (0, maintained.current_snapshot().snapshot_id)
    for i in range(2):
        _commit(maintained, start=20_000 + 10 * i)
    assert commits_since_maintenance(lake_hook.load_table(f"{namespace}.t"))[0] == 2


@pytest.mark.parametrize(("given", "message"), [
    ({}, "give at least one of"),
    ({"min_commits": 0}, "min_commits"),
    ({"max_score": 150}, "max_score"),
    ({"min_delete_ratio": 2}, "min_delete_ratio"),
])
def test_a_need_without_a_sensible_threshold_is_refused(bad_input, given, message):
    with pytest.raises(LakeConfigError, match=message) as refused:
        IcebergMaintenanceNeededTrigger(table="db.events", thresholds=given)
    bad_input("IcebergMaintenanceNeededTrigger(thresholds=...)", given, refused.value)


def test_any_threshold_crossed_is_a_reason(lake_hook, namespace):
    table = create_events_table(lake_hook.catalog, f"{namespace}.t", days=1, commits_per_day=5, rows_per_commit=3)
    busy = assess(table, MaintenanceNeed.parse(min_commits=5, max_score=0), table_name="t")
    assert busy["reasons"] == ["5 commits since the last maintenance >= 5 (min_commits)"]
    small = assess(table, MaintenanceNeed.parse(min_small_files=5), table_name="t")
    assert len(small["reasons"]) == 1 and "small_files 5 >= 5" in small["reasons"][0]
    calm = assess(table, MaintenanceNeed.parse(min_commits=6, min_small_files=6), table_name="t")
    assert calm["reasons"] == [] and calm["snapshot_id"] == table.current_snapshot().snapshot_id


def _events_within(trigger, seconds: float) -> list[dict]:
    """Run the trigger's loop for ``seconds`` and collect its events (as the triggerer would)."""
    events: list[dict] = []

    async def collect():
        async for event in trigger.run():
            events.append(event.payload)

    async def bounded():
        try:
            await asyncio.wait_for(collect(), timeout=seconds)
        except asyncio.TimeoutError:
            pass

    asyncio.run(bounded())
    return events


def test_the_trigger_fires_once_per_need_and_again_only_after_maintenance(lake_hook, namespace):
    name = f"{namespace}.busy"
    table = create_events_table(lake_hook.catalog, name, days=1, commits_per_day=3, rows_per_commit=3)
    trigger = IcebergMaintenanceNeededTrigger(table=name, thresholds={"min_commits": 3}, poll_interval=0.2)
    classpath, kwargs = trigger.serialize()
    assert classpath.endswith("IcebergMaintenanceNeededTrigger") and kwargs["thresholds"] == {"min_commits": 3}

    first = _events_within(trigger, 2)
    assert len(first) == 1, first  # polled ~10 times, said it once
    assert first[0]["table"] == name and first[0]["snapshot_id"] == table.current_snapshot().snapshot_id
    assert first[0]["reasons"] == ["3 commits since the last maintenance >= 3 (min_commits)"]

    _commit(table, start=50_000)  # more commits, no maintenance yet: still the same need, still quiet
    assert _events_within(trigger, 1.5) == []

    _commit(lake_hook.load_table(name), maintenance=True, start=60_000)  # maintenance ran
    assert _events_within(trigger, 1.5) == []  # and the table needs nothing now
    for i in range(3):
        _commit(lake_hook.load_table(name), start=70_000 + 10 * i)
    again = _events_within(trigger, 2)
    assert len(again) == 1 and again[0]["commits_since_maintenance"] == 3


def test_a_healthy_or_missing_table_fires_nothing(lake_hook, namespace):
    create_events_table(lake_hook.catalog, f"{namespace}.calm", days=1, commits_per_day=2, rows_per_commit=3)
    calm = IcebergMaintenanceNeededTrigger(table=f"{namespace}.calm", thresholds={"min_commits": 3}, poll_interval=0.2)
    assert _events_within(calm, 1.5) == []
    missing = IcebergMaintenanceNeededTrigger(table=f"{namespace}.nowhere", thresholds={"min_commits": 1},
                                              poll_interval=0.2)
    assert _events_within(missing, 1.0) == []
