"""Retention policies on hand-built histories, plus the PyIceberg adapter on a real (SQLite) table.

No Spark, no Airflow: the policies are pure functions, so each test states exactly which IDs go.

The hand-built history (hours before NOW; main is 101 <- ... <- 108):

    101 (100h, a)  102 (90h, b, tag v1)  103 (80h, a)  104 (70h, c)  105 (60h, b)
    106 (40h, a, protected)  107 (20h, a)  108 (10h, a, current)
    161 (75h, a)  head of branch 'audit', parent 103 -> 103, 102, 101 are its ancestry
    150 (65h, b)  rolled back: parent 104, no longer on main
    170 (5h, a)   staged (write-audit-publish): parent 108, not published
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone

import pytest

from airflow_lake_provider.core.clean_policy import resolve_clean_policy
from airflow_lake_provider.core.history import SnapshotInfo, SnapshotRef, TableHistory, history_from_table
from airflow_lake_provider.core.retention_decision import RetentionDecision, resolve_expiry
from airflow_lake_provider.core.retention_settings import DEFAULT_CLEAN_RETAINED, CleanPolicy, CleanSettings, ExpirySettings
from airflow_lake_provider.core.table_retention import TableRetention
from airflow_lake_provider.exceptions import LakeConfigError, LakeSnapshotError

H = 3_600_000
NOW = int(datetime(2026, 3, 1, tzinfo=timezone.utc).timestamp() * 1000)
PROTECTED = (106,)
# What keeps each never-expired snapshot of the fixture (the branch's ancestry: Iceberg's default 5 days).
SAFE_REASONS = {
    108: "current snapshot",
    102: "head of tag v1",
    103: "branch audit, younger than max-snapshot-age-ms=432000000 (5d, Iceberg default)",
    101: "branch audit, younger than max-snapshot-age-ms",
    161: "head of branch audit",
    106: "protected",
}


def key(value: str) -> str:
    return json.dumps({"p": value}, sort_keys=True)


def snap(sid: int, parent: int | None, hours_ago: float, *parts: str, op: str = "append") -> SnapshotInfo:
    return SnapshotInfo(sid, parent, NOW - int(hours_ago * H), op, frozenset(key(p) for p in parts))


@pytest.fixture
def history() -> TableHistory:
    return TableHistory(
        snapshots=(
            snap(101, None, 100, "a"),
            snap(102, 101, 90, "b"),
            snap(103, 102, 80, "a"),
            snap(161, 103, 75, "a"),
            snap(104, 103, 70, "c"),
            snap(150, 104, 65, "b"),
            snap(105, 104, 60, "b"),
            snap(106, 105, 40, "a", op="overwrite"),
            snap(107, 106, 20, "a"),
            snap(108, 107, 10, "a"),
            snap(170, 108, 5, "a"),
        ),
        refs=(
            SnapshotRef("main", 108, "branch"),
            SnapshotRef("v1", 102, "tag"),
            SnapshotRef("audit", 161, "branch"),
        ),
        current_snapshot_id=108,
    )


def policy_alone(policy: CleanPolicy | str, retained: object) -> CleanSettings:
    """Clean settings, checked as the operator checks them, that let the policy alone decide main's history."""
    return CleanSettings.checked(policy, retained, override_table_retention=True)


def check(decision: RetentionDecision, history: TableHistory, expired: list[int]) -> None:
    """Exact expiry list (timestamp order), kept = the rest, a reason for every snapshot."""
    assert list(decision.expire_ids) == expired
    assert set(decision.kept_ids) == {s.snapshot_id for s in history.snapshots} - set(expired)
    assert set(decision.reasons) == {s.snapshot_id for s in history.snapshots}
    assert all(decision.reasons[i].startswith("kept: ") for i in decision.kept_ids)
    assert all(decision.reasons[i].startswith("removed: ") for i in decision.expire_ids)
    ts = [history.by_id[i].timestamp_ms for i in decision.kept_ids]
    assert ts == sorted(ts)
    for sid, reason in SAFE_REASONS.items():
        if sid in decision.kept_ids:
            assert reason in decision.reasons[sid]


