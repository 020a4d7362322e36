"""One maintenance run per table at a time: the lease's decisions (pure), its commits against the
real SQL catalog (races from threads, expiry and takeover, a stale takeover), and two DAGs racing
on one table through a real Airflow scheduler."""

from __future__ import annotations

import threading
import time
from datetime import datetime

import pytest

from airflow_lake_provider.core.lease import (
    FENCE_TAG_PREFIX,
    LEASE_PROPERTY,
    LEASE_TAG,
    Action,
    Lease,
    LeaseLost,
    LeaseSettings,
    LeaseState,
    decide_acquire,
    fence_tag,
    held_by,
    lease_from_xcom,
    lease_table_name,
    new_lease,
)
from airflow_lake_provider.core.contracts import AirflowRun
from airflow_lake_provider.exceptions import LakeConfigError
from metastore_server import hive_metastore  # noqa: F401 - the session fixture

NOW = 1_800_000_000_000
TOKEN = "0" * 31 + "1"


def _state(*, lease_tag=7, fences=None, record=None) -> LeaseState:
    return LeaseState("db.events", lease_table_name("db.events"), 7, lease_tag, {} if fences is None else fences,
                      record)


def _record(holder="dep/dag_a/run_1", expires=NOW + 60_000, token=TOKEN) -> Lease:
    return Lease(table="db.events", holder=holder, token=token, acquired_at_ms=NOW - 1000, expires_at_ms=expires,
                 ttl_seconds=61, lease_table=lease_table_name("db.events"))


# == pure decisions ==

def test_the_decision_for_every_state_of_the_lease():
    free = _state(lease_tag=None)
    assert decide_acquire(free, "me", NOW).action is Action.ACQUIRE
    held = _state(fences={TOKEN: 7}, record=_record())
    busy = decide_acquire(held, "me", NOW)
    assert busy.action is Action.BUSY and busy.current.holder == "dep/dag_a/run_1"
    assert busy.sentence == ("Another maintenance run holds the lease on db.events: dep/dag_a/run_1, since "
                             "2027-01-15T07:59:59+00:00, until 2027-01-15T08:01:00+00:00 unless it releases or "
                             "renews it first.")
    assert decide_acquire(held, "dep/dag_a/run_1", NOW).action is Action.ADOPT  # a retried acquire task
    expired = decide_acquire(held, "me", NOW + 60_000)
    assert expired.action is Action.TAKE_OVER and "held by dep/dag_a/run_1 expired at" in expired.sentence
    # Tags and record that disagree (edited by hand): nobody can tell who holds it.
    for broken in (_state(fences={}, record=_record()), _state(fences={TOKEN: 7}, record=None),
                   _state(lease_tag=None, fences={TOKEN: 7}), _state(fences={TOKEN: 7, "f" * 32: 7}, record=_record())):
        decision = decide_acquire(broken, "me", NOW)
        assert decision.action is Action.BROKEN, broken
        assert f"DROP TABLE {lease_table_name('db.events')}" in decision.sentence, broken


def test_a_lease_is_this_runs_only_while_its_fence_tag_is_there():
    mine = _record()
    assert held_by(_state(fences={TOKEN: 7}, record=mine), mine) is None
    other = _record(holder="dep/dag_b/run_2", token="f" * 32, expires=NOW + 999_000)
    taken = held_by(_state(fences={"f" * 32: 7}, record=other.replace(took_over_from=mine.holder)), mine)
    assert taken == ("This run (dep/dag_a/run_1) no longer holds the maintenance lease on db.events: it expired at "
                     "2027-01-15T08:01:00+00:00 and dep/dag_b/run_2 took it over (until 2027-01-15T08:16:39+00:00).")
    assert "released or taken over, and dep/dag_b/run_2 holds it now" in held_by(
        _state(fences={"f" * 32: 7}, record=other), mine)
    assert "it was released" in held_by(_state(lease_tag=None), mine)


