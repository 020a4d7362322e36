"""The table's maintenance lease, taken and given back through the catalog's own atomic commit.

The lease is held in the table's lease table (:func:`~airflow_lake_provider.core.lease.lease_table_name`,
made on first use: a format-v2 table of one row, written by PyIceberg), never in the maintained
table. Every change is one PyIceberg ``commit_table`` on the lease table whose requirements
(``assert-ref-snapshot-id`` on the lease and fence tags, see :mod:`airflow_lake_provider.core.lease`)
the catalog checks against its current metadata in the same compare-and-swap that writes the new
metadata: the SQL catalog's conditional UPDATE, the REST server's commit endpoint, the Hive
catalog's lock. No JVM: the lease is taken in the Airflow worker before any Spark application starts.

A commit refused because the lease table changed meanwhile (another run's lease commit) is decided
again on fresh metadata, so a run that lost the race sees the winner's lease. After each commit the
metadata is read back: the fence tag of this run's token must be there.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Literal, overload

from airflow_lake_provider.core.lease import (
    FENCE_TAG_PREFIX,
    LEASE_PROPERTY,
    LEASE_TAG,
    LEASE_TAG_MAX_REF_AGE_MS,
    Action,
    Decision,
    Lease,
    LeaseLost,
    LeaseSettings,
    LeaseState,
    decide_acquire,
    fence_tag,
    held_by,
    lease_table_name,
    new_lease,
    read_state,
    renewed,
)
from airflow_lake_provider.exceptions import LakeConfigError
from airflow_lake_provider.hooks.lake import IcebergLakeHook

if TYPE_CHECKING:
    from pyiceberg.table import Table

log = logging.getLogger(__name__)

#: Commits refused because the table moved meanwhile are decided again this many times.
COMMIT_ATTEMPTS = 10


def now_ms() -> int:
    return int(time.time() * 1000)


class TableLeaseHook:
    """Acquire, renew, check and release the maintenance lease of tables of one catalog."""

    def __init__(self, lake_hook: IcebergLakeHook) -> None:
        self.lake_hook = lake_hook

    def lease_table(self, table_name: str) -> str:
        """Where the lease of ``table_name`` is held: in the connection's ``lease_namespace``."""
        return lease_table_name(table_name, self.lake_hook.lease_namespace)

    # == reading ==

    @overload
    def load(self, table_name: str, *, create: Literal[True]) -> tuple[Table, LeaseState]: ...

    @overload
    def load(self, table_name: str, *, create: bool = False) -> tuple[Table | None, LeaseState]: ...

    def load(self, table_name: str, *, create: bool = False) -> tuple[Table | None, LeaseState]:
        """The lease table of ``table_name`` and the lease's state, both from one fresh metadata read.

        A lease table that does not exist yet holds no lease: ``(None, free state)``, unless
        ``create`` (taking the lease) makes it.
        """
        from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

        try:
            lease_table = self.lake_hook.catalog.load_table(self.lease_table(table_name))
        except (NoSuchTableError, NoSuchNamespaceError):
            if not create:
                return None, read_state(table_name, self.lease_table(table_name), {}, {}, None)
            lease_table = self._create_lease_table(table_name)
        metadata = lease_table.metadata
        refs = {name: (getattr(ref.snapshot_ref_type, "value", str(ref.snapshot_ref_type)), ref.snapshot_id)
                for name, ref in metadata.refs.items()}
        return lease_table, read_state(table_name, self.lease_table(table_name), refs, metadata.properties,
                                       metadata.current_snapshot_id)

    def _create_lease_table(self, table_name: str) -> Table:
        """Make the lease table of ``table_name``: created with its one row in one commit (tags need a
        snapshot to point at). The maintained table must exist: a typo makes no lease table."""
        import pyarrow as pa

        self.lake_hook.load_table(table_name)  # LakeTableNotFound, naming the catalog, for a table that is not there
        catalog = self.lake_hook.catalog
        # Two runs making the same namespace or lease table at once: one wins, the other finds it
        # there (some catalogs say so with their own error, e.g. a SQL catalog's unique constraint).
        namespace = self.lake_hook.lease_namespace
        try:
            catalog.create_namespace(namespace, {"comment": "maintenance leases of airflow-lake-provider"})
        except Exception as error:  # re-raised below unless the namespace is there now
            if not catalog.namespace_exists(namespace):
                raise LakeConfigError(
                    f"The lease of {table_name} needs the namespace {namespace!r} for its lease table, and the "
                    f"catalog would not create it ({type(error).__name__}: {error}). Create it once by hand, or "
                    "name a namespace the maintainer may write in as lease_namespace in the lake connection's "
                    "extra (docs/lease.md).") from error
        name = self.lease_table(table_name)
        row = pa.table({"lease_of": pa.array([table_name], pa.string())})
        try:
            # Every lease change is a metadata version: keep the last ten, delete older ones.
            with catalog.create_table_transaction(name, schema=row.schema, properties={
                    "format-version": "2", "comment": f"The maintenance lease of {table_name} (docs/lease.md)",
                    "write.metadata.delete-after-commit.enabled": "true",
                    "write.metadata.previous-versions-max": "10"}) as txn:
                txn.append(row)
        except Exception:  # re-raised below unless another run made it first
            if not catalog.table_exists(name):
                raise
        else:
            log.info("Made the lease table %s for %s.", name, table_name)
        return catalog.load_table(name)

    # == the commits ==

    def try_acquire(self, table_name: str, holder: str, settings: LeaseSettings) -> tuple[Lease | None, Decision]:
        """Take the lease if it is free, this holder's already, or expired: ``(lease, decision)``.

        ``lease`` is ``None`` when another run holds it (``decision.action`` is BUSY, its sentence
        names the holder).
        """
        for _ in range(COMMIT_ATTEMPTS):
            table, state = self.load(table_name, create=True)
            decision = decide_acquire(state, holder, now_ms())
            if decision.action is Action.BROKEN:
                raise LakeConfigError(decision.sentence)
            if decision.action is Action.BUSY:
                return None, decision
            if decision.action is Action.ADOPT:
                assert decision.current is not None  # an ADOPT decision names the lease it adopts
                adopted = decision.current.replace(ttl_seconds=settings.ttl_seconds)
                try:
                    return self._renew_on(table, state, adopted), decision
                except (LeaseLost, _Conflict):
                    continue  # changed between the read and the commit: decide again
            taken = self._take(table, state, holder, settings)
            if taken is not None:
                return taken, decision
        raise LakeConfigError(f"Could not take the maintenance lease on {table_name}: the table changed under each of "
                              f"{COMMIT_ATTEMPTS} attempts. Try again.")

    def renew(self, lease: Lease) -> Lease:
        """Extend this run's lease by its ttl, or raise :class:`LeaseLost`.

        Called at the start of every leased step and every third of the ttl while a step's job runs.
        """
        for _ in range(COMMIT_ATTEMPTS):
            table, state = self.load(lease.table)
            try:
                return self._renew_on(table, state, lease)
            except _Conflict:
                continue
        raise LakeConfigError(f"Could not renew the maintenance lease on {lease.table}: the table changed under each "
                              f"of {COMMIT_ATTEMPTS} attempts.")

    def release(self, lease: Lease) -> str:
        """Give the lease back; returns the sentence to log (a lease no longer this run's is left alone)."""
        for _ in range(COMMIT_ATTEMPTS):
            table, state = self.load(lease.table)
            refusal = held_by(state, lease)
            if refusal:
                return f"{refusal} Nothing to release."
            assert table is not None and lease.token is not None  # held_by found its fence tag in the lease table
            requirements = [_ref_is(fence_tag(lease.token), state.fences[lease.token]),
                            _ref_is(LEASE_TAG, state.lease_tag)]
            updates = [*_remove_refs([fence_tag(lease.token), LEASE_TAG]), _remove_property()]
            if self._commit(table, requirements, updates):
                return f"Released the maintenance lease on {lease.table} held by {lease.holder}."
        raise LakeConfigError(f"Could not release the maintenance lease on {lease.table}: the table changed under "
                              f"each of {COMMIT_ATTEMPTS} attempts; it expires at {lease.expires_at} in any case.")

    # == internals ==

    def _take(self, table: Table, state: LeaseState, holder: str, settings: LeaseSettings) -> Lease | None:
        """One commit taking a free or expired lease as ``state`` (read from ``table``) shows it;
        ``None`` when the catalog refused it (the table moved, or another run took it first)."""
        record = state.record if state.held else None
        old = record.token if record is not None else None
        taken = new_lease(state, holder, settings, now_ms(), took_over_from=record if old else None)
        if old is None:  # free: the lease tag must still be absent
            requirements, removals = [_ref_is(LEASE_TAG, None)], []
        else:  # expired: the old holder's fence tag must still be where it was read; it goes
            requirements = [_ref_is(LEASE_TAG, state.lease_tag), _ref_is(fence_tag(old), state.fences[old])]
            removals = [fence_tag(old)]
        if self._commit(table, requirements, [*_remove_refs(removals), *_lease_updates(taken, state.snapshot_id)]) \
                and self._mine(state.table, taken):
            return taken
        return None

    def _renew_on(self, table: Table | None, state: LeaseState, lease: Lease) -> Lease:
        refusal = held_by(state, lease)
        if refusal:
            raise LeaseLost(refusal)
        assert table is not None and lease.token is not None  # held_by found its fence tag in the lease table
        extended = renewed(lease, now_ms())
        requirements = [_ref_is(fence_tag(lease.token), state.fences[lease.token]), _ref_is(LEASE_TAG, state.lease_tag)]
        if not self._commit(table, requirements, [_set_property(extended)]):
            raise _Conflict
        if not self._mine(lease.table, extended):
            raise LeaseLost(held_by(self.load(lease.table)[1], lease) or f"The lease on {lease.table} changed hands.")
        return extended

    def _commit(self, table: Table, requirements: list[Any], updates: list[Any]) -> bool:
        """One atomic commit; ``False`` when the catalog refused it (a requirement failed or the table moved)."""
        from pyiceberg.exceptions import CommitFailedException

        try:
            table.catalog.commit_table(table, tuple(requirements), tuple(updates))
        except CommitFailedException as refused:
            log.info("Lease commit on %s refused (%s); reading the table again.", table.name(), refused)
            return False
        return True

    def _mine(self, table_name: str, lease: Lease) -> bool:
        """Read back: the fence tag of ``lease``'s token and the record naming it are in the table."""
        _, state = self.load(table_name)
        return lease.token in state.fences and state.record is not None and state.record.token == lease.token