# ---------------------------------------------------------------- history model


def test_history_navigation(history: TableHistory) -> None:
    assert [s.snapshot_id for s in history.main_ancestry()] == [108, 107, 106, 105, 104, 103, 102, 101]
    assert [s.snapshot_id for s in history.ancestry(150)] == [150, 104, 103, 102, 101]
    assert history.ancestry(None) == [] and history.ancestry(999) == []
    assert history.referenced_ids() == {108, 102, 161}


def test_ancestry_stops_at_expired_parent() -> None:
    h = TableHistory((snap(2, 1, 1), snap(3, 2, 0)), (), current_snapshot_id=3)
    assert [s.snapshot_id for s in h.ancestry(3)] == [3, 2]  # 1 was expired already
    assert h.referenced_ids() == {3}  # the current snapshot counts even without a main ref


# ---------------------------------------------------------------- clean policies


def test_keep_latest_commits(history: TableHistory) -> None:
    d = resolve_clean_policy(history, policy_alone(CleanPolicy.KEEP_LATEST_COMMITS, 3), now_ms=NOW, protected_ids=PROTECTED)
    # Main beyond the last 3 (108, 107, 106): 105, 104 go, 103..101 are held by the branch/tag.
    # Rolled-back 150 is older than the oldest kept commit (106): gone; staged 170 is newer: kept.
    check(d, history, [104, 150, 105])
    assert d.reasons[107] == "kept: clean policy KEEP_LATEST_COMMITS=3: one of the last 3 commits"
    assert d.reasons[170] == "kept: clean policy KEEP_LATEST_COMMITS=3: does not remove it"
    assert d.reasons[104] == "removed: not kept by clean policy KEEP_LATEST_COMMITS=3 (override_table_retention)"


def test_keep_latest_commits_one_without_protection(history: TableHistory) -> None:
    d = resolve_clean_policy(history, policy_alone("keep_latest_commits", 1), now_ms=NOW)  # names are case-insensitive
    assert list(d.expire_ids) == [104, 150, 105, 106, 107]
    assert 170 in d.kept_ids and d.reasons[108].startswith("kept: current snapshot; clean policy")


def test_keep_latest_file_versions(history: TableHistory) -> None:
    d = resolve_clean_policy(history, policy_alone("KEEP_LATEST_FILE_VERSIONS", 1), now_ms=NOW, protected_ids=PROTECTED)
    # Latest writer of a: 108 (current); of b: 105; of c: 104. 107 rewrote a, superseded by 108: gone,
    # though recent. 106 also wrote a but is protected. Off main: 150 (older than current) goes,
    # staged 170 (newer than current) stays.
    check(d, history, [150, 107])
    assert d.reasons[105] == 'kept: clean policy KEEP_LATEST_FILE_VERSIONS=1: latest 1 version(s) of {"p": "b"}'
    assert d.reasons[104] == 'kept: clean policy KEEP_LATEST_FILE_VERSIONS=1: latest 1 version(s) of {"p": "c"}'


def test_keep_latest_file_versions_two(history: TableHistory) -> None:
    d = resolve_clean_policy(history, policy_alone(CleanPolicy.KEEP_LATEST_FILE_VERSIONS, 2), now_ms=NOW)
    # a: 108, 107 kept; 106 is a's third version (unprotected now): gone. b: 105 (and 102 tagged); c: 104.
    assert list(d.expire_ids) == [150, 106]
    assert d.reasons[107].startswith("kept: clean policy KEEP_LATEST_FILE_VERSIONS=2: latest 2 version(s)")


def test_keep_latest_file_versions_needs_partitions(history: TableHistory) -> None:
    bare = TableHistory(
        tuple(SnapshotInfo(s.snapshot_id, s.parent_id, s.timestamp_ms, s.operation) for s in history.snapshots),
        history.refs,
        history.current_snapshot_id,
    )
    with pytest.raises(LakeConfigError, match="with_changed_partitions=True"):
        resolve_clean_policy(bare, policy_alone(CleanPolicy.KEEP_LATEST_FILE_VERSIONS, 1), now_ms=NOW)