def test_the_record_travels_as_json_and_names_its_holder():
    holder = AirflowRun(dag_id="dag_a", run_id="manual__1", task_id="acquire_lease").lease_holder("host1")
    lease = new_lease(_state(lease_tag=None), holder, LeaseSettings(ttl_seconds=60), NOW)
    assert lease.holder == "host1/dag_a/manual__1" and len(lease.token) == 32
    assert lease.lease_table == lease_table_name("db.events")
    assert lease_table_name("db.events", "governed.leases").startswith("governed.leases.db__events_")
    # Lower case (REST servers refuse upper case), readable, and distinct for names differing in case only.
    assert lease_table_name("Sales.Events").startswith("lake_maintenance.sales__events_")
    assert lease_table_name("Sales.Events") != lease_table_name("sales.events")
    assert lease_table_name("a__b.c") != lease_table_name("a.b__c")
    assert lease.expires_at_ms == NOW + 60_000 and lease.expires_at.endswith("+00:00")
    assert AirflowRun(dag_id="d", run_id="r", task_id="t", map_index=3).lease_holder("h") == "h/d/r/3"
    assert Lease.from_property("db.events", lease.property_value(), lease.lease_table) == lease
    assert lease_from_xcom(lease.to_json()) == lease
    assert lease_from_xcom(str(lease.to_json())) == lease  # rendered as text without native rendering
    assert lease_from_xcom(None) is None and lease_from_xcom("None") is None
    assert Lease.from_property("db.events", "{not json", lease.lease_table) is None


BAD_SETTINGS = [
    ({"ttl_seconds": 0}, "ttl_seconds must be more than 0"),
    ({"ttl_seconds": -5}, "ttl_seconds must be more than 0"),
    ({"on_busy": "later"}, "on_busy must be one of wait, skip, fail"),
    ({"wait_timeout_seconds": -1}, "wait_timeout_seconds must be 0 or more"),
    ({"poke_interval_seconds": 0}, "poke_interval_seconds must be more than 0"),
    ({"ttl_seconds": "soon"}, "ttl_seconds"),
]


@pytest.mark.parametrize("given,error", BAD_SETTINGS, ids=[str(g) for g, _ in BAD_SETTINGS])
def test_bad_lease_settings_are_refused_with_a_sentence(bad_input, given, error):
    with pytest.raises(LakeConfigError, match=error) as refused:
        LeaseSettings(**given)
    bad_input("IcebergAcquireLeaseOperator", given, str(refused.value), table_checked=False)


def test_bad_lease_inputs_of_the_group_and_the_steps(bad_input):
    from airflow.sdk import DAG

    from airflow_lake_provider.task_group import lake_maintenance_group

    with DAG("lease_bad_inputs", schedule=None):
        with pytest.raises(LakeConfigError, match="lease= knows ttl_seconds") as unknown:
            lake_maintenance_group(table="db.events", lease={"ttl": 60})
        with pytest.raises(LakeConfigError, match="lease must be True, False or a mapping") as odd:
            lake_maintenance_group(table="db.events", lease="yes")
    bad_input("lake_maintenance_group", {"lease": {"ttl": 60}}, str(unknown.value), table_checked=False)
    bad_input("lake_maintenance_group", {"lease": "yes"}, str(odd.value), table_checked=False)
    with pytest.raises(LakeConfigError, match="its token 'abc' is not one") as forged:
        lease_from_xcom({"table": "db.events", "holder": "x", "token": "abc"})
    bad_input("lease (a step's)", {"lease": {"token": "abc"}}, str(forged.value), table_checked=False)
    other_table = {"table": "db.orders", "holder": "x", "token": TOKEN}
    with pytest.raises(LakeConfigError, match="expire maintains db.events but was given the maintenance lease of "
                                              "db.orders") as wrong_table:
        _step(other_table, table="db.events").pre_execute(context={})
    bad_input("lease (a step's)", {"table": "db.events", "lease": other_table}, str(wrong_table.value),
              table_checked=False)


