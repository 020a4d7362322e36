"""Take and give back a table's maintenance lease: one maintenance run per table at a time.

The lease is held in a lease table of its own in the same catalog (see docs/lease.md), so it
holds across DAGs and across Airflow deployments sharing the catalog, and the maintained table's
metadata is never touched. No JVM: both tasks run in the Airflow worker. The maintenance group
makes them its setup and teardown: the release always runs, and never decides the run's state.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any, cast

from airflow.sdk import BaseOperator, BaseSensorOperator, PokeReturnValue
from airflow.sdk.exceptions import AirflowSensorTimeout, AirflowSkipException

from airflow_lake_provider.core.coercion import coerce_rendered_fields
from airflow_lake_provider.core.identifiers import TableIdentifier
from airflow_lake_provider.core.lease import Action, Lease, LeaseBusy, LeaseSettings, lease_from_xcom
from airflow_lake_provider.core.settings import read_settings, settings_of, takes_settings, with_params
from airflow_lake_provider.hooks.lake import IcebergLakeHook
from airflow_lake_provider.hooks.lease import TableLeaseHook
from airflow_lake_provider.operators.base import task_run

#: The acquire operator's lease settings, each a templated parameter.
LEASE_SETTINGS = settings_of(LeaseSettings)


class IcebergAcquireLeaseOperator(BaseSensorOperator):
    """Take the table's maintenance lease before the steps of a maintenance run.

    Returns the lease (holder, token, expires_at ...; no secret) as XCom ``return_value``; hand it
    to each step's ``lease`` and to :class:`IcebergReleaseLeaseOperator`. While another run holds
    it, ``on_busy`` decides: ``"wait"`` asks again every ``poke_interval_seconds`` (a log line
    each time naming the holder) until it is free or ``wait_timeout_seconds`` passed (then the
    task fails, without retries); ``"skip"`` skips this task, and with it the run's steps, with a
    sentence naming the holder and its expiry; ``"fail"`` fails the task with that sentence. A
    lease not renewed for ``ttl_seconds`` (its run's worker died) is taken over, logged with the
    old holder's name.

    A sensor in ``reschedule`` mode by default: between two asks the task gives its worker slot
    back (``mode="poke"`` keeps the slot and sleeps, for very short waits). Keep
    ``poke_interval_seconds`` at 10 s or more in ``reschedule`` mode: Airflow 3.3's scheduler can
    queue the next ask before the executor has reported the last one, and then fails the task
    ("task instance's state attribute is queued", seen with a 2 s interval under load).

    :param table: ``namespace.table`` (templated).
    :param lake_conn_id: the ``iceberg_lake`` connection.
    :param dry_run: the run changes nothing, so it takes no lease and waits for nobody (templated);
        its steps report on the table as it is.

    The settings of :class:`~airflow_lake_provider.core.lease.LeaseSettings` (templated):
    """

    template_fields: Sequence[str] = ("table", "lake_conn_id", *(s.name for s in LEASE_SETTINGS), "dry_run")
    ui_color = "#fff3c4"

    if TYPE_CHECKING:
        # The operator's dry_run parameter shadows BaseOperator.dry_run(), which a maintenance step never uses.
        dry_run: bool  # type: ignore[assignment]

    @takes_settings(LEASE_SETTINGS)
    def __init__(self, *, table: str, lake_conn_id: str = IcebergLakeHook.default_conn_name, dry_run: bool = False,
                 mode: str = "reschedule", **kwargs: Any) -> None:
        # The sensor's own poke_interval and timeout are set from the rendered values in execute.
        super().__init__(mode=mode, **kwargs)
        self.dry_run = dry_run
        self.table = table
        self.lake_conn_id = lake_conn_id
        self._busy_sentence = ""

    @cached_property
    def lease_hook(self) -> TableLeaseHook:
        return TableLeaseHook(IcebergLakeHook(self.lake_conn_id))

    def execute(self, context: Any) -> dict[str, Any]:
        coerce_rendered_fields(self)
        self._settings = read_settings(LeaseSettings, self)
        self._table = TableIdentifier.parse(self.table).dotted
        self._holder = self._settings.holder_name(task_run(context))
        if self.dry_run:
            self.log.info("A dry run changes nothing, so it takes no maintenance lease on %s.", self._table)
            return Lease(table=self._table, holder=self._holder, ttl_seconds=cast("float", self._settings.ttl_seconds),
                         dry_run=True).to_json()
        # read as seconds by LeaseSettings
        self.poke_interval = cast("float", self._settings.poke_interval_seconds)
        self.timeout = cast("float", self._settings.wait_timeout_seconds)
        try:
            return super().execute(context)
        except AirflowSensorTimeout:
            raise AirflowSensorTimeout(f"{self._busy_sentence} Waited {self._settings.wait_timeout_seconds:g} s "
                                       "(wait_timeout_seconds) for it; this run gives up.") from None

    def poke(self, context: Any) -> PokeReturnValue:
        lease, decision = self.lease_hook.try_acquire(self._table, self._holder, self._settings)
        if lease is not None:
            if decision.action is not Action.ACQUIRE:
                self.log.info("%s", decision.sentence)
            self.log.info("%s holds the maintenance lease on %s until %s (held in %s).", self._holder, self._table,
                          lease.expires_at, lease.lease_table)
            return PokeReturnValue(is_done=True, xcom_value=lease.to_json())
        if self._settings.on_busy == "skip":
            raise AirflowSkipException(f"{decision.sentence} This run skips its maintenance (on_busy='skip').")
        if self._settings.on_busy == "fail":
            raise LeaseBusy(f"{decision.sentence} This run fails (on_busy='fail').")
        self._busy_sentence = decision.sentence
        self.log.info("%s Waiting %g s before asking again (gives up %g s after the first ask).", decision.sentence,
                      self._settings.poke_interval_seconds, self._settings.wait_timeout_seconds)
        return PokeReturnValue(is_done=False)


class IcebergReleaseLeaseOperator(BaseOperator):
    """Give the table's maintenance lease back at the end of a run, whatever became of its steps.

    Meant as the teardown of the acquire task (the group makes it ``release.as_teardown(setups=acquire)``):
    it runs after the steps whatever became of them, a failed run releases too, and its own state
    never decides the run's. A run whose worker was killed leaves a lease that expires after its
    ttl. A lease that is no longer this run's (it expired and another run took it over) is left
    alone, with a log line.

    :param lease: the acquire task's result (e.g. ``acquire.output``, templated); empty: nothing to release.
    :param lake_conn_id: the ``iceberg_lake`` connection.
    """

    template_fields: Sequence[str] = ("lease", "lake_conn_id")
    template_fields_renderers = {"lease": "json"}
    ui_color = "#fff3c4"

    def __init__(self, *, lease: dict[str, Any] | None = None,
                 lake_conn_id: str = IcebergLakeHook.default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.lease = lease
        self.lake_conn_id = lake_conn_id

    def execute(self, context: Any) -> bool:
        coerce_rendered_fields(self)
        lease = lease_from_xcom(self.lease)
        if lease is None or not lease.needed:
            self.log.info("This run took no maintenance lease; nothing to release.")
            return False
        sentence = TableLeaseHook(IcebergLakeHook(self.lake_conn_id)).release(lease)
        self.log.info("%s", sentence)
        return sentence.startswith("Released")


IcebergAcquireLeaseOperator.__doc__ = with_params(IcebergAcquireLeaseOperator.__doc__, LEASE_SETTINGS)