def test_keep_latest_by_hours(history: TableHistory) -> None:
    d = resolve_clean_policy(history, policy_alone(CleanPolicy.KEEP_LATEST_BY_HOURS, 45), now_ms=NOW, protected_ids=PROTECTED)
    # Window opens 45h ago: 108, 107, 106 inside; 105 (60h) was current when it opened: kept.
    # 104 and rolled-back 150 are older than the window: gone.
    check(d, history, [104, 150])
    assert d.reasons[105] == "kept: clean policy KEEP_LATEST_BY_HOURS=45: current when the 45 h window opened"
    assert d.reasons[107] == "kept: clean policy KEEP_LATEST_BY_HOURS=45: current within the last 45 h"


def test_keep_latest_by_hours_short_window(history: TableHistory) -> None:
    d = resolve_clean_policy(history, policy_alone(CleanPolicy.KEEP_LATEST_BY_HOURS, 1), now_ms=NOW, protected_ids=PROTECTED)
    # Nothing committed in the last hour: 108 was current when the window opened (and is current).
    # The staged 170 (5h) is older than the window, so it goes too.
    check(d, history, [104, 150, 105, 107, 170])


def test_keep_latest_by_hours_boundary_is_inside() -> None:
    h = TableHistory((snap(1, None, 30), snap(2, 1, 20), snap(3, 2, 10)), (), current_snapshot_id=3)
    d = resolve_clean_policy(h, policy_alone(CleanPolicy.KEEP_LATEST_BY_HOURS, 20), now_ms=NOW)
    # 2 is exactly at the window start: inside; so 1 is the snapshot current when it opened.
    assert d.expire_ids == () and d.reasons[1].startswith("kept: clean policy KEEP_LATEST_BY_HOURS=20: current when")


def test_policy_and_retained_errors(history: TableHistory) -> None:
    with pytest.raises(LakeConfigError, match="KEEP_LATEST_COMMITS, KEEP_LATEST_FILE_VERSIONS, KEEP_LATEST_BY_HOURS"):
        resolve_clean_policy(history, policy_alone("KEEP_NEWEST", 3), now_ms=NOW)
    for bad in (0, -1, True, 1.5, "x"):
        with pytest.raises(LakeConfigError, match="retained must be an integer >= 1"):
            resolve_clean_policy(history, policy_alone(CleanPolicy.KEEP_LATEST_COMMITS, bad), now_ms=NOW)
    assert policy_alone(CleanPolicy.KEEP_LATEST_COMMITS, None).retained == DEFAULT_CLEAN_RETAINED  # None: the default
    # Templated params arrive as strings.
    assert resolve_clean_policy(history, policy_alone("KEEP_LATEST_COMMITS", "3"), now_ms=NOW, protected_ids=PROTECTED).expire_ids == (
        104, 150, 105,
    )
    assert str(CleanPolicy.KEEP_LATEST_BY_HOURS) == "KEEP_LATEST_BY_HOURS"


def test_unknown_protected_id(history: TableHistory) -> None:
    with pytest.raises(LakeSnapshotError, match=r"snapshot 999 \(current snapshot: 108\)"):
        resolve_clean_policy(history, policy_alone(CleanPolicy.KEEP_LATEST_COMMITS, 3), now_ms=NOW, protected_ids=[999])
    with pytest.raises(LakeConfigError, match="snapshot IDs"):
        resolve_clean_policy(history, policy_alone(CleanPolicy.KEEP_LATEST_COMMITS, 3), now_ms=NOW, protected_ids=["abc"])


def test_empty_table() -> None:
    empty = TableHistory((), (), None)
    for policy in CleanPolicy:
        d = resolve_clean_policy(empty, policy_alone(policy, 1), now_ms=NOW)
        assert d == RetentionDecision((), (), {})


