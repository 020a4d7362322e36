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
from datetime import datetime, timedelta, timezone

import pytest

from airflow_lake_provider.exceptions import LakeConfigError, LakeSnapshotError
from airflow_lake_provider.retention import (
    CleanPolicy,
    RetentionDecision,
    SnapshotInfo,
    SnapshotRef,
    TableHistory,
    history_from_table,
    parse_older_than,
    resolve_clean_policy,
    resolve_expiry,
)

H = 3_600_000
NOW = int(datetime(2026, 3, 1, tzinfo=timezone.utc).timestamp() * 1000)
PROTECTED = (106,)
SAFE_REASONS = {
    108: "current",
    102: "tag 'v1', ancestor of branch 'audit'",
    103: "ancestor of branch 'audit'",
    101: "ancestor of branch 'audit'",
    161: "branch 'audit'",
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


def check(decision: RetentionDecision, history: TableHistory, expired: list[int]) -> None:
    """Exact expiry list (timestamp order), kept = the rest, and every never-expire reason."""
    assert list(decision.expire_ids) == expired
    assert set(decision.kept_ids) == {s.snapshot_id for s in history.snapshots} - set(expired)
    assert set(decision.reasons) == set(decision.kept_ids)
    ts = [history.by_id[i].timestamp_ms for i in decision.kept_ids]
    assert ts == sorted(ts)
    for sid, reason in SAFE_REASONS.items():
        assert decision.reasons[sid] == reason


# ---------------------------------------------------------------- history model


def test_history_navigation(history: TableHistory) -> None:
    assert [s.snapshot_id for s in history.main_ancestry()] == [108, 107, 106, 105, 104, 103, 102, 101]
    assert [s.snapshot_id for s in history.ancestry(150)] == [150, 104, 103, 102, 101]
    assert history.ancestry(None) == [] and history.ancestry(999) == []
    assert history.referenced_ids() == {108, 102, 161}
    assert history.branch_ancestry_ids() == {161, 103, 102, 101}


def test_ancestry_stops_at_expired_parent() -> None:
    h = TableHistory((snap(2, 1, 1), snap(3, 2, 0)), (), current_snapshot_id=3)
    assert [s.snapshot_id for s in h.ancestry(3)] == [3, 2]  # 1 was expired already
    assert h.referenced_ids() == {3}  # the current snapshot counts even without a main ref


# ---------------------------------------------------------------- clean policies


def test_keep_latest_commits(history: TableHistory) -> None:
    d = resolve_clean_policy(history, CleanPolicy.KEEP_LATEST_COMMITS, 3, now_ms=NOW, protected_ids=PROTECTED)
    # Main beyond the last 3 (108, 107, 106): 105, 104 go, 103..101 are held by the branch/tag.
    # Rolled-back 150 is older than the oldest kept commit (106): gone; staged 170 is newer: kept.
    check(d, history, [104, 150, 105])
    assert d.reasons[107] == "within policy: one of the last 3 commits"
    assert d.reasons[170] == "within policy"


def test_keep_latest_commits_one_without_protection(history: TableHistory) -> None:
    d = resolve_clean_policy(history, "keep_latest_commits", 1, now_ms=NOW)  # names are case-insensitive
    assert list(d.expire_ids) == [104, 150, 105, 106, 107]
    assert 170 in d.kept_ids and d.reasons[108] == "current"


def test_keep_latest_file_versions(history: TableHistory) -> None:
    d = resolve_clean_policy(history, "KEEP_LATEST_FILE_VERSIONS", 1, now_ms=NOW, protected_ids=PROTECTED)
    # Latest writer of a: 108 (current); of b: 105; of c: 104. 107 rewrote a, superseded by 108: gone,
    # though recent. 106 also wrote a but is protected. Off main: 150 (older than current) goes,
    # staged 170 (newer than current) stays.
    check(d, history, [150, 107])
    assert d.reasons[105] == 'within policy: latest 1 version(s) of {"p": "b"}'
    assert d.reasons[104] == 'within policy: latest 1 version(s) of {"p": "c"}'
    assert d.reasons[170] == "within policy"


def test_keep_latest_file_versions_two(history: TableHistory) -> None:
    d = resolve_clean_policy(history, CleanPolicy.KEEP_LATEST_FILE_VERSIONS, 2, now_ms=NOW)
    # a: 108, 107 kept; 106 is a's third version (unprotected now): gone. b: 105 (and 102 tagged); c: 104.
    assert list(d.expire_ids) == [150, 106]
    assert d.reasons[107].startswith("within policy: latest 2 version(s)")


def test_keep_latest_file_versions_needs_partitions(history: TableHistory) -> None:
    bare = TableHistory(
        tuple(SnapshotInfo(s.snapshot_id, s.parent_id, s.timestamp_ms, s.operation) for s in history.snapshots),
        history.refs,
        history.current_snapshot_id,
    )
    with pytest.raises(LakeConfigError, match="with_changed_partitions=True"):
        resolve_clean_policy(bare, CleanPolicy.KEEP_LATEST_FILE_VERSIONS, 1, now_ms=NOW)


def test_keep_latest_by_hours(history: TableHistory) -> None:
    d = resolve_clean_policy(history, CleanPolicy.KEEP_LATEST_BY_HOURS, 45, now_ms=NOW, protected_ids=PROTECTED)
    # Window opens 45h ago: 108, 107, 106 inside; 105 (60h) was current when it opened: kept.
    # 104 and rolled-back 150 are older than the window: gone.
    check(d, history, [104, 150])
    assert d.reasons[105] == "within policy: current when the 45 h window opened"
    assert d.reasons[107] == "within policy: current within the last 45 h"
    assert d.reasons[170] == "within policy"


def test_keep_latest_by_hours_short_window(history: TableHistory) -> None:
    d = resolve_clean_policy(history, CleanPolicy.KEEP_LATEST_BY_HOURS, 1, now_ms=NOW, protected_ids=PROTECTED)
    # Nothing committed in the last hour: 108 was current when the window opened (and is current).
    # The staged 170 (5h) is older than the window, so it goes too.
    check(d, history, [104, 150, 105, 107, 170])


def test_keep_latest_by_hours_boundary_is_inside() -> None:
    h = TableHistory((snap(1, None, 30), snap(2, 1, 20), snap(3, 2, 10)), (), current_snapshot_id=3)
    d = resolve_clean_policy(h, CleanPolicy.KEEP_LATEST_BY_HOURS, 20, now_ms=NOW)
    # 2 is exactly at the window start: inside; so 1 is the snapshot current when it opened.
    assert d.expire_ids == () and d.reasons[1].startswith("within policy: current when")


def test_policy_and_retained_errors(history: TableHistory) -> None:
    with pytest.raises(LakeConfigError, match="KEEP_LATEST_COMMITS, KEEP_LATEST_FILE_VERSIONS, KEEP_LATEST_BY_HOURS"):
        resolve_clean_policy(history, "KEEP_NEWEST", 3, now_ms=NOW)
    for bad in (0, -1, True, 1.5, None, "x"):
        with pytest.raises(LakeConfigError, match="retained must be an integer >= 1"):
            resolve_clean_policy(history, CleanPolicy.KEEP_LATEST_COMMITS, bad, now_ms=NOW)
    # Templated params arrive as strings.
    assert resolve_clean_policy(history, "KEEP_LATEST_COMMITS", "3", now_ms=NOW, protected_ids=PROTECTED).expire_ids == (
        104, 150, 105,
    )
    assert str(CleanPolicy.KEEP_LATEST_BY_HOURS) == "KEEP_LATEST_BY_HOURS"


def test_unknown_protected_id(history: TableHistory) -> None:
    with pytest.raises(LakeSnapshotError, match=r"snapshot 999 \(current snapshot: 108\)"):
        resolve_clean_policy(history, CleanPolicy.KEEP_LATEST_COMMITS, 3, now_ms=NOW, protected_ids=[999])
    with pytest.raises(LakeConfigError, match="snapshot IDs"):
        resolve_clean_policy(history, CleanPolicy.KEEP_LATEST_COMMITS, 3, now_ms=NOW, protected_ids=["abc"])


def test_empty_table() -> None:
    empty = TableHistory((), (), None)
    for policy in CleanPolicy:
        d = resolve_clean_policy(empty, policy, 1, now_ms=NOW)
        assert d == RetentionDecision((), (), {})


# ---------------------------------------------------------------- expire


def test_expire_older_than(history: TableHistory) -> None:
    d = resolve_expiry(history, now_ms=NOW, older_than_ms=NOW - 50 * H, protected_ids=PROTECTED)
    check(d, history, [104, 150, 105])
    assert d.reasons[107] == "newer than older_than" and d.reasons[170] == "newer than older_than"


def test_expire_retain_last(history: TableHistory) -> None:
    d = resolve_expiry(history, now_ms=NOW, older_than_ms=NOW, retain_last=3)
    # Everything is older than the cutoff; the newest 3 of main stay, staged 170 goes (as in Iceberg).
    assert list(d.expire_ids) == [104, 150, 105, 170]
    assert d.reasons[107] == "retain_last: one of the newest 3 of main"
    assert d.reasons[106] == "retain_last: one of the newest 3 of main"


def test_expire_explicit_ids(history: TableHistory) -> None:
    d = resolve_expiry(history, now_ms=NOW, snapshot_ids=["150", 107])  # XCom may hand strings over
    assert list(d.expire_ids) == [150, 107]
    assert d.reasons[105] == "not requested" and d.reasons[108] == "current"
    both = resolve_expiry(history, now_ms=NOW, older_than_ms=NOW - 62 * H, snapshot_ids=[107])
    assert list(both.expire_ids) == [104, 150, 107]


@pytest.mark.parametrize(
    ("sid", "held_by"),
    [(108, "current"), (102, "tag 'v1'"), (161, "branch 'audit'"), (103, "ancestor of branch 'audit'"), (106, "protected")],
)
def test_expire_refuses_unsafe_ids(history: TableHistory, sid: int, held_by: str) -> None:
    with pytest.raises(LakeSnapshotError, match=f"{sid}.*held by {held_by}"):
        resolve_expiry(history, now_ms=NOW, snapshot_ids=[sid], protected_ids=PROTECTED)


def test_expire_errors(history: TableHistory) -> None:
    with pytest.raises(LakeSnapshotError, match=r"snapshot 999 \(current snapshot: 108\).*not in the table"):
        resolve_expiry(history, now_ms=NOW, snapshot_ids=[999])
    with pytest.raises(LakeConfigError, match="Nothing to decide"):
        resolve_expiry(history, now_ms=NOW, retain_last=3)
    for bad in (0, True, 2.0):
        with pytest.raises(LakeConfigError, match="retain_last must be an integer >= 1"):
            resolve_expiry(history, now_ms=NOW, older_than_ms=NOW, retain_last=bad)


def test_decision_to_dict_is_json(history: TableHistory) -> None:
    d = resolve_expiry(history, now_ms=NOW, older_than_ms=NOW - 50 * H, protected_ids=PROTECTED)
    data = json.loads(json.dumps(d.to_dict()))
    assert data["expire_ids"] == [104, 150, 105]
    assert data["reasons"]["102"] == "tag 'v1', ancestor of branch 'audit'"
    assert sorted(map(int, data["reasons"])) == sorted(data["kept_ids"])


# ---------------------------------------------------------------- parse_older_than


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("7d", NOW - 7 * 24 * H),
        ("36h", NOW - 36 * H),
        (" 90M ", NOW - 90 * 60_000),
        ("30s", NOW - 30_000),
        ("2w", NOW - 14 * 24 * H),
        ("1.5h", NOW - int(1.5 * H)),
        ("0m", NOW),
        ("P3D", NOW - 72 * H),
        ("PT36H", NOW - 36 * H),
        ("P1DT12H", NOW - 36 * H),
        ("pt90m", NOW - 90 * 60_000),
        ("2026-01-01T00:00:00+00:00", 1767225600000),
        ("2026-01-01T00:00:00", 1767225600000),
        ("2026-01-01T00:00:00Z", 1767225600000),
        ("2026-01-01T01:00:00+01:00", 1767225600000),
        ("2026-01-01", 1767225600000),
        (1767225600000, 1767225600000),
        ("1767225600000", 1767225600000),
        (datetime(2026, 1, 1), 1767225600000),
        (datetime(2026, 1, 1, 2, tzinfo=timezone(timedelta(hours=2))), 1767225600000),
        (timedelta(hours=2), NOW - 2 * H),
        (None, None),
        ("", None),
        ("  ", None),
        ("None", None),
    ],
)
def test_parse_older_than(value: object, expected: int | None) -> None:
    assert parse_older_than(value, now_ms=NOW) == expected


