"""One maintenance run per table at a time: the lease record, its expiry and every decision about it.

The lease of a table lives in a small **lease table** of its own, in the catalog's
``lake_maintenance`` namespace (:func:`lease_table_name`; the connection's ``lease_namespace``
names another), and changes only through the catalog's atomic commit on that table (the hook,
:mod:`airflow_lake_provider.hooks.lease`, makes the commits). The maintained table's metadata is
never touched: the lease works on every table the steps can maintain (formats v1 to v3, whoever
wrote it), and the worker needs no commit rights on it. Iceberg's commit requirements cannot
assert a property's value, only where a ref points (or that it is absent), so the lease is held by
refs of the lease table:

* the **lease tag** ``lake-maintenance-lease``: present while some run holds the lease. Taking a
  free lease requires it absent, so of two runs taking it at once exactly one commit succeeds;
* the holder's **fence tag** ``lake-maintenance-lease-<token>``, created in the same commit with a
  fresh random token. Renewing, releasing and taking over an expired lease each require the fence
  tag of the token they read, and a takeover removes it: a run whose lease was taken over, or a
  second run taking over the same expired lease from the same stale read, fails its commit. Tokens
  are never reused, so no sequence of other commits can make a stale requirement true again;
* the **lease property** ``lake.maintenance.lease``: the record (holder, token, times) as JSON,
  written in the same commits, for people and for the expiry decision.

Pure: no Airflow, no PyIceberg. Times are epoch milliseconds of the deciding worker's clock.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
import re
import socket
import uuid
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, ClassVar, cast

from airflow_lake_provider.core.coercion import Seconds, coerce, is_none, mapping
from airflow_lake_provider.core.contract_base import Contract
from airflow_lake_provider.core.settings import setting
from airflow_lake_provider.exceptions import LakeConfigError, LakeError

if TYPE_CHECKING:
    from airflow_lake_provider.core.airflow_run import AirflowRun

LEASE_TAG = "lake-maintenance-lease"
FENCE_TAG_PREFIX = f"{LEASE_TAG}-"
LEASE_PROPERTY = "lake.maintenance.lease"
#: The tags' own max-ref-age-ms: 100 years, so no retention ever removes a lease tag as too old.
LEASE_TAG_MAX_REF_AGE_MS = 100 * 365 * 24 * 3600 * 1000
#: The namespace of the lease tables unless the lake connection's ``lease_namespace`` names another:
#: beside the maintained tables' own namespaces, so a listing of a user's namespace (the fleet's)
#: never meets them.
DEFAULT_LEASE_NAMESPACE = "lake_maintenance"

ON_BUSY_MODES = ("wait", "skip", "fail")
#: Steps renew the lease when they start and every third of the ttl while their job runs, so the
#: ttl only has to outlast the gaps between steps (a task queued in a pool); a crashed run frees
#: the table after it, within the acquire task's default wait.
DEFAULT_TTL_SECONDS = 3600
DEFAULT_WAIT_TIMEOUT_SECONDS = 2 * 3600
DEFAULT_POKE_INTERVAL_SECONDS = 60
_TOKEN = re.compile(r"^[0-9a-f]{32}$")


class LeaseBusy(LakeError):
    """Another run holds the table's maintenance lease (the message names it and its expiry)."""


class LeaseLost(LakeError):
    """This run no longer holds the lease it was given: a step refuses to touch the table."""


def lease_table_name(table: str, namespace: str = DEFAULT_LEASE_NAMESPACE) -> str:
    """The lease table of ``table`` (``namespace.table``) in the lease ``namespace``: readable, lower
    case (REST servers such as S3 Tables take no upper case), and unique through a hash of the exact name.

    ``sales.Events`` -> ``lake_maintenance.sales__events_<8 hex>``.
    """
    readable = "__".join(table.split(".")).lower()[:80]
    digest = hashlib.sha256(table.encode()).hexdigest()[:8]
    return f"{namespace}.{readable}_{digest}"


def new_token() -> str:
    return uuid.uuid4().hex


def fence_tag(token: str) -> str:
    return f"{FENCE_TAG_PREFIX}{token}"


