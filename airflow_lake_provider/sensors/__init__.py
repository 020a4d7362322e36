"""Sensors that start maintenance when a table needs it, from metadata alone (no JVM).

:class:`LakeSensor` is what the lake sensors share: the table and connection, the three ways
of waiting (``poke``, ``reschedule``, ``deferrable``), and a timeout that says what was seen
last. A sensor builds the trigger it would defer to and calls that trigger's check in
``poke``: waiting in the worker and waiting in the triggerer decide the same way.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseSensorOperator, PokeReturnValue
from airflow.sdk.configuration import conf
from airflow.sdk.exceptions import AirflowException, AirflowSensorTimeout

from airflow_lake_provider.core.coercion import coerce_rendered_fields
from airflow_lake_provider.triggers import LakePollingTrigger

if TYPE_CHECKING:
    from airflow.sdk import Context

# The task's own deferral timeout is this much later than the trigger's deadline, so the
# trigger ends the wait itself, with a message naming what it saw last.
DEFERRAL_GRACE_SECONDS = 60


class LakeSensor(BaseSensorOperator):
    """Base of the lake sensors.

    :param table: the table, ``namespace.table`` (templated).
    :param lake_conn_id: the ``iceberg_lake`` connection; ``lake_default`` falls back to the embedded lake (templated).
    :param deferrable: wait in the triggerer instead of a worker (default: Airflow's
        ``operators.default_deferrable``). The first check runs in the worker.
    :param poll_interval: seconds between checks in every mode (sets ``poke_interval``).
    """

    template_fields: Sequence[str] = ("table", "lake_conn_id")
    ui_color = "#d6f0e0"

    def __init__(
        self,
        *,
        table: str,
        lake_conn_id: str = "lake_default",
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        poll_interval: float | None = None,
        **kwargs: Any,
    ) -> None:
        if poll_interval is not None:
            kwargs["poke_interval"] = poll_interval
        super().__init__(**kwargs)
        self.table = table
        self.lake_conn_id = lake_conn_id
        self.deferrable = deferrable
        self._last_seen = "no check has run yet"
        self._trigger: LakePollingTrigger | None = None

    def make_trigger(self, *, timeout_at: float | None = None) -> LakePollingTrigger:
        """The trigger for the rendered arguments (validates them)."""
        raise NotImplementedError

    def poke(self, context: Context) -> PokeReturnValue:
        if self._trigger is None:
            self._trigger = self.make_trigger()
        probe = self._trigger.check()
        self._last_seen = probe.seen
        self.log.info("%s", probe.seen if probe.done else f"Not yet: {probe.seen}")
        return PokeReturnValue(is_done=probe.done, xcom_value=probe.value)

    def execute(self, context: Context) -> Any:
        coerce_rendered_fields(self)
        if not self.deferrable:
            try:
                return super().execute(context)
            except AirflowSensorTimeout as timeout:
                raise AirflowSensorTimeout(f"{timeout} Last seen: {self._last_seen}") from None
        result = self.poke(context)
        if result.is_done:
            return result.xcom_value
        self.defer(
            trigger=self.make_trigger(timeout_at=time.time() + self.timeout),
            method_name="execute_complete",
            timeout=timedelta(seconds=self.timeout + DEFERRAL_GRACE_SECONDS),
        )

    def execute_complete(self, context: Context, event: dict[str, Any]) -> Any:
        status = event.get("status")
        if status == "success":
            self.log.info("%s", event.get("seen"))
            return event.get("value")
        if status == "timeout":
            raise AirflowSensorTimeout(event.get("message"))
        raise AirflowException(f"Waiting on {self.table} failed: {event.get('message', event)}")