# ---------------------------------------------------------------- expire: the override


def test_expire_older_than(history: TableHistory) -> None:
    d = resolve_expiry(history, ExpirySettings(True, max_snapshot_age_ms=50 * H), now_ms=NOW, protected_ids=PROTECTED)
    check(d, history, [104, 150, 105])
    assert d.reasons[107] == "kept: branch main, younger than max-snapshot-age-ms=180000000 (2.1d, override: older_than)"
    assert d.reasons[170].startswith("kept: on no branch or tag, younger than max-snapshot-age-ms=180000000")
    assert d.reasons[150] == ("removed: older than max-snapshot-age-ms=180000000 (2.1d, override: older_than) "
                              "and not referenced")
    assert d.reasons[104] == ("removed: on branch main, past min-snapshots-to-keep=1 (Iceberg default) and older "
                              "than max-snapshot-age-ms=180000000 (2.1d, override: older_than)")


def test_expire_retain_last(history: TableHistory) -> None:
    d = resolve_expiry(history, ExpirySettings(True, retain_last=3, max_snapshot_age_ms=0), now_ms=NOW)
    # Everything is older than the cutoff; the newest 3 of main stay, staged 170 goes (as in Iceberg).
    # The branch audit keeps its own (the table's) rules: the override is for main.
    assert list(d.expire_ids) == [104, 150, 105, 170]
    assert d.reasons[107] == "kept: branch main, within min-snapshots-to-keep=3 (override: retain_last)"
    assert d.reasons[106] == "kept: branch main, within min-snapshots-to-keep=3 (override: retain_last)"
    assert "branch audit, younger than max-snapshot-age-ms=432000000 (5d, Iceberg default)" in d.reasons[103]


def test_expire_explicit_ids(history: TableHistory) -> None:
    d = resolve_expiry(history, now_ms=NOW, snapshot_ids=["150", 107])  # XCom may hand strings over
    assert list(d.expire_ids) == [150, 107]
    assert d.reasons[107] == "removed: named in snapshot_ids"
    assert d.reasons[105] == "kept: branch main, younger than max-snapshot-age-ms=432000000 (5d, Iceberg default)"
    assert d.reasons[108].startswith("kept: current snapshot; branch main, within min-snapshots-to-keep=1")
    both = resolve_expiry(history, ExpirySettings(True, max_snapshot_age_ms=62 * H), now_ms=NOW, snapshot_ids=[107])
    assert list(both.expire_ids) == [104, 150, 107]


@pytest.mark.parametrize(
    ("sid", "held_by"),
    [(108, "current snapshot"), (102, "tag v1"), (161, "branch audit"), (106, "protected")],
)
def test_expire_refuses_unsafe_ids(history: TableHistory, sid: int, held_by: str) -> None:
    with pytest.raises(LakeSnapshotError, match=f"{sid}.*held by {held_by}"):
        resolve_expiry(history, now_ms=NOW, snapshot_ids=[sid], protected_ids=PROTECTED)


def test_expire_errors(history: TableHistory) -> None:
    with pytest.raises(LakeSnapshotError, match=r"snapshot 999 \(current snapshot: 108\).*not in the table"):
        resolve_expiry(history, now_ms=NOW, snapshot_ids=[999])
    # A value that would replace the owner's settings is refused unless the override is asked for:
    # the settings the expire step hands its decision are checked as they are built.
    with pytest.raises(LakeConfigError, match=r"retain_last given, but the table's own retention applies.*"
                                              r"override_table_retention=True"):
        ExpirySettings.requested(False, older_than_ms=None, retain_last=3, now_ms=NOW)
    with pytest.raises(LakeConfigError, match="older_than, retain_last given"):
        ExpirySettings.requested(False, older_than_ms=NOW, retain_last=3, now_ms=NOW)
    for bad in (0, True, 2.0):
        with pytest.raises(LakeConfigError, match="retain_last must be an integer >= 1"):
            ExpirySettings.requested(True, older_than_ms=NOW, retain_last=bad, now_ms=NOW)