def iso(ms: int | None) -> str | None:
    """Epoch milliseconds as UTC ISO text (seconds), for messages and the XCom."""
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).isoformat(timespec="seconds")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Lease(Contract):
    """The lease record: in the lease table's ``lake.maintenance.lease`` property and the acquire task's XCom.

    ``token`` is no secret: it names the holder's fence tag, visible in the lease table's refs to
    anyone who may read it. ``token=None`` means no lease was taken: a dry run (``dry_run``)
    changes nothing, not even the lease. ``took_over_from`` names the expired holder a takeover
    replaced.
    """

    what: ClassVar[str] = "maintenance lease"

    table: str
    holder: str
    token: str | None = None
    acquired_at_ms: int = 0
    expires_at_ms: int = 0
    ttl_seconds: float = DEFAULT_TTL_SECONDS
    took_over_from: str | None = None
    dry_run: bool = False  # a dry run changes nothing, so it takes no lease (token None)
    expires_at: str | None = None  # ISO, derived: for people reading the XCom
    lease_table: str | None = None  # where the lease is held (None: a dry run's, held nowhere)

    def __post_init__(self) -> None:
        object.__setattr__(self, "expires_at", iso(self.expires_at_ms) if self.token else None)

    @property
    def needed(self) -> bool:
        return self.token is not None

    def expired(self, now_ms: int) -> bool:
        return now_ms >= self.expires_at_ms

    def property_value(self) -> str:
        """The property's JSON: the record without the table (the property sits on it)."""
        record = self.to_json()
        for derived in ("table", "expires_at", "dry_run", "lease_table"):
            record.pop(derived)
        return json.dumps(record, sort_keys=True)

    @classmethod
    def from_property(cls, table: str, text: str | None, lease_table: str) -> Lease | None:
        """The record in the property, ``None`` when absent or unreadable (treated as broken by :func:`read_state`)."""
        if not text:
            return None
        try:
            data = json.loads(text)
            lease = cls.from_json({**data, "table": table, "lease_table": lease_table})
        except (ValueError, LakeConfigError, TypeError):
            return None
        if (not isinstance(lease.token, str) or not _TOKEN.match(lease.token)
                or not isinstance(lease.expires_at_ms, int)):
            return None
        return lease

    def describe(self) -> str:
        return f"{self.holder} (until {self.expires_at})"