def test_the_group_wires_acquire_before_the_plan_and_release_after_everything():
    from airflow.sdk import DAG

    from airflow_lake_provider.task_group import lake_maintenance_group

    with DAG("leased_group", schedule=None) as dag:
        group = lake_maintenance_group(table="db.events", lease={"on_busy": "skip"})
        plain = lake_maintenance_group(table="db.orders", lease=False)
    assert group.plan.upstream_task_ids == {group.acquire_lease.task_id}
    # Setup and teardown: the release runs whatever the steps did, and never decides the run's state.
    assert group.acquire_lease.is_setup and group.release_lease.is_teardown
    assert group.release_lease.trigger_rule == "all_done_setup_success"
    assert group.release_lease.upstream_task_ids == {group.acquire_lease.task_id, group.clean.task_id}
    assert [task.task_id for task in group.get_leaves()] == [group.clean.task_id]
    assert group.acquire_lease.mode == "reschedule"  # waiting gives the worker slot back
    assert group.acquire_lease.on_busy == "skip"
    for step in (group.plan, group.rewrite, group.expire, group.clean):
        assert f"task_ids='{group.acquire_lease.task_id}'" in step.lease and step.require_lease, step.task_id
    dag.validate()  # what the DAG processor checks: a setup is followed only by all_success tasks
    assert plain.plan.lease is None and "db_orders.acquire_lease" not in dag.task_ids
    assert len(dag.task_ids) == 10


def test_the_lease_page_lists_every_key_of_the_acquire_tasks_xcom():
    import dataclasses
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "docs" / "lease.md").read_text()
    xcom_table = text.split("Its XCom `return_value` is the lease")[1].split("##")[0]
    documented = set(re.findall(r"^\| `([a-z_]+)` \|", xcom_table, re.M))
    assert documented == {f.name for f in dataclasses.fields(Lease)}


# == the commits, against the real SQL catalog ==

@pytest.fixture
def events(lake_hook, namespace):
    from demo_data import create_events_table

    name = f"{namespace}.events"
    create_events_table(lake_hook.catalog, name, days=1, commits_per_day=3, rows_per_commit=5)
    return name


def _hook():
    """A hook with its own catalog (own database connections), as another worker would have."""
    from airflow_lake_provider.hooks.lake import IcebergLakeHook
    from airflow_lake_provider.hooks.lease import TableLeaseHook

    return TableLeaseHook(IcebergLakeHook())


def _lease_table(lake_hook, name):
    return lake_hook.catalog.load_table(lease_table_name(name))


def _lease_refs(lake_hook, name) -> dict[str, int]:
    refs = _lease_table(lake_hook, name).metadata.refs
    return {ref: value.snapshot_id for ref, value in refs.items() if ref.startswith(LEASE_TAG)}


def _lease_record(lake_hook, name) -> Lease | None:
    return Lease.from_property(name, _lease_table(lake_hook, name).properties.get(LEASE_PROPERTY),
                               lease_table_name(name))