def test_decision_to_dict_is_json(history: TableHistory) -> None:
    d = resolve_expiry(history, ExpirySettings(True, max_snapshot_age_ms=50 * H), now_ms=NOW, protected_ids=PROTECTED)
    data = json.loads(json.dumps(d.to_dict()))
    assert data["expire_ids"] == [104, 150, 105]
    assert data["kept"]["102"].startswith("kept: head of tag v1")
    assert data["removed"]["105"].startswith("removed: on branch main, past min-snapshots-to-keep=1")
    assert sorted(map(int, data["kept"])) == sorted(data["kept_ids"]) and data["removed_refs"] == {}


# ---------------------------------------------------------------- the table's own retention (Iceberg's rules)
#
# Histories on one line of main, one snapshot a day: main is 1 <- 2 <- ... <- 10 (10 is current, 1 day old;
# 1 is 10 days old). TABLE_DAYS(n) is a table property in days.

DAY = 24 * H


def table_history(*, properties: dict[str, str] | None = None, refs: tuple[SnapshotRef, ...] = (),
                  extra: tuple[SnapshotInfo, ...] = ()) -> TableHistory:
    main = tuple(snap(i, i - 1 if i > 1 else None, (11 - i) * 24) for i in range(1, 11))
    return TableHistory(main + extra, (SnapshotRef("main", 10, "branch"), *refs), current_snapshot_id=10,
                        retention=TableRetention.from_properties(properties or {}))


def test_table_defaults_are_icebergs() -> None:
    # No properties: keep 1 snapshot and everything younger than 5 days; refs live forever.
    d = resolve_expiry(table_history(), now_ms=NOW)
    assert list(d.expire_ids) == [1, 2, 3, 4, 5]  # 6 days old and more
    assert d.reasons[6] == "kept: branch main, younger than max-snapshot-age-ms=432000000 (5d, Iceberg default)"
    assert d.reasons[5] == ("removed: on branch main, past min-snapshots-to-keep=1 (Iceberg default) and older than "
                            "max-snapshot-age-ms=432000000 (5d, Iceberg default)")


def test_table_properties_decide() -> None:
    h = table_history(properties={"history.expire.min-snapshots-to-keep": "3",
                                  "history.expire.max-snapshot-age-ms": str(DAY)})
    d = resolve_expiry(h, now_ms=NOW)
    assert list(d.expire_ids) == [1, 2, 3, 4, 5, 6, 7]
    assert d.reasons[8] == "kept: branch main, within min-snapshots-to-keep=3 (table property)"
    assert d.reasons[7].endswith("older than max-snapshot-age-ms=86400000 (1d, table property)")
    # 30 days of time travel asked for: nothing goes, whatever the DAG's old defaults said.
    month = table_history(properties={"history.expire.max-snapshot-age-ms": str(30 * DAY)})
    assert resolve_expiry(month, now_ms=NOW).expire_ids == ()


def test_ref_level_settings_override_the_table() -> None:
    main = SnapshotRef("main", 10, "branch", min_snapshots_to_keep=5, max_snapshot_age_ms=H)
    h = table_history(properties={"history.expire.min-snapshots-to-keep": "2"})
    h = TableHistory(h.snapshots, (main,), 10, h.retention)
    d = resolve_expiry(h, now_ms=NOW)
    assert list(d.expire_ids) == [1, 2, 3, 4, 5]
    assert d.reasons[6] == "kept: branch main, within min-snapshots-to-keep=5 (branch main's own setting)"
    assert d.reasons[5].endswith("past min-snapshots-to-keep=5 (branch main's own setting) and older than "
                                 "max-snapshot-age-ms=3600000 (1h, branch main's own setting)")


