"""Triggers that poll an Iceberg table's metadata from the triggerer (PyIceberg, no JVM).

:class:`LakePollingTrigger` holds what every lake trigger shares: the table and connection,
the poll loop, the blocking PyIceberg calls run through :func:`asyncio.to_thread`, a missing
table that is logged and waited on, and a deadline that ends the wait with what was seen last.
Each subclass only says what one check is (:meth:`LakePollingTrigger.check`): the sensors call
that same method in ``poke``, so a deferred and a poking sensor decide the same way.

Everything a trigger needs is in :meth:`~LakePollingTrigger.serialize`, so it survives a
triggerer restart (a new triggerer re-creates it from the serialized arguments).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_lake_provider.core.identifiers import TableIdentifier
from airflow_lake_provider.exceptions import LakeTableNotFound

if TYPE_CHECKING:
    from pyiceberg.table import Table

DEFAULT_POLL_INTERVAL = 60.0


@dataclass(frozen=True)
class Probe:
    """The outcome of one check: done or not, one line on what was seen, the XCom value when done."""

    done: bool
    seen: str
    value: dict[str, Any] | None = None


class LakePollingTrigger(BaseTrigger):
    """Poll one table until :meth:`check` is done, then yield one event and return.

    Events: ``{"status": "success", "value": ..., "seen": ...}`` when the check is done;
    ``{"status": "timeout", "message": ...}`` at ``timeout_at`` (epoch seconds), naming what was
    seen last; ``{"status": "error", "message": ...}`` when a check fails (a missing table is not
    a failure: it is logged and waited on).

    :param table: ``namespace.table``.
    :param lake_conn_id: the ``iceberg_lake`` connection (``lake_default``: the embedded lake).
    :param poll_interval: seconds between checks.
    :param timeout_at: when to give up, in seconds since the epoch (``None``: never).
    """

    def __init__(
        self,
        *,
        table: str,
        lake_conn_id: str = "lake_default",
        poll_interval: float = DEFAULT_POLL_INTERVAL,
        timeout_at: float | None = None,
    ) -> None:
        super().__init__()
        self.table = table
        self.lake_conn_id = lake_conn_id
        self.poll_interval = float(poll_interval)
        self.timeout_at = None if timeout_at is None else float(timeout_at)

    # -- what a subclass provides ----------------------------------------------------------------
    def check_kwargs(self) -> dict[str, Any]:
        """The subclass's own constructor arguments (serialized with the common ones)."""
        return {}

    def check_table(self, table: Table) -> Probe:
        """One check of the loaded PyIceberg table (blocking)."""
        raise NotImplementedError

    # -- shared ---------------------------------------------------------------------------------
    def serialize(self) -> tuple[str, dict[str, Any]]:
        classpath = f"{type(self).__module__}.{type(self).__qualname__}"
        return classpath, {
            "table": self.table,
            "lake_conn_id": self.lake_conn_id,
            "poll_interval": self.poll_interval,
            "timeout_at": self.timeout_at,
            **self.check_kwargs(),
        }

    @cached_property
    def hook(self):
        from airflow_lake_provider.hooks.lake import IcebergLakeHook

        return IcebergLakeHook(self.lake_conn_id)

    @property
    def table_name(self) -> str:
        return TableIdentifier.parse(self.table).dotted

    def check(self) -> Probe:
        """Load the table and check it once (blocking). A missing table is a not-done probe."""
        try:
            table = self.hook.load_table(self.table_name)
        except LakeTableNotFound as missing:
            return Probe(False, f"{missing} Waiting for it to be created.")
        return self.check_table(table)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        seen = "no check has finished yet"
        while True:
            try:
                probe = await asyncio.to_thread(self.check)
            except Exception as error:  # one event that says what failed; the task raises it
                self.log.exception("Checking %s failed.", self.table)
                yield TriggerEvent({"status": "error", "message": f"{type(error).__name__}: {error}"})
                return
            if probe.done:
                self.log.info("%s", probe.seen)
                yield TriggerEvent({"status": "success", "value": probe.value, "seen": probe.seen})
                return
            seen = probe.seen
            self.log.info("Not yet: %s", seen)
            remaining = None if self.timeout_at is None else self.timeout_at - time.time()
            if remaining is not None and remaining <= 0:
                message = f"Timed out waiting on {self.table}. Last seen: {seen}"
                yield TriggerEvent({"status": "timeout", "message": message})
                return
            await asyncio.sleep(self.poll_interval if remaining is None else min(self.poll_interval, remaining))