def test_of_many_runs_taking_a_free_lease_at_once_exactly_one_wins(lake_hook, events):
    settings = LeaseSettings(ttl_seconds=60)
    metadata_before = lake_hook.load_table(events).metadata_location
    for round_ in range(3):
        hooks = [_hook() for _ in range(6)]
        start = threading.Barrier(len(hooks))
        results: dict[int, Lease | None] = {}

        def take(i: int) -> None:
            start.wait()
            results[i] = hooks[i].try_acquire(events, f"dep/dag_{i}/run_{round_}", settings)[0]

        threads = [threading.Thread(target=take, args=(i,)) for i in range(len(hooks))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        winners = [lease for lease in results.values() if lease is not None]
        assert len(results) == 6 and len(winners) == 1, results
        winner = winners[0]
        current = _lease_table(lake_hook, events).current_snapshot().snapshot_id
        assert _lease_refs(lake_hook, events) == {LEASE_TAG: current, fence_tag(winner.token): current}
        assert _lease_record(lake_hook, events) == winner
        assert _hook().release(winner).startswith("Released")
    assert _lease_refs(lake_hook, events) == {} and _lease_record(lake_hook, events) is None
    # The maintained table's metadata was never touched.
    assert lake_hook.load_table(events).metadata_location == metadata_before


def test_two_runs_taking_a_free_lease_from_the_same_read_one_commit_is_refused(lake_hook, events):
    """The race pinned down: both read "free", both commit; the catalog refuses the second (the lease
    tag is no longer absent), so only the first run holds it, whatever the read-back would see."""
    first, second = _hook(), _hook()
    seen_by_first, seen_by_second = first.load(events, create=True), second.load(events)
    assert not seen_by_first[1].held and not seen_by_second[1].held
    settings = LeaseSettings(ttl_seconds=60)
    won = first._take(*seen_by_first, "dep/dag_a/run_1", settings)
    lost = second._take(*seen_by_second, "dep/dag_b/run_2", settings)
    assert won is not None and lost is None
    assert set(_lease_refs(lake_hook, events)) == {LEASE_TAG, fence_tag(won.token)}


def test_an_expired_lease_is_taken_over_and_its_old_holder_can_neither_renew_nor_release(lake_hook, events):
    hook = _hook()
    old, _ = hook.try_acquire(events, "dep/dag_a/run_1", LeaseSettings(ttl_seconds=0.5))
    busy, decision = hook.try_acquire(events, "dep/dag_b/run_2", LeaseSettings(ttl_seconds=60))
    assert busy is None and decision.action is Action.BUSY and "dep/dag_a/run_1" in decision.sentence
    time.sleep(0.6)
    new, decision = _hook().try_acquire(events, "dep/dag_b/run_2", LeaseSettings(ttl_seconds=60))
    assert decision.action is Action.TAKE_OVER and new.took_over_from == "dep/dag_a/run_1"
    assert "held by dep/dag_a/run_1 expired at" in decision.sentence
    assert set(_lease_refs(lake_hook, events)) == {LEASE_TAG, fence_tag(new.token)}
    with pytest.raises(LeaseLost, match="dep/dag_b/run_2 took it over"):
        hook.renew(old)
    assert "Nothing to release" in hook.release(old)
    # The new holder's lease is untouched by the old holder's attempts; it renews and releases.
    assert set(_lease_refs(lake_hook, events)) == {LEASE_TAG, fence_tag(new.token)}
    renewed = hook.renew(new)
    assert renewed.expires_at_ms > new.expires_at_ms and renewed.token == new.token
    assert hook.release(renewed).startswith("Released")


def test_a_takeover_from_a_stale_read_fails_even_on_a_single_snapshot_table(lake_hook, namespace):
    """Two runs read the same expired lease; one takes it over; the other's commit, made from its
    stale read, must fail although the lease tag still points at the same (only) snapshot."""
    import pyarrow as pa

    name = f"{namespace}.single"
    table = lake_hook.catalog.create_table(name, schema=pa.schema([("id", pa.int64())]))
    table.append(pa.table({"id": [1, 2]}))
    assert len(lake_hook.load_table(name).snapshots()) == 1
    hook, slow = _hook(), _hook()
    hook.try_acquire(name, "dep/dag_a/run_1", LeaseSettings(ttl_seconds=0.2))
    time.sleep(0.3)
    stale_table, stale_state = slow.load(name)  # the slow run reads: expired, take it over
    assert decide_acquire(stale_state, "dep/dag_c/run_3", int(time.time() * 1000)).action is Action.TAKE_OVER
    winner, _ = hook.try_acquire(name, "dep/dag_b/run_2", LeaseSettings(ttl_seconds=60))
    assert winner is not None
    taken = slow._take(stale_table, stale_state, "dep/dag_c/run_3", LeaseSettings(ttl_seconds=60))
    assert taken is None  # refused by the catalog: the old fence tag is gone
    assert set(_lease_refs(lake_hook, name)) == {LEASE_TAG, fence_tag(winner.token)}
    assert _lease_record(lake_hook, name).holder == "dep/dag_b/run_2"


def test_a_missing_table_gets_no_lease_table_and_a_format_v3_table_takes_the_lease(lake_hook, namespace, spark):
    """The lease never writes into the maintained table, so it works on tables PyIceberg cannot
    write (format v3 with deletion vectors, written by Spark) and on tables without snapshots
    alike; a typo makes no lease table."""
    import pyarrow as pa

    from airflow_lake_provider.exceptions import LakeTableNotFound

    with pytest.raises(LakeTableNotFound, match=f"Table '{namespace}.nope' does not exist"):
        _hook().try_acquire(f"{namespace}.nope", "dep/dag_a/run_1", LeaseSettings())
    assert not lake_hook.catalog.table_exists(lease_table_name(f"{namespace}.nope"))
    lake_hook.catalog.create_table(f"{namespace}.empty", schema=pa.schema([("id", pa.int64())]))
    spark.sql(f"CREATE TABLE lake.{namespace}.v3 (id BIGINT) USING iceberg TBLPROPERTIES ('format-version'='3', "
              "'write.delete.mode'='merge-on-read')")
    spark.sql(f"INSERT INTO lake.{namespace}.v3 VALUES (1), (2), (3)")
    spark.sql(f"DELETE FROM lake.{namespace}.v3 WHERE id = 2")
    assert lake_hook.load_table(f"{namespace}.v3").format_version == 3
    for name in (f"{namespace}.empty", f"{namespace}.v3"):
        before = lake_hook.load_table(name).metadata_location
        lease, decision = _hook().try_acquire(name, "dep/dag_a/run_1", LeaseSettings())
        assert decision.action is Action.ACQUIRE and lease.needed, name
        assert _hook().renew(lease).expires_at_ms >= lease.expires_at_ms
        assert _hook().release(lease).startswith("Released")
        assert lake_hook.load_table(name).metadata_location == before, name


@pytest.mark.parametrize("kind", ["rest", "hive"])
def test_the_lease_holds_behind_a_rest_catalog_and_a_hive_metastore(kind, seaweedfs_server, monkeypatch, request):  # noqa: F811
    """The same commits through an Iceberg REST server (SeaweedFS's), which checks the requirements
    itself, and through a Hive metastore, where PyIceberg checks them under the metastore's table lock."""
    import json
    import uuid

    import pyarrow as pa

    from airflow_lake_provider.hooks.lake import IcebergLakeHook
    from airflow_lake_provider.hooks.lease import TableLeaseHook

    if kind == "rest":
        conn = seaweedfs_server.rest_connection(catalog_name="lease")
    else:
        metastore = request.getfixturevalue("hive_metastore")
        conn = seaweedfs_server.catalog_connection("hive", metastore.uri, metastore.warehouse, catalog_name="lease")
    monkeypatch.setenv("AIRFLOW_CONN_LAKE_DEFAULT", json.dumps(conn))
    first, second = TableLeaseHook(IcebergLakeHook()), TableLeaseHook(IcebergLakeHook())
    catalog = first.lake_hook.catalog
    namespace = f"lease_{uuid.uuid4().hex[:8]}"
    catalog.create_namespace(namespace)
    name = f"{namespace}.single"
    catalog.create_table(name, schema=pa.schema([("id", pa.int64())])).append(pa.table({"id": [1, 2]}))
    settings = LeaseSettings(ttl_seconds=0.5)
    # Two runs from the same read of a free lease: the server refuses the second commit.
    seen_by_first, seen_by_second = first.load(name, create=True), second.load(name)
    won = first._take(*seen_by_first, "dep/dag_a/run_1", settings)
    assert won is not None and second._take(*seen_by_second, "dep/dag_b/run_2", settings) is None
    # Expired: taken over; a stale takeover from the same read is refused; the old holder cannot renew.
    time.sleep(0.6)
    stale = first.load(name)
    taken, decision = second.try_acquire(name, "dep/dag_b/run_2", LeaseSettings(ttl_seconds=60))
    assert decision.action is Action.TAKE_OVER and taken.took_over_from == "dep/dag_a/run_1"
    assert first._take(*stale, "dep/dag_c/run_3", settings) is None
    with pytest.raises(LeaseLost, match="dep/dag_b/run_2 took it over"):
        first.renew(won)
    assert second.release(taken).startswith("Released")
    table = catalog.load_table(name)
    assert set(table.metadata.refs) == {"main"} and LEASE_PROPERTY not in table.properties
    lease_table = catalog.load_table(lease_table_name(name))
    assert set(lease_table.metadata.refs) == {"main"} and LEASE_PROPERTY not in lease_table.properties


def test_the_acquire_task_waits_skips_or_fails_with_a_sentence_and_a_dry_run_takes_no_lease(lake_hook, events):
    from datetime import timezone

    from airflow.sdk.exceptions import AirflowRescheduleException, AirflowSensorTimeout, AirflowSkipException

    from airflow_lake_provider.core.lease import LeaseBusy
    from airflow_lake_provider.operators.lease import IcebergAcquireLeaseOperator, IcebergReleaseLeaseOperator
    from lake_checks import FakeTaskInstance

    class Rescheduled(FakeTaskInstance):
        def get_first_reschedule_date(self, context):
            return None  # the first ask

    def acquire(dag_id: str, **options):
        task = IcebergAcquireLeaseOperator(task_id="acquire_lease", table=events, holder="dep", **options)
        return task.execute({"ti": Rescheduled(dag_id=dag_id, run_id="manual__1")})

    held = acquire("dag_a", ttl_seconds="60")  # rendered text, coerced
    assert held["holder"] == "dep/dag_a/manual__1" and held["token"] and "secret" not in str(held).lower()
    busy = f"Another maintenance run holds the lease on {events}: dep/dag_a/manual__1, since "
    with pytest.raises(AirflowSkipException, match=busy) as skipped:
        acquire("dag_b", on_busy="skip")
    assert str(skipped.value).endswith("This run skips its maintenance (on_busy='skip').")
    with pytest.raises(LeaseBusy, match="This run fails"):
        acquire("dag_b", on_busy="fail")
    # Waiting gives the worker slot back: the task is rescheduled (by default), not sleeping in it.
    task = IcebergAcquireLeaseOperator(task_id="acquire_lease", table=events, holder="dep", poke_interval_seconds=30)
    with pytest.raises(AirflowRescheduleException) as rescheduled:
        task.execute({"ti": Rescheduled(dag_id="dag_b", run_id="manual__1")})
    assert 25 <= (rescheduled.value.reschedule_date - datetime.now(timezone.utc)).total_seconds() <= 31
    started = time.monotonic()
    with pytest.raises(AirflowSensorTimeout, match=busy + r".* Waited 1 s \(wait_timeout_seconds\) for it; "
                                                          r"this run gives up."):
        acquire("dag_b", on_busy="wait", wait_timeout_seconds=1, poke_interval_seconds=0.3, mode="poke")
    assert 1 <= time.monotonic() - started < 10
    refs_before = _lease_refs(lake_hook, events)
    dry = acquire("dag_b", dry_run=True)
    assert dry["token"] is None and dry["dry_run"] and _lease_refs(lake_hook, events) == refs_before
    _step(dry).pre_execute(context={})  # a dry run's step reports beside the holder
    release = IcebergReleaseLeaseOperator(task_id="release_lease", lease=held)
    assert release.execute({}) is True and _lease_refs(lake_hook, events) == {}
    assert IcebergReleaseLeaseOperator(task_id="release_lease", lease=None).execute({}) is False


# == two DAGs racing on one table, through the real scheduler ==

def _task_instances(airflow, dag_id: str, run_id: str) -> dict[str, dict]:
    response = airflow.api("GET", f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances", params={"limit": 100})
    return {ti["task_id"]: ti for ti in response.json()["task_instances"]}


def _time(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


@pytest.mark.slow
@pytest.mark.spark_submit
def test_two_dags_racing_on_one_table_never_overlap_and_both_end_well(airflow, lake_hook, namespace):
    from demo_data import create_events_table
    from lake_checks import live_files, table_fingerprint

    name = f"{namespace}.events"
    create_events_table(lake_hook.catalog, name, days=2, commits_per_day=4, rows_per_commit=10)
    before = table_fingerprint(lake_hook.load_table(name))
    dags = ("lake_lease_race_a", "lake_lease_race_b")
    for dag_id in dags:
        airflow.wait_for_dag(dag_id)
    runs = {}
    for dag_id in dags:
        response = airflow.api("POST", f"/dags/{dag_id}/dagRuns", json={"logical_date": None, "conf": {"table": name}})
        assert response.ok, response.text
        runs[dag_id] = response.json()["dag_run_id"]
    for dag_id, run_id in runs.items():
        assert airflow.wait_for_run(dag_id, run_id, timeout=600)["state"] == "success", airflow.task_states(dag_id)
    tis = {dag_id: _task_instances(airflow, dag_id, run_id) for dag_id, run_id in runs.items()}
    leases = {dag_id: airflow.xcom(dag_id, run_id, "acquire_lease") for dag_id, run_id in runs.items()}
    first, second = sorted(dags, key=lambda d: leases[d]["acquired_at_ms"])

    # The second run's steps all started after the first run gave its lease back: no step of one
    # (its expire and clean included) overlapped a step of the other (its rewrite included).
    released = _time(tis[first]["release_lease"]["start_date"])
    for step in ("plan", "rewrite", "expire", "clean"):
        assert _time(tis[first][step]["end_date"]) <= released, step
        started = tis[second][step]["start_date"]
        assert started is None or _time(started) >= released, step
    assert leases[second]["acquired_at_ms"] >= released.timestamp() * 1000 - 1000
    assert leases[first]["holder"] == f"e2e/{first}/{runs[first]}"
    # The second run waited, saying who held the table.
    log = airflow.task_log(second, runs[second], "acquire_lease")
    assert f"Another maintenance run holds the lease on {name}: e2e/{first}/{runs[first]}" in log
    assert "Waiting 10 s before asking again" in log

    # The first run compacted and expired (the lease tags did not stop its expiry); the second found
    # nothing left to rewrite. Same rows; the lease is given back.
    assert tis[first]["rewrite"]["state"] == "success" and tis[second]["rewrite"]["state"] == "skipped"
    expire = airflow.xcom(first, runs[first], "expire")
    assert expire["expired_snapshot_ids"], expire
    table = lake_hook.load_table(name)
    assert live_files(table)["DATA"] == 2
    assert table_fingerprint(table) == before
    assert _lease_refs(lake_hook, name) == {} and _lease_record(lake_hook, name) is None
    assert FENCE_TAG_PREFIX.startswith(LEASE_TAG)
    waited = leases[second]["acquired_at_ms"] / 1000 - leases[first]["acquired_at_ms"] / 1000
    import generated_pages
    generated_pages.save_figure("lease", (
        f"Lease: two DAGs triggered at once on one table through the real scheduler; the second waited {waited:.0f} s "
        "for the first run's lease, 0 of its steps overlapped the first run's, rows and checksum unchanged "
        "(`tests/test_lease.py`)"))


# == the steps honour the lease (no Spark: the checks run before any job) ==

def _step(lease, table: str | None = None, **kwargs):
    """An expire step given ``lease`` (on the lease's own table unless ``table`` says otherwise)."""
    from airflow_lake_provider.operators.expire import IcebergExpireSnapshotsOperator

    table = table or (lease["table"] if lease else "db.events")
    return IcebergExpireSnapshotsOperator(task_id="expire", table=table, lease=lease, **kwargs)


def test_a_leased_step_renews_its_runs_lease_and_refuses_anothers(lake_hook, events):
    from airflow.sdk.exceptions import AirflowSkipException

    hook = _hook()
    mine, _ = hook.try_acquire(events, "dep/dag_a/run_1", LeaseSettings(ttl_seconds=60))
    step = _step(mine.to_json())
    time.sleep(0.01)
    step.pre_execute(context={})
    held = step.leases.of(events)
    assert held.expires_at_ms > mine.expires_at_ms and held.token == mine.token
    assert _lease_record(lake_hook, events) == held
    # Another run's step (its lease released, this one's taken) refuses before reading the table.
    hook.release(held)
    other, _ = hook.try_acquire(events, "dep/dag_b/run_2", LeaseSettings(ttl_seconds=60))
    with pytest.raises(LeaseLost, match="no longer holds the maintenance lease"):
        _step(mine.to_json()).pre_execute(context={})
    # A step of a leased group whose acquire task skipped (no lease) skips too; an unleased step runs.
    with pytest.raises(AirflowSkipException, match="holds no maintenance lease on db.events"):
        _step(None, require_lease=True).pre_execute(context={})
    _step(None).pre_execute(context={})
    hook.release(other)


def test_the_heartbeat_renews_while_a_job_runs_and_stops_it_when_the_lease_is_lost(lake_hook, events):
    from airflow_lake_provider.hooks.lease import renewed_while_running

    hook = _hook()
    mine, _ = hook.try_acquire(events, "dep/dag_a/run_1", LeaseSettings(ttl_seconds=3))  # a beat every 1 s
    step = _step(mine.to_json())
    step.pre_execute(context={})
    expiry = step.leases.of(events).expires_at_ms

    def while_job_runs():
        return renewed_while_running(hook, step.leases.held, step.leases.keep, step.on_kill, step.log)

    with while_job_runs():
        time.sleep(1.5)
    record = _lease_record(lake_hook, events)
    assert record.token == mine.token and record.expires_at_ms > expiry
    with pytest.raises(LeaseLost, match="it was released"):
        with while_job_runs():
            hook.release(record)  # someone drops the lease under the running job
            time.sleep(1.5)


def test_the_lease_namespace_is_the_connections(lake_hook, events, namespace, monkeypatch):
    """A governed catalog may not let the maintainer create namespaces: the connection names the one
    the lease tables go in, and a run on that connection takes and gives back the lease there."""
    import json

    from airflow_lake_provider.exceptions import LakeConfigError
    from airflow_lake_provider.hooks.lake import IcebergLakeHook
    from airflow_lake_provider.hooks.lease import TableLeaseHook
    from airflow_lake_provider.operators.lease import IcebergReleaseLeaseOperator

    def governed(lease_namespace) -> TableLeaseHook:
        monkeypatch.setenv("AIRFLOW_CONN_LAKE_GOVERNED", json.dumps({
            "conn_type": "iceberg_lake", "host": lake_hook.config.uri,
            "extra": {"catalog_kind": "sql", "warehouse": lake_hook.config.warehouse,
                      "lease_namespace": lease_namespace}}))
        return TableLeaseHook(IcebergLakeHook("lake_governed"))

    leases = f"{namespace}_leases"
    lake_hook.catalog.create_namespace(leases)
    held, decision = governed(leases).try_acquire(events, "dep/governed/manual__1", LeaseSettings())
    assert held is not None, decision.sentence
    assert held.lease_table == lease_table_name(events, leases) and held.lease_table.startswith(f"{leases}.")
    assert lake_hook.catalog.table_exists(held.lease_table)
    assert not lake_hook.catalog.table_exists(lease_table_name(events))  # not in lake_maintenance
    assert IcebergReleaseLeaseOperator(task_id="release_lease", lease=held.to_json(),
                                       lake_conn_id="lake_governed").execute({}) is True

    with pytest.raises(LakeConfigError, match="lease_namespace 'no such/namespace' is not a namespace name"):
        governed("no such/namespace").try_acquire(events, "dep/governed/manual__2", LeaseSettings())