def test_tags_keep_their_snapshot_until_they_expire() -> None:
    h = table_history(
        properties={"history.expire.max-snapshot-age-ms": "1", "history.expire.max-ref-age-ms": str(8 * DAY)},
        refs=(SnapshotRef("release", 3, "tag", max_ref_age_ms=30 * DAY),  # 8 days old, own 30 days: stays
              SnapshotRef("t1", 2, "tag"),                                 # 9 days > table's 8 days: removed
              SnapshotRef("t2", 5, "tag", max_ref_age_ms=DAY),             # 6 days > own 1 day: removed
              SnapshotRef("gone", 999, "tag")),                            # its snapshot no longer exists
    )
    d = resolve_expiry(h, now_ms=NOW)
    assert list(d.expire_ids) == [1, 2, 4, 5, 6, 7, 8, 9]
    assert d.reasons[3] == "kept: head of tag release"
    assert d.removed_refs == {
        "t1": "tag t1 removed: max-ref-age-ms=691200000 (8d, table property) exceeded (its snapshot 2 is 9d old)",
        "t2": "tag t2 removed: max-ref-age-ms=86400000 (1d, tag t2's own setting) exceeded (its snapshot 5 is 6d old)",
        "gone": "tag gone removed: its snapshot 999 no longer exists",
    }
    # A removed tag's snapshot goes like any other (here by main's rules; off main as "not referenced").
    off_main = table_history(properties={"history.expire.max-snapshot-age-ms": str(DAY)},
                             refs=(SnapshotRef("old", 50, "tag", max_ref_age_ms=DAY),),
                             extra=(snap(50, 4, 7 * 24),))
    d = resolve_expiry(off_main, now_ms=NOW)
    assert d.reasons[50] == ("removed: older than max-snapshot-age-ms=86400000 (1d, table property) and not "
                             "referenced (tag old was removed)")


def test_main_is_never_removed_and_branches_follow_their_own_rules() -> None:
    h = table_history(
        properties={"history.expire.max-ref-age-ms": "1", "history.expire.max-snapshot-age-ms": str(DAY)},
        refs=(SnapshotRef("audit", 23, "branch", min_snapshots_to_keep=2, max_ref_age_ms=30 * DAY),
              SnapshotRef("stale", 31, "branch")),  # table's max-ref-age-ms=1: removed; main, older still, stays
        extra=(snap(21, 4, 6.5 * 24), snap(22, 21, 6 * 24), snap(23, 22, 5.5 * 24), snap(31, 5, 5 * 24)),
    )
    d = resolve_expiry(h, now_ms=NOW)
    assert set(d.removed_refs) == {"stale"}
    # audit keeps its 2 newest (23, 22); 21 and main's own old history go; stale's head goes with it.
    assert list(d.expire_ids) == [1, 2, 3, 4, 21, 5, 6, 31, 7, 8, 9]  # by time (6 and 31: same age)
    assert d.reasons[22] == "kept: branch audit, within min-snapshots-to-keep=2 (branch audit's own setting)"
    assert d.reasons[23] == ("kept: head of branch audit; branch audit, within min-snapshots-to-keep=2 "
                             "(branch audit's own setting)")
    assert d.reasons[21].startswith("removed: on branch audit, past min-snapshots-to-keep=2")
    assert d.reasons[10].startswith("kept: current snapshot; branch main, within min-snapshots-to-keep=1")
    # The override changes main, never someone else's branch.
    o = resolve_expiry(h, ExpirySettings(True, retain_last=10), now_ms=NOW)
    assert list(o.expire_ids) == [21, 31]


def test_override_replaces_mains_own_settings_too() -> None:
    h = table_history()
    h = TableHistory(h.snapshots, (SnapshotRef("main", 10, "branch", min_snapshots_to_keep=8),), 10, h.retention)
    assert list(resolve_expiry(h, now_ms=NOW).expire_ids) == [1, 2]
    o = resolve_expiry(h, ExpirySettings(True, retain_last=1, max_snapshot_age_ms=2 * DAY), now_ms=NOW)
    assert list(o.expire_ids) == [1, 2, 3, 4, 5, 6, 7, 8]
    # Given as None, each override value falls back to the table's.
    assert resolve_expiry(h, ExpirySettings(True), now_ms=NOW) == resolve_expiry(h, now_ms=NOW)