class HeldLeases:
    """The maintenance leases one task holds on several tables (the fleet's rewrite): taken one by
    one, renewed together while a job runs, given back one by one or all at once."""

    def __init__(self, hook: TableLeaseHook, log: Any) -> None:
        self.hook = hook
        self.log = log
        self._leases: dict[str, Lease] = {}

    def take(self, table: str, holder: str, settings: LeaseSettings) -> Decision | None:
        """Take ``table``'s lease; the decision when another run holds it (then nothing is taken)."""
        lease, decision = self.hook.try_acquire(table, holder, settings)
        if lease is None:
            return decision
        self._leases[table] = lease
        return None

    def of(self, table: str) -> Lease | None:
        return self._leases.get(table)

    def held(self) -> list[Lease]:
        return [lease for lease in self._leases.values() if lease.needed]

    def keep(self, lease: Lease) -> None:
        """Remember a renewed lease (it replaces the one of its table)."""
        self._leases[lease.table] = lease

    def renew(self, lease: Lease) -> Lease:
        """Renew ``lease`` and hold it (:meth:`TableLeaseHook.renew`: :class:`LeaseLost` when it is not this run's)."""
        renewed = self.hook.renew(lease)
        self.keep(renewed)
        return renewed

    def release(self, table: str) -> None:
        lease = self._leases.pop(table, None)
        if lease is not None and lease.needed:
            self.log.info("%s", self.hook.release(lease))

    def release_all(self) -> None:
        for table in list(self._leases):
            self.release(table)


