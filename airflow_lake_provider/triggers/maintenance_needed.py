"""Event-driven maintenance: a trigger for ``AssetWatcher`` that fires when a table needs work.

Polls the table's metadata with PyIceberg in the triggerer (no JVM) and fires once per need: after
an event for snapshot S it stays quiet until a maintenance commit newer than S appears (the
maintenance ran) or ``refire_after_seconds`` pass (the run failed or never came). A missing
table is waited on. See docs/event-driven.md.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from airflow.triggers.base import BaseEventTrigger, TriggerEvent

from airflow_lake_provider.core.maintenance_need import MaintenanceNeed, assess
from airflow_lake_provider.triggers import DEFAULT_POLL_INTERVAL, LakePollingTrigger, Probe

if TYPE_CHECKING:
    from pyiceberg.table import Table

DEFAULT_REFIRE_AFTER_SECONDS = 6 * 3600.0


class IcebergMaintenanceNeededTrigger(LakePollingTrigger, BaseEventTrigger):
    """Fire when ``table`` crosses any threshold; the event carries the table, snapshot and reasons.

    :param table: ``namespace.table``.
    :param thresholds: any of ``max_score``, ``min_small_files``, ``min_delete_ratio``,
        ``min_snapshots``, ``min_commits`` (commits since the last maintenance commit).
    :param lake_conn_id: the ``iceberg`` or ``iceberg_lake`` connection.
    :param poll_interval: seconds between checks (default 60).
    :param refire_after_seconds: fire again for a table still in need this long after an event
        with no maintenance since (default 6 h).
    """

    def __init__(self, *, table: str, thresholds: dict[str, Any], lake_conn_id: str = "lake_default",
                 poll_interval: float = DEFAULT_POLL_INTERVAL,
                 refire_after_seconds: float = DEFAULT_REFIRE_AFTER_SECONDS, timeout_at: float | None = None) -> None:
        super().__init__(table=table, lake_conn_id=lake_conn_id, poll_interval=poll_interval, timeout_at=timeout_at)
        self.need = MaintenanceNeed.parse(**thresholds)
        self.thresholds = self.need.to_dict()
        self.refire_after_seconds = float(refire_after_seconds)
        self._fired: tuple[int | None, float] | None = None  # (snapshot ID, when) of the last event
        self._maintenance_at_fire: int | None = None  # the last maintenance commit when it fired

    def check_kwargs(self) -> dict[str, Any]:
        return {"thresholds": dict(self.thresholds), "refire_after_seconds": self.refire_after_seconds}

    def check_table(self, table: Table) -> Probe:
        need = assess(table, self.need, table_name=self.table_name)
        figures = (f"{self.table_name} at snapshot {need['snapshot_id']}: score {need['score']}, "
                   f"{need['small_files']} small files, {need['commits_since_maintenance']} commits since maintenance")
        if not need["reasons"]:
            return Probe(False, f"{figures}; needs nothing ({self.thresholds}).")
        if self._fired is not None:
            fired_snapshot, fired_at = self._fired
            maintained_since = need["last_maintenance_snapshot_id"] != self._maintenance_at_fire
            if not maintained_since and time.time() - fired_at < self.refire_after_seconds:
                return Probe(False, f"{figures}; already announced at snapshot {fired_snapshot}, waiting for "
                                    "its maintenance.")
        return Probe(True, f"{figures}; needs work: {'; '.join(need['reasons'])}.", need)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        """Poll forever; one event per need (an AssetWatcher's trigger never ends)."""
        while True:
            try:
                probe = await asyncio.to_thread(self.check)
            except Exception:  # a catalog hiccup must not end the watch: log it and poll again
                self.log.exception("Checking %s failed; trying again in %ss.", self.table, self.poll_interval)
                probe = None
            if probe is not None and probe.done and probe.value is not None:  # a need found carries its figures
                self.log.info("%s", probe.seen)
                self._fired = (probe.value["snapshot_id"], time.time())
                self._maintenance_at_fire = probe.value["last_maintenance_snapshot_id"]
                yield TriggerEvent(probe.value)
            elif probe is not None:
                self.log.info("Not now: %s", probe.seen)
            await asyncio.sleep(self.poll_interval)