@pytest.mark.parametrize(
    ("value", "match"),
    [
        ("7 fortnights", "accepted: a duration"),
        ("yesterday", "accepted: a duration"),
        ("P1M", "years and months have no fixed length"),
        ("P1Y", "years and months have no fixed length"),
        ("P", "not understood"),
        ("-7d", "not understood"),
        (True, "not understood"),
        ([7], "not understood"),
        (7, "not epoch milliseconds"),
        ("1767225600", "not epoch milliseconds"),  # epoch seconds
        ("2099-01-01T00:00:00Z", "in the future"),
    ],
)
def test_parse_older_than_errors(value: object, match: str) -> None:
    with pytest.raises(LakeConfigError, match=match):
        parse_older_than(value, now_ms=NOW)


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
    table.manage_snapshots().create_tag(ids[0], "keep").commit()
    table = catalog.load_table("db.events")

    h = history_from_table(table, with_changed_partitions=True)
    assert [s.snapshot_id for s in h.snapshots] == ids
    assert [s.parent_id for s in h.snapshots] == [None, *ids[:-1]]
    assert [s.operation for s in h.snapshots] == ["append"] * 4 + ["delete"]
    assert [s.timestamp_ms for s in h.snapshots] == [s.timestamp_ms for s in table.snapshots()]
    assert h.current_snapshot_id == ids[-1]
    assert set(h.refs) == {SnapshotRef("main", ids[-1], "branch"), SnapshotRef("keep", ids[0], "tag")}

    def k(p: str) -> str:
        return json.dumps({"part": p}, sort_keys=True)

    assert [set(s.changed_partitions) for s in h.snapshots] == [
        {k("a")}, {k("b")}, {k("a")}, {k("b"), k("c")}, {k("a")},
    ]

    # Last writer of a: the delete (current); of b and c: the 4th append. The 2nd and 3rd go;
    # the 1st is tagged 'keep'.
    d = resolve_clean_policy(h, CleanPolicy.KEEP_LATEST_FILE_VERSIONS, 1, now_ms=NOW)
    assert list(d.expire_ids) == [ids[1], ids[2]]
    assert d.reasons[ids[0]] == "tag 'keep'" and d.reasons[ids[4]] == "current"
    assert d.reasons[ids[3]].startswith("within policy: latest 1 version(s) of")

    # Without the flag only metadata is read; the file-version policy then refuses to guess.
    bare = history_from_table(table)
    assert all(s.changed_partitions == frozenset() for s in bare.snapshots)
    with pytest.raises(LakeConfigError, match="with_changed_partitions"):
        resolve_clean_policy(bare, CleanPolicy.KEEP_LATEST_FILE_VERSIONS, 1, now_ms=NOW)
    assert list(resolve_clean_policy(bare, "KEEP_LATEST_COMMITS", 2, now_ms=NOW).expire_ids) == ids[1:3]


def test_history_from_unpartitioned_table(catalog) -> None:
    import pyarrow as pa

    table = catalog.create_table("db.flat", schema=pa.schema([("id", pa.int64()), ("part", pa.string())]))
    table.append(_rows("x"))
    table.append(_rows("y"))
    h = history_from_table(catalog.load_table("db.flat"), with_changed_partitions=True)
    assert [s.changed_partitions for s in h.snapshots] == [frozenset({""}), frozenset({""})]