def test_clean_policy_never_goes_under_the_tables_retention() -> None:
    h = table_history(properties={"history.expire.min-snapshots-to-keep": "6", "history.expire.max-snapshot-age-ms": "1"})
    d = resolve_clean_policy(h, CleanSettings.checked("KEEP_LATEST_COMMITS", 2), now_ms=NOW)
    assert list(d.expire_ids) == [1, 2, 3, 4]
    assert d.reasons[5] == ("kept: branch main, within min-snapshots-to-keep=6 (table property); the table's "
                            "retention keeps it though clean policy KEEP_LATEST_COMMITS=2 would not")
    assert d.reasons[4].startswith("removed: not kept by clean policy KEEP_LATEST_COMMITS=2, and the table's "
                                   "retention lets it go: on branch main, past min-snapshots-to-keep=6")
    o = resolve_clean_policy(h, policy_alone("KEEP_LATEST_COMMITS", 2), now_ms=NOW)
    assert list(o.expire_ids) == [1, 2, 3, 4, 5, 6, 7, 8]
    # A stricter policy than the table changes nothing the table lets go.
    loose = resolve_clean_policy(h, CleanSettings.checked("KEEP_LATEST_COMMITS", 8), now_ms=NOW)
    assert list(loose.expire_ids) == [1, 2]


@pytest.mark.parametrize("value", ["abc", "-1", "1.5"])
def test_unreadable_table_property_is_refused(value: str) -> None:
    with pytest.raises(LakeConfigError, match=rf"history.expire.max-snapshot-age-ms='{re.escape(value)}' is not a whole"):
        TableRetention.from_properties({"history.expire.max-snapshot-age-ms": value})


# ---------------------------------------------------------------- PyIceberg adapter


@pytest.fixture
def catalog(tmp_path):
    from pyiceberg.catalog.sql import SqlCatalog

    (tmp_path / "wh").mkdir()
    cat = SqlCatalog("t", uri=f"sqlite:///{tmp_path}/c.db", warehouse=f"file://{tmp_path}/wh")
    cat.create_namespace("db")
    return cat


def _rows(*parts: str):
    import pyarrow as pa

    return pa.table(
        {"id": pa.array(range(len(parts)), pa.int64()), "part": pa.array(parts, pa.string())}
    )