@dataclasses.dataclass(frozen=True, kw_only=True)
class LeaseSettings:
    """How a run takes a table's lease: its time to live, what it does while another run holds it,
    and who it is. Declared once: the acquire operator takes each as a parameter, the fleet's rewrite
    ``ttl_seconds`` and ``holder``, the maintenance group's ``lease=`` any of them (docs/lease.md).

    Read and checked when made (a duration as ``"1h"``, ``"PT30M"`` or a ``timedelta`` becomes
    seconds); a wrong value is a :class:`LakeConfigError` sentence naming the setting.
    """

    ttl_seconds: Seconds = setting(DEFAULT_TTL_SECONDS, doc=(
        "How long the lease lives unless renewed. Every step renews it when it starts and every third of the "
        "ttl while its Spark job runs, so it must outlast the longest gap between two steps of a run (a task "
        "queued in a pool); a crashed run's lease expires after it. Like every ``*_seconds`` setting, a number "
        "of seconds or a duration (``'1h'``, ``'PT30M'``, a ``timedelta``)."))
    on_busy: str = setting("wait", doc=(
        "While another run holds the lease: ``'wait'`` (until it is free; after ``wait_timeout_seconds``, "
        "fail without retries), ``'skip'`` (this run's steps) or ``'fail'``."))
    wait_timeout_seconds: Seconds = setting(DEFAULT_WAIT_TIMEOUT_SECONDS, doc=(
        "How long ``'wait'`` waits at most, from the first ask."))
    poke_interval_seconds: Seconds = setting(DEFAULT_POKE_INTERVAL_SECONDS, doc="How often ``'wait'`` asks again.")
    holder: str | None = setting(None, doc=(
        "Who this Airflow deployment is, the first part of the holder's name ``holder/dag_id/run_id[/map_index]``; "
        "``None``: the worker's host name. Set it when a deployment has several workers, so a retry recognises "
        "its earlier try's lease."))

    def __post_init__(self) -> None:
        ttl = self._seconds("ttl_seconds")
        if not ttl > 0:
            raise LakeConfigError(f"ttl_seconds must be more than 0 seconds (a lease must expire after some "
                                  f"time so a crashed run frees the table); got {self.ttl_seconds!r}.")
        mode = "wait" if is_none(self.on_busy) else str(self.on_busy).strip().lower()
        if mode not in ON_BUSY_MODES:
            raise LakeConfigError(f"on_busy must be one of {', '.join(ON_BUSY_MODES)} (what a run does while "
                                  f"another run holds the table's lease); got {self.on_busy!r}.")
        timeout = self._seconds("wait_timeout_seconds")
        if not timeout >= 0:
            raise LakeConfigError(
                f"wait_timeout_seconds must be 0 or more seconds; got {self.wait_timeout_seconds!r}.")
        poke = self._seconds("poke_interval_seconds")
        if not poke > 0:
            raise LakeConfigError(f"poke_interval_seconds must be more than 0 seconds; "
                                  f"got {self.poke_interval_seconds!r}.")
        holder = None if is_none(self.holder) else str(self.holder)
        for name, value in (("ttl_seconds", ttl), ("on_busy", mode), ("wait_timeout_seconds", timeout),
                            ("poke_interval_seconds", poke), ("holder", holder)):
            object.__setattr__(self, name, value)

    def _seconds(self, name: str) -> float:
        return cast("float", coerce(getattr(self, name), Seconds, what=name))

    @property
    def ttl_ms(self) -> int:
        return int(cast("float", self.ttl_seconds) * 1000)  # read as seconds by __post_init__

    def holder_name(self, run: AirflowRun) -> str:
        """Who holds the lease for ``run``: ``holder/dag_id/run_id[/map_index]``, the deployment being
        ``holder`` or else the worker's host name."""
        return run.lease_holder(self.holder or socket.gethostname())


@dataclasses.dataclass(frozen=True)
class LeaseState:
    """What the lease table's metadata says about the lease of ``table``: the tags and the record.

    ``snapshot_id`` is the lease table's own snapshot, where a new lease's tags go.
    """

    table: str
    lease_table: str  # where it is held
    snapshot_id: int | None
    lease_tag: int | None  # the lease tag's snapshot, None when absent
    fences: Mapping[str, int]  # token -> its fence tag's snapshot
    record: Lease | None

    @property
    def held(self) -> bool:
        return self.lease_tag is not None

    @property
    def consistent(self) -> bool:
        """One lease tag, exactly one fence tag, and the record naming that fence's token (or none of the three)."""
        if not self.held:
            return not self.fences
        return (len(self.fences) == 1 and self.record is not None and self.record.token in self.fences)


def read_state(table: str, lease_table: str, refs: Mapping[str, tuple[str, int]], properties: Mapping[str, str],
               snapshot_id: int | None) -> LeaseState:
    """The lease as the lease table's metadata holds it; ``refs`` maps a ref's name to ``(type, snapshot ID)``."""
    fences = {name.removeprefix(FENCE_TAG_PREFIX): sid for name, (_, sid) in refs.items()
              if name.startswith(FENCE_TAG_PREFIX)}
    lease_tag = refs.get(LEASE_TAG)
    return LeaseState(table, lease_table, snapshot_id, lease_tag[1] if lease_tag else None, fences,
                      Lease.from_property(table, properties.get(LEASE_PROPERTY), lease_table))


class Action(enum.Enum):
    ACQUIRE = "acquire"  # free: take it (requirement: lease tag absent)
    ADOPT = "adopt"  # this very holder holds it already (a retried acquire task): renew it
    TAKE_OVER = "take over"  # held, but expired: take it (requirement: the old fence tag)
    BUSY = "busy"  # held by another run until it expires
    BROKEN = "broken"  # the tags and the record disagree (someone edited them): a person must look


@dataclasses.dataclass(frozen=True)
class Decision:
    action: Action
    sentence: str
    current: Lease | None = None


