"""The table's own retention agrees with Iceberg: on the same table, the snapshots and refs that
:func:`resolve_expiry` removes are exactly those Iceberg's own ``ExpireSnapshots`` (RemoveSnapshots,
run in the shared Spark session with no arguments) removes."""

from __future__ import annotations

import time

from demo_data import create_events_table
from airflow_lake_provider.jobs import iceberg
from airflow_lake_provider.core.history import history_from_table
from airflow_lake_provider.core.retention_decision import resolve_expiry


def test_table_retention_matches_icebergs_expire_snapshots(spark, lake_hook, namespace):
    name = f"{namespace}.owned"
    table = create_events_table(lake_hook.catalog, name, days=1, commits_per_day=8, rows_per_commit=5)
    ids = [s.snapshot_id for s in table.snapshots()]
    table.manage_snapshots().rollback_to_snapshot(ids[6]).commit()  # ids[7]: on no ref any more
    with table.transaction() as tx:
        tx.set_properties({"history.expire.min-snapshots-to-keep": "3", "history.expire.max-snapshot-age-ms": "1"})
    (table.manage_snapshots()
     .create_branch(ids[4], "audit", min_snapshots_to_keep=2)      # its own count, the table's age
     .create_branch(ids[1], "stale", max_ref_age_ms=1)             # past its own max-ref-age-ms
     .create_tag(ids[0], "keep")                                   # lives forever
     .create_tag(ids[2], "brief", max_ref_age_ms=1)                # expired tag
     .commit())
    time.sleep(0.01)  # every snapshot and ref is older than the 1 ms ages above, for both deciders

    table = lake_hook.load_table(name)
    ours = resolve_expiry(history_from_table(table), now_ms=int(time.time() * 1000))

    jtable = iceberg.load_table(spark, "lake", name)
    jtable.expireSnapshots().cleanExpiredFiles(False).commit()  # Iceberg's own rules, nothing given
    after = lake_hook.load_table(name)
    removed_by_iceberg = set(ids) - {s.snapshot_id for s in after.snapshots()}

    assert set(ours.expire_ids) == removed_by_iceberg
    assert set(ours.removed_refs) == set(table.refs()) - set(after.refs()) == {"stale", "brief"}
    # Each rule had something to decide: main's count, audit's own count, a tag, an unreferenced snapshot.
    assert removed_by_iceberg == {ids[1], ids[2], ids[7]}
    assert ours.reasons[ids[3]] == "kept: branch audit, within min-snapshots-to-keep=2 (branch audit's own setting)"
    assert ours.reasons[ids[0]] == "kept: head of tag keep"
    assert ours.reasons[ids[7]] == "removed: older than max-snapshot-age-ms=1 (1ms, table property) and not referenced"


def test_the_expire_job_rechecks_the_decision_against_fresh_metadata(spark, lake_hook, namespace):
    """The expire job re-reads the table (its metadata in one call) before expiring: a decision
    the table has moved past is refused and leaves the table as it was; IDs already gone are
    reported, the rest expired."""
    import pytest

    from airflow_lake_provider.core.contracts import ExpireJobArgs
    from airflow_lake_provider.core.expiry_recheck import UnsafeExpiry
    from airflow_lake_provider.core.worker_expiry import ReachableFiles, expire_in_worker
    from airflow_lake_provider.jobs.expire import expire_snapshot_ids

    name = f"{namespace}.recheck"
    table = create_events_table(lake_hook.catalog, name, days=1, commits_per_day=5, rows_per_commit=3)
    ids = [s.snapshot_id for s in table.snapshots()]
    table.manage_snapshots().create_tag(ids[1], "audit").commit()
    decided_on = {"main": ids[-1], "audit": ids[1]}

    def expire(snapshot_ids, refs=decided_on, in_worker=False):
        args = ExpireJobArgs(table=name, snapshot_ids=snapshot_ids, refs=refs).validate()
        if in_worker:  # engine="pyiceberg": the same check, in the worker
            table = lake_hook.load_table(name)
            return expire_in_worker(table, args, ReachableFiles(table.io)).outcome
        return expire_snapshot_ids(spark, iceberg.load_table(spark, "lake", name), args)

    refused = {
        "is now the current snapshot": ([ids[-1]], decided_on),
        "is now held by tag 'audit'": ([ids[1]], decided_on),
        "tags and branches of": ([ids[0]], {"main": ids[-1]}),  # decided before the tag
    }
    for message, (snapshot_ids, refs) in refused.items():
        for in_worker in (False, True):
            with pytest.raises(UnsafeExpiry, match=message):
                expire(snapshot_ids, refs, in_worker)
            assert [s.snapshot_id for s in lake_hook.load_table(name).snapshots()] == ids  # untouched

    gone = 123_456_789
    outcome = expire([ids[0], ids[2], gone])
    assert (outcome.expired_snapshot_ids, outcome.already_gone_snapshot_ids) == (sorted([ids[0], ids[2]]), [gone])
    assert outcome.snapshot_id_after == ids[-1] and outcome.removed_refs == []
    after = lake_hook.load_table(name)
    assert [s.snapshot_id for s in after.snapshots()] == [ids[1], *ids[3:]]
    assert after.scan().to_arrow().num_rows == 15  # appends only: every row still read