def test_history_from_real_table(catalog) -> None:
    import pyarrow as pa
    from pyiceberg.expressions import EqualTo
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import IdentityTransform
    from pyiceberg.types import LongType, NestedField, StringType

    schema = Schema(NestedField(1, "id", LongType(), required=False), NestedField(2, "part", StringType(), required=False))
    spec = PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="part"))
    table = catalog.create_table("db.events", schema=schema, partition_spec=spec)
    writes = [("a",), ("b",), ("a", "a"), ("b", "c")]
    for parts in writes:
        table.append(_rows(*parts).cast(pa.schema([("id", pa.int64()), ("part", pa.string())])))
    table.delete(EqualTo("part", "a"))  # drops partition a's files whole: DELETED entries
    table = catalog.load_table("db.events")
    ids = [s.snapshot_id for s in table.snapshots()]
    assert len(ids) == 5
    table.manage_snapshots().create_tag(ids[0], "keep").create_tag(ids[1], "brief", max_ref_age_ms=3_600_000).commit()
    with table.transaction() as tx:
        tx.set_properties({"history.expire.min-snapshots-to-keep": "2"})
    table = catalog.load_table("db.events")

    h = history_from_table(table, with_changed_partitions=True)
    assert [s.snapshot_id for s in h.snapshots] == ids
    assert [s.parent_id for s in h.snapshots] == [None, *ids[:-1]]
    assert [s.operation for s in h.snapshots] == ["append"] * 4 + ["delete"]
    assert [s.timestamp_ms for s in h.snapshots] == [s.timestamp_ms for s in table.snapshots()]
    assert h.current_snapshot_id == ids[-1]
    assert set(h.refs) == {SnapshotRef("main", ids[-1], "branch"), SnapshotRef("keep", ids[0], "tag"),
                           SnapshotRef("brief", ids[1], "tag", max_ref_age_ms=3_600_000)}
    assert str(h.retention.min_snapshots_to_keep) == "min-snapshots-to-keep=2 (table property)"
    assert h.retention.max_snapshot_age_ms.source == "Iceberg default"

    def k(p: str) -> str:
        return json.dumps({"part": p}, sort_keys=True)

    assert [set(s.changed_partitions) for s in h.snapshots] == [
        {k("a")}, {k("b")}, {k("a")}, {k("b"), k("c")}, {k("a")},
    ]

    # Last writer of a: the delete (current); of b and c: the 4th append. The 3rd goes; the 1st and
    # 2nd are tagged.
    d = resolve_clean_policy(h, policy_alone(CleanPolicy.KEEP_LATEST_FILE_VERSIONS, 1), now_ms=NOW)
    assert list(d.expire_ids) == [ids[2]]
    assert d.reasons[ids[0]] == "kept: head of tag keep" and d.reasons[ids[4]].startswith("kept: current snapshot")
    assert d.reasons[ids[3]].startswith("kept: clean policy KEEP_LATEST_FILE_VERSIONS=1: latest 1 version(s) of")
    assert d.removed_refs == {}  # NOW is before the snapshots were written: the tag is not an hour old

    # Without the flag only metadata is read; the file-version policy then refuses to guess.
    bare = history_from_table(table)
    assert all(s.changed_partitions == frozenset() for s in bare.snapshots)
    with pytest.raises(LakeConfigError, match="with_changed_partitions"):
        resolve_clean_policy(bare, CleanSettings.checked(CleanPolicy.KEEP_LATEST_FILE_VERSIONS, 1), now_ms=NOW)
    assert list(resolve_clean_policy(bare, policy_alone("KEEP_LATEST_COMMITS", 2), now_ms=NOW).expire_ids) == ids[2:3]


def test_history_from_unpartitioned_table(catalog) -> None:
    import pyarrow as pa

    table = catalog.create_table("db.flat", schema=pa.schema([("id", pa.int64()), ("part", pa.string())]))
    table.append(_rows("x"))
    table.append(_rows("y"))
    h = history_from_table(catalog.load_table("db.flat"), with_changed_partitions=True)
    assert [s.changed_partitions for s in h.snapshots] == [frozenset({""}), frozenset({""})]


def test_the_log_counts_snapshots_by_rule_and_names_the_first_few():
    """10,000 snapshots must not be 10,000 log lines: one line per rule, its count and first IDs."""
    reasons = {i: "removed: older than max-snapshot-age-ms=432000000 (5d, Iceberg's default)" for i in range(1, 9998)}
    reasons.update({9998: "kept: branch main, within min-snapshots-to-keep=1", 9999: "kept: head of tag release",
                    10000: "kept: current snapshot"})
    decision = RetentionDecision(expire_ids=tuple(range(1, 9998)), kept_ids=(9998, 9999, 10000), reasons=reasons,
                                 removed_refs={"audit": "tag audit removed: max-ref-age-ms=1 exceeded"})
    assert decision.explain().splitlines() == [
        "  9997 snapshots removed: older than max-snapshot-age-ms=432000000 (5d, Iceberg's default) (1, 2, 3 and "
        "9994 more)",
        "  1 snapshot kept: branch main, within min-snapshots-to-keep=1 (9998)",
        "  1 snapshot kept: head of tag release (9999)",
        "  1 snapshot kept: current snapshot (10000)",
        "  tag audit removed: max-ref-age-ms=1 exceeded",
    ]
    assert len(decision.to_dict()["removed"]) == 9997  # every snapshot's own reason stays in the result