def decide_acquire(state: LeaseState, holder: str, now_ms: int) -> Decision:
    """What a run named ``holder`` does to take the lease of ``state.table`` at ``now_ms``."""
    table, record = state.table, state.record
    if not state.consistent:
        return Decision(Action.BROKEN, broken_sentence(state))
    if not state.held:
        return Decision(Action.ACQUIRE, f"The maintenance lease on {table} is free.")
    assert record is not None
    if record.holder == holder:
        return Decision(Action.ADOPT, f"{holder} already holds the maintenance lease on {table} "
                                      f"(an earlier try of this task took it); renewing it.", record)
    if record.expired(now_ms):
        return Decision(Action.TAKE_OVER, f"The maintenance lease on {table} held by {record.holder} expired at "
                                          f"{record.expires_at} (that run stopped renewing it, e.g. its worker "
                                          f"died); taking it over.", record)
    return Decision(Action.BUSY, busy_sentence(record), record)


def busy_sentence(record: Lease) -> str:
    return (f"Another maintenance run holds the lease on {record.table}: {record.holder}, since "
            f"{iso(record.acquired_at_ms)}, until {record.expires_at} unless it releases or renews it first.")


def broken_sentence(state: LeaseState) -> str:
    tags = ", ".join([LEASE_TAG] * state.held + [fence_tag(t) for t in sorted(state.fences)]) or "no lease tag"
    return (f"The maintenance lease of {state.table} is inconsistent (tags: {tags}; property {LEASE_PROPERTY}: "
            f"{'readable' if state.record else 'missing or unreadable'}) in its lease table "
            f"{state.lease_table}, so no run can tell who holds it. Make sure no maintenance run is "
            f"active on {state.table}, then drop the lease table (Spark SQL: DROP TABLE "
            f"{state.lease_table}; the next run makes it again).")


def held_by(state: LeaseState, lease: Lease) -> str | None:
    """``None`` when ``lease`` (this run's) is still the table's lease, else why not, as a sentence."""
    table = state.table
    if lease.token in state.fences:
        return None
    record = state.record
    if record is not None and state.consistent:
        if record.took_over_from == lease.holder:
            how = f"it expired at {lease.expires_at} and {record.holder} took it over"
        else:
            how = f"it was released or taken over, and {record.holder} holds it now"
        return (f"This run ({lease.holder}) no longer holds the maintenance lease on {table}: {how} "
                f"(until {record.expires_at}).")
    if not state.held:
        return f"This run ({lease.holder}) no longer holds the maintenance lease on {table}: it was released."
    return broken_sentence(state)


def renewed(lease: Lease, now_ms: int) -> Lease:
    """The same lease, extended by its ttl from ``now_ms``."""
    return lease.replace(expires_at_ms=now_ms + int(lease.ttl_seconds * 1000))


def new_lease(state: LeaseState, holder: str, settings: LeaseSettings, now_ms: int,
              took_over_from: Lease | None = None) -> Lease:
    """A new lease on ``state``'s table, held in its lease table."""
    return Lease(table=state.table, lease_table=state.lease_table, holder=holder, token=new_token(),
                 acquired_at_ms=now_ms,
                 expires_at_ms=now_ms + settings.ttl_ms, ttl_seconds=cast("float", settings.ttl_seconds),
                 took_over_from=took_over_from.holder if took_over_from else None)


def lease_from_xcom(value: Any) -> Lease | None:
    """The lease a step was handed (the acquire task's XCom), ``None`` for an unleased step."""
    if is_none(value):
        return None
    lease = Lease.from_json(mapping(value, "lease (the acquire task's result)"))
    if lease.token is not None and (not isinstance(lease.token, str) or not _TOKEN.match(lease.token)):
        raise LakeConfigError(f"lease must be the acquire task's result; its token {lease.token!r} is not one.")
    return lease


def step_lease(value: Any, table: str, step: str) -> Lease | None:
    """The lease the step (task) ``step`` maintaining ``table`` was handed, ``None`` when it runs unleased;
    refused when it is the lease of another table."""
    lease = lease_from_xcom(value)
    if lease is not None and lease.table != table:
        raise LakeConfigError(f"{step} maintains {table} but was given the maintenance lease of {lease.table}: hand "
                              "it the acquire task of its own table.")
    return lease
