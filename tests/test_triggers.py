"""The lake triggers: serialisation round trips, and run() under asyncio on real tables."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from airflow_lake_provider.triggers import LakePollingTrigger
from airflow_lake_provider.triggers.health import IcebergTableHealthTrigger
from airflow_lake_provider.triggers.snapshot import IcebergSnapshotTrigger
from test_sensors import append_small_files, healthy_table

TRIGGERS = [
    IcebergTableHealthTrigger(table="db.events", thresholds={"min_small_files": "10", "max_score": 60},
                              max_partitions=5, lake_conn_id="lake_prod", poll_interval=30, timeout_at=1.8e9),
    IcebergSnapshotTrigger(table="db.events", branch="audit", after_snapshot_id="7205918309417520113",
                           summary_properties={"writer.job-id": 42}, lake_conn_id="lake_prod", poll_interval=5),
    IcebergSnapshotTrigger(table="db.events", after_snapshot_id=-9007199254740993),
]


def _restart(trigger: LakePollingTrigger) -> LakePollingTrigger:
    """What a triggerer does: serialise into the database, then import the class and re-create it."""
    from airflow.sdk._shared.module_loading import import_string
    from airflow.sdk.serde import deserialize, serialize

    classpath, kwargs = trigger.serialize()
    return import_string(classpath)(**deserialize(serialize(kwargs)))


@pytest.mark.parametrize("trigger", TRIGGERS, ids=["health", "snapshot", "snapshot-negative-id"])
def test_serialize_round_trips(trigger):
    classpath, kwargs = trigger.serialize()
    assert classpath == f"{type(trigger).__module__}.{type(trigger).__name__}"
    assert set(kwargs) >= {"table", "lake_conn_id", "poll_interval", "timeout_at"}
    again = _restart(trigger)
    assert type(again) is type(trigger)
    assert again.serialize() == (classpath, kwargs)
    assert vars(again).keys() >= {"table", "lake_conn_id", "poll_interval", "timeout_at"}


def test_serialized_arguments_are_normalised():
    health, snapshot, _ = (t.serialize()[1] for t in TRIGGERS)
    assert health["thresholds"] == {"min_small_files": 10, "max_score": 60.0}
    assert snapshot["after_snapshot_id"] == 7205918309417520113
    assert snapshot["summary_properties"] == {"writer.job-id": "42"}


async def _events(trigger: LakePollingTrigger, *, timeout: float = 30) -> list[dict]:
    async def collect() -> list[dict]:
        return [event.payload async for event in trigger.run()]

    return await asyncio.wait_for(collect(), timeout)


def test_health_trigger_yields_the_report(lake_hook, namespace):
    name = f"{namespace}.events"
    append_small_files(healthy_table(lake_hook.catalog, name), count=2)
    trigger = IcebergTableHealthTrigger(table=name, thresholds={"min_small_files": 2}, poll_interval=0.1)
    [event] = asyncio.run(_events(trigger))
    assert event["status"] == "success"
    assert event["value"]["small_files"] == 2 and event["value"]["crossed"] == ["small_files 2 >= 2 (min_small_files)"]
    assert event["value"]["data_files"] == len(lake_hook.load_table(name).inspect.files())


def test_snapshot_trigger_waits_for_a_commit_made_while_it_runs(lake_hook, namespace):
    name = f"{namespace}.events"
    before = healthy_table(lake_hook.catalog, name).current_snapshot().snapshot_id
    trigger = IcebergSnapshotTrigger(table=name, after_snapshot_id=before, poll_interval=0.1)
    committed: list[int] = []

    def commit_later() -> None:
        time.sleep(1)
        table = append_small_files(lake_hook.catalog.load_table(name), count=1)
        committed.append(table.current_snapshot().snapshot_id)

    writer = threading.Thread(target=commit_later)
    writer.start()
    started = time.monotonic()
    [event] = asyncio.run(_events(trigger))
    writer.join()
    assert time.monotonic() - started >= 1  # it waited for the commit
    assert event["status"] == "success" and event["value"]["snapshot_id"] == committed[0]
    assert event["value"]["parent_snapshot_id"] == before


def test_missing_table_is_waited_on_until_the_deadline(lake_hook, namespace):
    trigger = IcebergSnapshotTrigger(table=f"{namespace}.later", after_snapshot_id=1, poll_interval=0.1,
                                     timeout_at=time.time() + 1)
    [event] = asyncio.run(_events(trigger))
    assert event["status"] == "timeout"
    assert "Last seen: Table" in event["message"] and "does not exist" in event["message"]


def test_table_created_while_waiting_is_picked_up(lake_hook, namespace):
    name = f"{namespace}.later"
    trigger = IcebergTableHealthTrigger(table=name, thresholds={"min_snapshots": 1}, poll_interval=0.1)

    def create_later() -> None:
        time.sleep(0.5)
        healthy_table(lake_hook.catalog, name, days=1)

    creator = threading.Thread(target=create_later)
    creator.start()
    [event] = asyncio.run(_events(trigger))
    creator.join()
    assert event["status"] == "success" and event["value"]["snapshots"] >= 1


def test_a_failing_check_is_one_error_event(lake_hook, namespace):
    name = f"{namespace}.events"
    healthy_table(lake_hook.catalog, name, days=1)
    trigger = IcebergSnapshotTrigger(table=name, after_snapshot_id=12345, poll_interval=0.1)
    [event] = asyncio.run(_events(trigger))
    assert event["status"] == "error"
    assert event["message"].startswith("LakeSnapshotError: Snapshot 12345 is not in the history")


def test_a_restarted_trigger_carries_on(lake_hook, namespace):
    """Stop a waiting trigger (triggerer shutdown), re-create it from serialize(), and it still fires."""
    name = f"{namespace}.events"
    before = healthy_table(lake_hook.catalog, name).current_snapshot().snapshot_id
    trigger = IcebergSnapshotTrigger(table=name, after_snapshot_id=before, poll_interval=0.1,
                                     timeout_at=time.time() + 60)
    with pytest.raises(TimeoutError):
        asyncio.run(_events(trigger, timeout=0.5))  # still waiting when the triggerer stops

    append_small_files(lake_hook.load_table(name), count=1)
    [event] = asyncio.run(_events(_restart(trigger)))
    assert event["status"] == "success"
    assert event["value"]["snapshot_id"] == lake_hook.load_table(name).current_snapshot().snapshot_id