@contextlib.contextmanager
def renewed_while_running(hook: TableLeaseHook, held: Callable[[], list[Lease]], keep: Callable[[Lease], None],
                          stop: Callable[[], None], log: Any) -> Iterator[None]:
    """Renew the ``held`` leases every third of their ttl while the body (a Spark job) runs; on a lost
    lease call ``stop`` (kill the job) and raise :class:`LeaseLost` after it.

    A lost lease means another run took the table over after this one stopped renewing (a stalled
    worker): the job is stopped, the step fails. A catalog hiccup is logged; the next beat tries
    again before the lease expires.
    """
    leases = held()
    if not leases:
        yield
        return
    done = threading.Event()
    lost: list[str] = []
    interval = max(min(lease.ttl_seconds for lease in leases) / 3, 1.0)

    def beat() -> None:
        while not done.wait(interval):
            for lease in held():
                try:
                    keep(hook.renew(lease))
                except LeaseLost as error:
                    lost.append(str(error))
                    log.error("%s Stopping the Spark job.", error)
                    stop()
                    return
                except Exception as error:  # noqa: BLE001 - a catalog hiccup: the next beat tries again before expiry
                    log.warning("Could not renew the maintenance lease on %s: %s", lease.table, error)

    thread = threading.Thread(target=beat, name="lake-lease-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
        if lost:  # the job's own error (it was killed) says less than this
            raise LeaseLost(lost[0])


class _Conflict(Exception):
    """A renewal commit refused because the table moved: read and try again."""


def _ref_is(name: str, snapshot_id: int | None) -> Any:
    from pyiceberg.table.update import AssertRefSnapshotId

    return AssertRefSnapshotId(ref=name, snapshot_id=snapshot_id)


def _remove_refs(names: list[str]) -> list[Any]:
    from pyiceberg.table.update import RemoveSnapshotRefUpdate

    return [RemoveSnapshotRefUpdate(ref_name=name) for name in names]


def _set_property(lease: Lease) -> Any:
    from pyiceberg.table.update import SetPropertiesUpdate

    return SetPropertiesUpdate(updates={LEASE_PROPERTY: lease.property_value()})


def _remove_property() -> Any:
    from pyiceberg.table.update import RemovePropertiesUpdate

    return RemovePropertiesUpdate(removals=[LEASE_PROPERTY])


def _lease_updates(lease: Lease, snapshot_id: int | None) -> list[Any]:
    """Both tags on the lease table's snapshot, and the record."""
    from pyiceberg.table.refs import SnapshotRefType
    from pyiceberg.table.update import SetSnapshotRefUpdate

    assert lease.token is not None  # new_lease makes one
    # max_snapshot_age_ms and min_snapshots_to_keep (branch settings) spelt out: the pydantic mypy plugin
    # misses the defaults PyIceberg gives them inside Annotated[...].
    tags = [SetSnapshotRefUpdate(ref_name=name, type=SnapshotRefType.TAG, snapshot_id=snapshot_id,
                                 max_ref_age_ms=LEASE_TAG_MAX_REF_AGE_MS, max_snapshot_age_ms=None,
                                 min_snapshots_to_keep=None)
            for name in (LEASE_TAG, fence_tag(lease.token))]
    return [*tags, _set_property(lease)]


__all__ = ["FENCE_TAG_PREFIX", "TableLeaseHook"]
