"""Retention resolved to the exact snapshot IDs to expire (pure logic, no Airflow, no Spark).

Iceberg's ``ExpireSnapshots`` has no "keep these IDs" option, and its age rule knows nothing of
upstream work in flight. So every decision is taken here, from metadata, in the Airflow worker:
the Spark job is then handed an explicit list of IDs and nothing else. Its users:

* the expire step (:func:`resolve_expiry`): by default the table's own retention, resolved exactly
  as Iceberg's ``RemoveSnapshots`` does (the ``history.expire.*`` table properties and every ref's
  ``min-snapshots-to-keep``, ``max-snapshot-age-ms``, ``max-ref-age-ms``); ``older_than`` /
  ``retain_last`` only with ``override_table_retention``;
* the clean step (:func:`resolve_clean_policy`): the Hudi cleaner's policies
  (:class:`CleanPolicy`) applied to Iceberg snapshots, never beyond what the table's own retention
  lets go unless ``override_table_retention``;
* the two in series (:func:`effective_retention`): what expire and then clean keep, stated once
  from their settings (:class:`ExpirySettings`, :class:`CleanSettings`, whose defaults the DAG
  form reads here) and the table's retention.

Whatever the policy, a snapshot is never expired when it is the current snapshot, the head of a
tag or branch that stays, or in ``protected_ids`` (pending work of upstream tasks). Every decision
says, per snapshot and per removed ref, which rule kept or removed it.

PyIceberg is imported only inside :func:`history_from_table`, so the policies can be unit-tested
(and reasoned about) on hand-built histories.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from enum import Enum
from functools import cached_property
from typing import Any

from airflow_lake_provider.core.coercion import is_none
from airflow_lake_provider.core.partitions import partition_key, partition_values
from airflow_lake_provider.core.snapshots import walk_lineage
from airflow_lake_provider.exceptions import LakeConfigError, LakeSnapshotError

MAIN_BRANCH = "main"
_HOUR_MS = 3_600_000
# Below this an integer cannot be epoch milliseconds of any real table (it is 1973-03-03):
# it is epoch seconds or a bare number meant as a duration, both of which would silently expire nothing.
_MIN_EPOCH_MS = 10**11

__all__ = [
    "DEFAULT_CLEAN_POLICY",
    "DEFAULT_CLEAN_RETAINED",
    "DEFAULT_ORPHAN_OLDER_THAN_HOURS",
    "ORPHAN_FLOOR_HOURS",
    "CleanPolicy",
    "CleanSettings",
    "EffectiveRetention",
    "ExpirySettings",
    "RetentionDecision",
    "RetentionRule",
    "TableRetention",
    "SnapshotInfo",
    "SnapshotRef",
    "TableHistory",
    "effective_retention",
    "history_from_table",
    "parse_older_than",
    "resolve_clean_policy",
    "resolve_expiry",
]


# --------------------------------------------------------------------------- history model

# Iceberg's TableProperties: the table-wide retention and its defaults (RemoveSnapshots).
MIN_SNAPSHOTS_TO_KEEP = "history.expire.min-snapshots-to-keep"
MAX_SNAPSHOT_AGE_MS = "history.expire.max-snapshot-age-ms"
MAX_REF_AGE_MS = "history.expire.max-ref-age-ms"
DEFAULT_MIN_SNAPSHOTS_TO_KEEP = 1
DEFAULT_MAX_SNAPSHOT_AGE_MS = 5 * 24 * _HOUR_MS


@dataclass(frozen=True)
class RetentionRule:
    """One retention setting as it was applied: Iceberg's name, its value, and where it came from.

    ``str()`` is what the log and XCom show, e.g. ``max-snapshot-age-ms=2592000000 (30d, table
    property)``, so a reader can find the setting that decided (``value=None`` means "forever").
    """

    name: str  # min-snapshots-to-keep, max-snapshot-age-ms, max-ref-age-ms
    value: int | None
    source: str  # "table property", "Iceberg default", "branch b's own setting", "override: retain_last"...

    def __str__(self) -> str:
        if self.value is None:
            return f"{self.name}=forever ({self.source})"
        if self.name.endswith("-ms"):
            return f"{self.name}={self.value} ({_human_ms(self.value)}, {self.source})"
        return f"{self.name}={self.value} ({self.source})"


def _human_ms(ms: int) -> str:
    """A duration as a person reads it at 2 a.m. (30d, 36h, 90m, 12s)."""
    for unit, size in (("d", 24 * _HOUR_MS), ("h", _HOUR_MS), ("m", 60_000), ("s", 1000)):
        if ms >= size:
            value = ms / size
            return f"{value:.0f}{unit}" if value == int(value) or value >= 10 else f"{value:.1f}{unit}"
    return f"{ms}ms"


@dataclass(frozen=True)
class TableRetention:
    """The table-wide retention: its ``history.expire.*`` properties, else Iceberg's defaults."""

    min_snapshots_to_keep: RetentionRule = RetentionRule(
        "min-snapshots-to-keep", DEFAULT_MIN_SNAPSHOTS_TO_KEEP, "Iceberg default")
    max_snapshot_age_ms: RetentionRule = RetentionRule(
        "max-snapshot-age-ms", DEFAULT_MAX_SNAPSHOT_AGE_MS, "Iceberg default")
    max_ref_age_ms: RetentionRule = RetentionRule("max-ref-age-ms", None, "Iceberg default")

    @classmethod
    def from_properties(cls, properties: Mapping[str, str]) -> TableRetention:
        """Read the three properties; a value Iceberg could not read either is a LakeConfigError."""
        defaults = cls()

        def rule(prop: str, default: RetentionRule) -> RetentionRule:
            text = properties.get(prop)
            if text is None:
                return default
            try:
                value = int(str(text).strip())
            except ValueError:
                value = -1
            if value < 0:
                raise LakeConfigError(
                    f"Table property {prop}={text!r} is not a whole number >= 0, so the table's retention cannot be "
                    "read (Iceberg's own expiry would fail on it too). Fix it with ALTER TABLE ... SET TBLPROPERTIES."
                )
            return RetentionRule(default.name, value, "table property")

        return cls(
            rule(MIN_SNAPSHOTS_TO_KEEP, defaults.min_snapshots_to_keep),
            rule(MAX_SNAPSHOT_AGE_MS, defaults.max_snapshot_age_ms),
            rule(MAX_REF_AGE_MS, defaults.max_ref_age_ms),
        )


@dataclass(frozen=True)
class SnapshotInfo:
    """What the policies need to know of one snapshot (nothing that needs a file read, except
    ``changed_partitions``, which only KEEP_LATEST_FILE_VERSIONS uses)."""

    snapshot_id: int
    parent_id: int | None
    timestamp_ms: int
    operation: str | None  # summary 'operation' (append, overwrite, replace, delete)
    # Partition keys (JSON strings) whose files this snapshot added or removed; "" for unpartitioned.
    changed_partitions: frozenset[str] = frozenset()


@dataclass(frozen=True)
class SnapshotRef:
    """A named reference: a branch (``main`` included) or a tag, with its own retention if set."""

    name: str
    snapshot_id: int
    ref_type: str  # "branch" or "tag"
    min_snapshots_to_keep: int | None = None  # branches only
    max_snapshot_age_ms: int | None = None  # branches only
    max_ref_age_ms: int | None = None

    def own_rule(self, name: str, fallback: RetentionRule) -> RetentionRule:
        """This ref's own setting ``name`` (Iceberg spelling) when set, else ``fallback``."""
        value = getattr(self, name.replace("-", "_"))
        return fallback if value is None else RetentionRule(name, value, f"{self.ref_type} {self.name}'s own setting")


@dataclass(frozen=True)
class TableHistory:
    """A table's snapshots, refs and retention settings, detached from PyIceberg so policies are plain functions."""

    snapshots: tuple[SnapshotInfo, ...]
    refs: tuple[SnapshotRef, ...]
    current_snapshot_id: int | None
    retention: TableRetention = TableRetention()

    @cached_property
    def by_id(self) -> dict[int, SnapshotInfo]:
        """Snapshots by ID (computed once; the dataclass is frozen, so it cannot go stale)."""
        return {s.snapshot_id: s for s in self.snapshots}

    def ancestry(self, snapshot_id: int | None) -> list[SnapshotInfo]:
        """``snapshot_id`` and its ancestors, newest first, following ``parent_id`` while present.

        Stops at the first parent that is no longer in the table (already expired); an unknown
        or ``None`` start gives an empty list.
        """
        start = self.by_id.get(snapshot_id) if snapshot_id is not None else None
        return list(walk_lineage(start, self.parent))

    def parent(self, snapshot: SnapshotInfo) -> SnapshotInfo | None:
        """The parent of ``snapshot``; ``None`` for a root or a parent already expired."""
        return self.by_id.get(snapshot.parent_id) if snapshot.parent_id is not None else None

    def main_ancestry(self) -> list[SnapshotInfo]:
        """The current snapshot and its ancestors, newest first: the history readers of main see."""
        return self.ancestry(self.current_snapshot_id)

    def referenced_ids(self) -> set[int]:
        """Heads of every tag and branch (main included, i.e. the current snapshot)."""
        ids = {ref.snapshot_id for ref in self.refs}
        if self.current_snapshot_id is not None:
            ids.add(self.current_snapshot_id)
        return ids

    def refs_with_main(self) -> list[SnapshotRef]:
        """Every ref, main first; a table with a current snapshot but no main ref (old v1 metadata) gets one."""
        refs = sorted(self.refs, key=lambda r: (r.name != MAIN_BRANCH, r.ref_type != "branch", r.name))
        if self.current_snapshot_id is not None and not any(r.name == MAIN_BRANCH for r in refs):
            refs.insert(0, SnapshotRef(MAIN_BRANCH, self.current_snapshot_id, "branch"))
        return refs

    def _describe(self, snapshot_id: int) -> str:
        return f"snapshot {snapshot_id} (current snapshot: {self.current_snapshot_id})"


# --------------------------------------------------------------------------- decision


class CleanPolicy(str, Enum):
    """The Hudi cleaner's policies, applied to Iceberg snapshots."""

    KEEP_LATEST_COMMITS = "KEEP_LATEST_COMMITS"
    KEEP_LATEST_FILE_VERSIONS = "KEEP_LATEST_FILE_VERSIONS"
    KEEP_LATEST_BY_HOURS = "KEEP_LATEST_BY_HOURS"

    def __str__(self) -> str:
        # Callers compare str(policy) with the name (e.g. the clean operator); Python 3.11's
        # default would give "CleanPolicy.KEEP_LATEST_COMMITS".
        return self.value


@dataclass(frozen=True)
class RetentionDecision:
    """The exact snapshots to expire and refs Iceberg removes, with the rule behind every one.

    ``reasons`` has an entry for every snapshot, starting ``kept:`` or ``removed:``;
    ``removed_refs`` maps each tag or branch that goes to why (``main`` never goes).
    """

    expire_ids: tuple[int, ...]  # sorted ascending by timestamp
    kept_ids: tuple[int, ...]  # sorted ascending by timestamp
    reasons: dict[int, str] = field(default_factory=dict)
    removed_refs: dict[str, str] = field(default_factory=dict)

    def explain(self) -> str:
        """The decision for the task log: one line per snapshot (oldest first) and per removed ref."""
        lines = [f"  snapshot {sid}: {why}" for sid, why in self.reasons.items()]  # in commit order
        return "\n".join([*lines, *(f"  {why}" for why in self.removed_refs.values())])

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form for XCom and logs (snapshot IDs as keys become strings, as JSON requires)."""
        return {
            "expire_ids": [int(i) for i in self.expire_ids],
            "kept_ids": [int(i) for i in self.kept_ids],
            "kept": {str(i): self.reasons[i] for i in self.kept_ids},
            "removed": {str(i): self.reasons[i] for i in self.expire_ids},
            "removed_refs": dict(self.removed_refs),
        }


@dataclass
class _TableVerdicts:
    """What Iceberg's RemoveSnapshots would keep and remove, each with its rules' words."""

    kept: dict[int, list[str]]
    removed: dict[int, str]
    removed_refs: dict[str, str]
    retained_refs: list[SnapshotRef]


def _table_retention(
    history: TableHistory,
    now_ms: int,
    *,
    main_min: RetentionRule | None = None,
    main_age: RetentionRule | None = None,
    unreferenced_age: RetentionRule | None = None,
    main_by_policy: bool = False,
) -> _TableVerdicts:
    """Iceberg's ``RemoveSnapshots.internalApply`` (core, 1.10) on ``history``, rule by rule.

    1. Refs: ``main`` always stays; any other ref whose snapshot is older than its
       ``max-ref-age-ms`` (its own, else the table's; default forever) or missing is removed.
    2. Every remaining branch keeps its ancestry while fewer than ``min-snapshots-to-keep`` are
       kept or the ancestor is not older than ``max-snapshot-age-ms`` (each: the branch's own,
       else the table's), and stops at the first ancestor that meets neither.
    3. Remaining tags keep their snapshot; snapshots on no remaining ref are kept while younger
       than the table's ``max-snapshot-age-ms``. Everything else is removed.

    The override replaces main's rules (``main_min``/``main_age``, over main's own settings too:
    the user asked for main explicitly) and the age of snapshots on no ref (``unreferenced_age``);
    other branches and tags keep their own rules whatever the override. ``main_by_policy`` leaves
    main's ancestry and unreferenced snapshots undecided (neither kept nor removed here): a clean
    policy decides them.
    """
    table = history.retention
    retained: list[SnapshotRef] = []
    removed_refs: dict[str, str] = {}
    for ref in history.refs_with_main():
        if ref.name == MAIN_BRANCH:
            retained.append(ref)
            continue
        snapshot = history.by_id.get(ref.snapshot_id)
        rule = ref.own_rule("max-ref-age-ms", table.max_ref_age_ms)
        if snapshot is None:
            removed_refs[ref.name] = f"{ref.ref_type} {ref.name} removed: its snapshot {ref.snapshot_id} no longer exists"
        elif rule.value is not None and now_ms - snapshot.timestamp_ms > rule.value:
            removed_refs[ref.name] = (f"{ref.ref_type} {ref.name} removed: {rule} exceeded (its snapshot "
                                      f"{ref.snapshot_id} is {_human_ms(now_ms - snapshot.timestamp_ms)} old)")
        else:
            retained.append(ref)

    kept: dict[int, list[str]] = {}
    beyond: dict[int, str] = {}  # on a branch's ancestry but past its retention
    on_a_ref: set[int] = set()
    for ref in retained:  # heads first: the strongest reason reads first
        if ref.name != MAIN_BRANCH or ref.snapshot_id != history.current_snapshot_id:
            kept.setdefault(ref.snapshot_id, []).append(f"head of {ref.ref_type} {ref.name}")
    for ref in retained:
        if ref.ref_type != "branch":
            on_a_ref.add(ref.snapshot_id)
            continue
        ancestry = history.ancestry(ref.snapshot_id)
        is_main = ref.name == MAIN_BRANCH
        if is_main and main_by_policy:
            continue
        on_a_ref.update(s.snapshot_id for s in ancestry)
        min_rule = (is_main and main_min) or ref.own_rule("min-snapshots-to-keep", table.min_snapshots_to_keep)
        age_rule = (is_main and main_age) or ref.own_rule("max-snapshot-age-ms", table.max_snapshot_age_ms)
        cutoff = now_ms - int(age_rule.value or 0)
        for count, snapshot in enumerate(ancestry):
            if count < int(min_rule.value or 0):
                kept.setdefault(snapshot.snapshot_id, []).append(f"branch {ref.name}, within {min_rule}")
            elif snapshot.timestamp_ms >= cutoff:
                kept.setdefault(snapshot.snapshot_id, []).append(f"branch {ref.name}, younger than {age_rule}")
            else:
                for older in ancestry[count:]:
                    beyond.setdefault(older.snapshot_id, f"on branch {ref.name}, past {min_rule} and older than "
                                                         f"{age_rule}")
                break

    removed: dict[int, str] = {}
    gone_heads = {r.snapshot_id: r for r in history.refs if r.name in removed_refs}
    age = unreferenced_age or table.max_snapshot_age_ms
    policy_decides = {s.snapshot_id for s in history.main_ancestry()} if main_by_policy else set()
    for snapshot in history.snapshots:
        sid = snapshot.snapshot_id
        if sid in kept or sid in policy_decides:
            continue
        if sid in on_a_ref:
            removed[sid] = beyond[sid]
        elif main_by_policy:
            continue  # on no ref: the clean policy decides
        elif snapshot.timestamp_ms >= now_ms - int(age.value or 0):
            kept[sid] = [f"on no branch or tag, younger than {age}"]
        else:
            why = f"older than {age} and not referenced"
            if sid in gone_heads:
                why += f" ({gone_heads[sid].ref_type} {gone_heads[sid].name} was removed)"
            removed[sid] = why
    return _TableVerdicts(kept, removed, removed_refs, retained)


def _safety_reasons(history: TableHistory, protected_ids: Iterable[int]) -> dict[int, str]:
    """Snapshots no rule or policy may expire (current, protected), each with why.

    Ref heads are kept by :func:`_table_retention` as Iceberg keeps them (a ref past its
    ``max-ref-age-ms`` is removed in the same commit as the expiry, so its head is no longer held).

    Raises LakeSnapshotError for a protected ID the table does not have: the upstream step that
    produced it acted on another table, or the snapshot was expired under its feet; either way
    the caller's picture of the table is wrong and deciding on it would be unsafe.
    """
    held: dict[int, str] = {}
    if history.current_snapshot_id is not None and history.current_snapshot_id in history.by_id:
        held[history.current_snapshot_id] = "current snapshot"
    for snapshot_id in _ids(protected_ids, "protected_ids"):
        if snapshot_id not in history.by_id:
            raise LakeSnapshotError(
                f"Protected {history._describe(snapshot_id)} is not in the table's history: it was expired already, "
                "or it belongs to another table. Check which upstream result was passed as protected_snapshot_ids."
            )
        held[snapshot_id] = ", ".join(filter(None, (held.get(snapshot_id), "protected (pending work of an upstream task)")))
    return held


def _decide(
    history: TableHistory,
    expire: set[int],
    kept_reasons: Mapping[int, list[str]],
    removed_reasons: Mapping[int, str],
    removed_refs: Mapping[str, str],
) -> RetentionDecision:
    """Order the decision by time and word every snapshot's reason (``kept: ...`` / ``removed: ...``)."""

    def order(snapshot_id: int) -> tuple[int, int]:
        return history.by_id[snapshot_id].timestamp_ms, snapshot_id

    kept = sorted((s.snapshot_id for s in history.snapshots if s.snapshot_id not in expire), key=order)
    reasons = {
        i: ("removed: " + removed_reasons[i]) if i in expire
        else "kept: " + "; ".join(dict.fromkeys(kept_reasons.get(i) or ["within policy"]))
        for i in sorted(history.by_id, key=order)
    }
    return RetentionDecision(tuple(sorted(expire, key=order)), tuple(kept), reasons, dict(removed_refs))


def _merge(*sources: Mapping[int, Any]) -> dict[int, list[str]]:
    """Reasons from several rules, per snapshot, in the order given (safety first)."""
    merged: dict[int, list[str]] = {}
    for source in sources:
        for sid, why in source.items():
            merged.setdefault(sid, []).extend([why] if isinstance(why, str) else why)
    return merged


def _ids(values: Iterable[Any] | None, what: str) -> list[int]:
    """Snapshot IDs as ints (XCom and templates hand over strings); anything else is a config error."""
    out: list[int] = []
    for value in values or ():
        if isinstance(value, bool):
            raise LakeConfigError(f"{what} must hold snapshot IDs (integers); got {value!r}.")
        try:
            out.append(int(value))
        except (TypeError, ValueError):
            raise LakeConfigError(f"{what} must hold snapshot IDs (integers); got {value!r}.") from None
    return out


def _positive_int(value: Any, what: str) -> int:
    """An int >= 1; bools and floats are refused (True would silently mean 1)."""
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, str) and value.strip().isdigit():  # templated params arrive as strings
            value = int(value.strip())
        else:
            raise LakeConfigError(f"{what} must be an integer >= 1; got {value!r}.")
    if value < 1:
        raise LakeConfigError(f"{what} must be an integer >= 1; got {value!r}.")
    return value


def _unreferenced(history: TableHistory, main_ids: set[int]) -> list[SnapshotInfo]:
    """Snapshots off main's ancestry (rolled back, replaced, staged); safety rules apply later."""
    return [s for s in history.snapshots if s.snapshot_id not in main_ids]


# --------------------------------------------------------------------------- clean policies


def resolve_clean_policy(
    history: TableHistory,
    policy: CleanPolicy | str,
    retained: int,
    *,
    now_ms: int,
    protected_ids: Iterable[int] = (),
    override_table_retention: bool = False,
) -> RetentionDecision:
    """Resolve a Hudi cleaner policy on an Iceberg table into the snapshots to expire.

    * ``KEEP_LATEST_COMMITS`` (n): keep the newest n snapshots of main; expire older main
      ancestors and off-main snapshots older than the oldest kept one.
    * ``KEEP_LATEST_FILE_VERSIONS`` (n): keep, per partition, the newest n main snapshots that
      changed it, and the current one; expire the other main ancestors and off-main snapshots
      older than the current one (newer ones may be staged write-audit-publish work).
      Needs ``history_from_table(table, with_changed_partitions=True)``.
    * ``KEEP_LATEST_BY_HOURS`` (h): keep every snapshot that was current in the last h hours (main
      ancestors from the window on, plus the newest older one, current when the window opened);
      expire older main ancestors and off-main snapshots older than the window.

    By default a snapshot goes only if the policy AND the table's own retention both let it go:
    the owner's settings are a floor no policy goes under. With ``override_table_retention`` the
    policy alone decides main's history and snapshots on no ref; other branches and tags keep
    their own rules in both cases. The current snapshot and ``protected_ids`` are always kept.
    """
    policy = _parse_policy(policy)
    retained = _positive_int(retained, "retained")
    safe = _safety_reasons(history, protected_ids)
    policy_expire, policy_reasons = _policy_decision(history, policy, retained, now_ms)
    label = f"{policy.value}={retained}"
    table = _table_retention(history, now_ms, main_by_policy=override_table_retention)
    expire: set[int] = set()
    removed: dict[int, str] = {}
    for snapshot in history.snapshots:
        sid = snapshot.snapshot_id
        if sid in safe or sid in table.kept:
            continue
        if sid in policy_expire:
            if override_table_retention:
                expire.add(sid)
                removed[sid] = f"not kept by clean policy {label} (override_table_retention)"
            elif sid in table.removed:
                expire.add(sid)
                removed[sid] = f"not kept by clean policy {label}, and the table's retention lets it go: {table.removed[sid]}"
        elif override_table_retention and sid in table.removed:  # another branch's history, past its own rules
            expire.add(sid)
            removed[sid] = table.removed[sid]
    policy_kept = {s.snapshot_id: [f"clean policy {label}: {policy_reasons.get(s.snapshot_id, 'does not remove it')}"]
                   for s in history.snapshots if s.snapshot_id not in policy_expire}
    policy_would = {sid: [f"the table's retention keeps it though clean policy {label} would not"]
                    for sid in policy_expire if sid in table.kept and not override_table_retention}
    kept = _merge(safe, policy_kept, table.kept, policy_would)
    return _decide(history, expire, kept, removed, table.removed_refs)


def _policy_decision(
    history: TableHistory, policy: CleanPolicy, retained: int, now_ms: int
) -> tuple[set[int], dict[int, str]]:
    """The policy on its own: the snapshots it would expire, and why it keeps the ones it keeps."""
    main = history.main_ancestry()
    main_ids = {s.snapshot_id for s in main}
    expire: set[int] = set()
    reasons: dict[int, str] = {}

    if policy is CleanPolicy.KEEP_LATEST_COMMITS:
        kept_main, older = main[:retained], main[retained:]
        expire.update(s.snapshot_id for s in older)
        if kept_main:
            horizon = kept_main[-1].timestamp_ms
            expire.update(s.snapshot_id for s in _unreferenced(history, main_ids) if s.timestamp_ms < horizon)
        reasons.update({s.snapshot_id: f"one of the last {retained} commits" for s in kept_main})

    elif policy is CleanPolicy.KEEP_LATEST_FILE_VERSIONS:
        if len(main) > 1 and not any(s.changed_partitions for s in main):
            # Without partition changes every snapshot but the current would go: refuse rather than guess.
            raise LakeConfigError(
                "KEEP_LATEST_FILE_VERSIONS needs the partitions each snapshot changed, and this history has none: "
                "build it with history_from_table(table, with_changed_partitions=True)."
            )
        versions: dict[str, int] = {}
        for snapshot in main:  # newest first, so the first n writers of a partition are its latest versions
            held = sorted(p for p in snapshot.changed_partitions if versions.get(p, 0) < retained)
            for partition in snapshot.changed_partitions:
                versions[partition] = versions.get(partition, 0) + 1
            if held:
                shown = ", ".join(p or "<unpartitioned>" for p in held[:3]) + (" ..." if len(held) > 3 else "")
                reasons[snapshot.snapshot_id] = f"latest {retained} version(s) of {shown}"
            elif snapshot.snapshot_id != history.current_snapshot_id:
                expire.add(snapshot.snapshot_id)
        if main:
            current_ts = main[0].timestamp_ms
            expire.update(s.snapshot_id for s in _unreferenced(history, main_ids) if s.timestamp_ms < current_ts)

    else:  # KEEP_LATEST_BY_HOURS
        window_start = now_ms - retained * _HOUR_MS
        opened_by: int | None = None  # the newest snapshot older than the window: current when it opened
        for snapshot in main:
            if snapshot.timestamp_ms >= window_start:
                reasons[snapshot.snapshot_id] = f"current within the last {retained} h"
            elif opened_by is None:
                opened_by = snapshot.snapshot_id
                reasons[snapshot.snapshot_id] = f"current when the {retained} h window opened"
            else:
                expire.add(snapshot.snapshot_id)
        expire.update(s.snapshot_id for s in _unreferenced(history, main_ids) if s.timestamp_ms < window_start)

    return expire, reasons


def _parse_policy(policy: CleanPolicy | str) -> CleanPolicy:
    """A CleanPolicy from itself or its name in any case (templated params arrive as strings)."""
    if isinstance(policy, CleanPolicy):
        return policy
    name = str(policy).strip().upper()
    if name.startswith("CLEANPOLICY."):
        name = name[len("CLEANPOLICY."):]
    try:
        return CleanPolicy(name)
    except ValueError:
        valid = ", ".join(p.value for p in CleanPolicy)
        raise LakeConfigError(f"Unknown clean policy {policy!r}; valid policies: {valid}.") from None


# --------------------------------------------------------------------------- expire


def resolve_expiry(
    history: TableHistory,
    *,
    now_ms: int,
    override_table_retention: bool = False,
    older_than_ms: int | None = None,
    retain_last: int | None = None,
    snapshot_ids: Iterable[int] = (),
    protected_ids: Iterable[int] = (),
) -> RetentionDecision:
    """What Iceberg's expire_snapshots would expire, decided here so that pending work is honoured.

    By default the table's own retention decides (:func:`_table_retention`: its ``history.expire.*``
    properties and every ref's settings), and ``older_than_ms``/``retain_last`` must not be given:
    a value that would silently replace the owner's settings is refused. With
    ``override_table_retention`` they replace main's rules and the age of snapshots on no ref
    (each ``None`` falls back to the table's); other branches and tags keep their own rules.

    Explicit ``snapshot_ids`` are expired as well (as in Iceberg). Explicit IDs that are missing,
    or held by the current snapshot, a ref that stays or ``protected_ids``, raise
    LakeSnapshotError: the user asked for something impossible or unsafe, and silently skipping
    it would hide that.
    """
    settings = ExpirySettings.requested(override_table_retention, older_than_ms=older_than_ms,
                                        retain_last=retain_last, now_ms=now_ms)
    explicit = _ids(snapshot_ids, "snapshot_ids")
    main_min, main_age = settings.override_rules()
    safe = _safety_reasons(history, protected_ids)
    table = _table_retention(history, now_ms, main_min=main_min, main_age=main_age, unreferenced_age=main_age)
    heads = {r.snapshot_id: f"{r.ref_type} {r.name}" for r in table.retained_refs}
    for snapshot_id in explicit:
        if snapshot_id not in history.by_id:
            raise LakeSnapshotError(
                f"Cannot expire {history._describe(snapshot_id)}: it is not in the table's history "
                "(expired already, or it belongs to another table)."
            )
        held_by = safe.get(snapshot_id) or heads.get(snapshot_id)
        if held_by:
            raise LakeSnapshotError(
                f"Refusing to expire {history._describe(snapshot_id)}: it is held by {held_by}. "
                "Tags and branches are savepoints and protected snapshots are pending work; remove the ref "
                "or the protection first if it really must go."
            )
    removed = {sid: why for sid, why in table.removed.items() if sid not in safe}
    removed.update({sid: "named in snapshot_ids" for sid in explicit})
    kept = _merge(safe, table.kept)
    return _decide(history, set(removed), kept, removed, table.removed_refs)


# --------------------------------------------------------------------------- expire and clean in series

# The defaults of the clean step. The operator's parameters and the DAG form (dag_factory) read
# them here, so the form can never offer other defaults than the operator applies.
DEFAULT_CLEAN_POLICY = CleanPolicy.KEEP_LATEST_COMMITS
DEFAULT_CLEAN_RETAINED = 10
DEFAULT_ORPHAN_OLDER_THAN_HOURS = 72
# Unreferenced files younger than this may belong to a write still in flight.
ORPHAN_FLOOR_HOURS = 24


@dataclass(frozen=True)
class ExpirySettings:
    """What the expire step applies to main: the table's own retention, or the override's values.

    ``retain_last`` and ``max_snapshot_age_ms`` are the override's values (``older_than`` as an
    age at the time of the run); ``None`` falls back to the table's own setting.
    """

    override_table_retention: bool = False
    retain_last: int | None = None
    max_snapshot_age_ms: int | None = None

    @classmethod
    def requested(
        cls, override_table_retention: bool, *, older_than_ms: int | None, retain_last: int | None, now_ms: int
    ) -> ExpirySettings:
        """The settings a DAG author asked for; values given without the override are refused.

        A value that would silently replace the table owner's settings is an error, not a default.
        """
        if not override_table_retention and (older_than_ms is not None or retain_last is not None):
            given = ", ".join(n for n, v in (("older_than", older_than_ms), ("retain_last", retain_last)) if v is not None)
            raise LakeConfigError(
                f"{given} given, but the table's own retention applies (its history.expire.* properties and its refs' "
                "settings). To apply your value instead, set override_table_retention=True (in the form: 'Override "
                f"the table's retention'); to use the table's settings, leave {given} empty."
            )
        return cls(
            override_table_retention=bool(override_table_retention),
            retain_last=None if retain_last is None else _positive_int(retain_last, "retain_last"),
            max_snapshot_age_ms=None if older_than_ms is None else max(0, now_ms - int(older_than_ms)),
        )

    def override_rules(self) -> tuple[RetentionRule | None, RetentionRule | None]:
        """main's ``min-snapshots-to-keep`` and ``max-snapshot-age-ms`` as overridden (``None``: not overridden)."""
        main_min = main_age = None
        if self.override_table_retention and self.retain_last is not None:
            main_min = RetentionRule("min-snapshots-to-keep", self.retain_last, "override: retain_last")
        if self.override_table_retention and self.max_snapshot_age_ms is not None:
            main_age = RetentionRule("max-snapshot-age-ms", self.max_snapshot_age_ms, "override: older_than")
        return main_min, main_age


@dataclass(frozen=True)
class CleanSettings:
    """The clean step's policy and orphan floor, checked (defaults: the constants above)."""

    policy: CleanPolicy = DEFAULT_CLEAN_POLICY
    retained: int = DEFAULT_CLEAN_RETAINED
    override_table_retention: bool = False
    orphan_older_than_hours: float | None = DEFAULT_ORPHAN_OLDER_THAN_HOURS
    force_orphan_floor: bool = False

    @classmethod
    def checked(
        cls,
        policy: CleanPolicy | str = DEFAULT_CLEAN_POLICY,
        retained: int = DEFAULT_CLEAN_RETAINED,
        *,
        override_table_retention: bool = False,
        orphan_older_than_hours: float | None = DEFAULT_ORPHAN_OLDER_THAN_HOURS,
        force_orphan_floor: bool = False,
    ) -> CleanSettings:
        """Settings from the operator's values; a policy, ``retained`` or orphan floor that cannot work is refused."""
        hours = orphan_older_than_hours
        if hours is not None:
            if isinstance(hours, bool) or not isinstance(hours, (int, float)):
                raise LakeConfigError(f"orphan_older_than_hours must be a number of hours; got {hours!r}.")
            if hours < 0:
                raise LakeConfigError(f"orphan_older_than_hours must not be negative; got {hours}.")
            if hours < ORPHAN_FLOOR_HOURS and not force_orphan_floor:
                raise LakeConfigError(
                    f"orphan_older_than_hours={hours:g} is under the {ORPHAN_FLOOR_HOURS} h floor: files that young "
                    "may belong to a write still in flight, and deleting them would corrupt its commit. Use 24 h or "
                    "more, or set force_orphan_floor=True if no writer can be running."
                )
        return cls(_parse_policy(policy), _positive_int(retained, "retained"), bool(override_table_retention),
                   hours, bool(force_orphan_floor))

    @property
    def label(self) -> str:
        """``KEEP_LATEST_COMMITS=10``: how the log and the decisions name the policy."""
        return f"{self.policy.value}={self.retained}"

    def orphan_cutoff_ms(self, now_ms: int) -> int | None:
        """Orphan files modified before this (epoch ms) are deleted; ``None``: orphan removal is off."""
        if self.orphan_older_than_hours is None:
            return None
        return now_ms - int(self.orphan_older_than_hours * _HOUR_MS)


@dataclass(frozen=True)
class EffectiveRetention:
    """What the expire and clean steps, run one after the other, keep of a table, and why.

    ``snapshots`` and ``files`` are sentences a reader can check against the table's settings;
    ``str()`` joins them into the one statement the clean step logs and returns.
    """

    snapshots: str
    files: str

    def __str__(self) -> str:
        return f"Expire and clean together keep {self.snapshots}. Files: {self.files}."

    def to_dict(self) -> dict[str, str]:
        return {"snapshots": self.snapshots, "files": self.files, "statement": str(self)}


def effective_retention(
    table: TableRetention,
    clean: CleanSettings,
    expiry: ExpirySettings | None = None,
    *,
    main: SnapshotRef | None = None,
    protected_ids: Iterable[int] = (),
) -> EffectiveRetention:
    """The retention of expire then clean, stated once: a snapshot of main survives both steps
    only if each keeps it.

    * The expire step keeps main's history by the table's rules (``main``'s own ref settings,
      else the table's ``history.expire.*``, else Iceberg's defaults), or by the override's
      values (each falling back to the table's); ``expiry=None``: no expire step is known.
    * The clean step keeps what its policy keeps, or what the table's retention keeps (its floor)
      unless ``override_table_retention``.

    So without any override the table's retention alone decides and the clean policy removes
    nothing more: expire already applied the table's rules in full, and clean never goes under
    them. Whatever the settings, the current snapshot, ``protected_ids``, and every other branch
    and tag (by its own rules) stay, as :func:`resolve_expiry` and :func:`resolve_clean_policy`
    decide them; files follow the snapshots, and orphans younger than the floor stay.
    """
    main = main or SnapshotRef(MAIN_BRANCH, 0, "branch")
    table_min = main.own_rule("min-snapshots-to-keep", table.min_snapshots_to_keep)
    table_age = main.own_rule("max-snapshot-age-ms", table.max_snapshot_age_ms)
    tables = f"the table's retention [{_keep_phrase(table_min, table_age)}]"
    policy = f"clean policy {clean.label} [{_policy_phrase(clean)}]"
    if expiry is not None and not expiry.override_table_retention and not clean.override_table_retention:
        on_main = (f"{tables}; {policy} removes nothing beyond it: the expire step applied the table's retention "
                   "in full, and clean never goes under it")
    else:
        kept_by = []
        if expiry is not None and expiry.override_table_retention:
            override_min, override_age = expiry.override_rules()
            kept_by.append(f"the expire step's override [{_keep_phrase(override_min or table_min, override_age or table_age)}]")
        elif expiry is not None:
            kept_by.append(tables)
        kept_by.append(policy if clean.override_table_retention else f"either {tables} or {policy}")
        on_main = f"those kept both by {kept_by[0]} and by {kept_by[1]}" if expiry else f"those kept by {kept_by[0]}"
        if expiry is None:
            on_main += " (this task knows no expire step's settings)"
    protected = sorted({int(i) for i in protected_ids})
    always = "the current snapshot, " + (f"the protected snapshots {protected}, " if protected else "")
    always += "and every other branch and tag by its own retention"
    if table.max_ref_age_ms.value is not None:
        always += f" (one older than {_human_ms(table.max_ref_age_ms.value)} goes: {table.max_ref_age_ms})"
    referenced = "every file a kept snapshot, tag or branch references"
    if clean.orphan_older_than_hours is None:
        files = f"{referenced}, and every unreferenced file (orphan removal is off)"
    else:
        files = f"{referenced}, and unreferenced (orphan) files younger than {clean.orphan_older_than_hours:g} h"
    return EffectiveRetention(f"on main, {on_main}; always, {always}", files)


def _keep_phrase(min_rule: RetentionRule, age_rule: RetentionRule) -> str:
    """``the last 5 (min-snapshots-to-keep, table property) and those younger than 7d (...)``."""
    last = f"the last {min_rule.value} ({min_rule.name}, {min_rule.source})"
    if age_rule.value is None:
        return f"{last} and every older one ({age_rule.name}=forever, {age_rule.source})"
    if age_rule.value == 0:
        return f"{last} and no older one ({age_rule.name}=0, {age_rule.source})"
    return f"{last} and those younger than {_human_ms(age_rule.value)} ({age_rule.name}, {age_rule.source})"


def _policy_phrase(clean: CleanSettings) -> str:
    n = clean.retained
    return {
        CleanPolicy.KEEP_LATEST_COMMITS: f"the last {n} commits",
        CleanPolicy.KEEP_LATEST_FILE_VERSIONS: f"the snapshots holding the last {n} versions of every partition",
        CleanPolicy.KEEP_LATEST_BY_HOURS: f"every snapshot current in the last {n} h",
    }[clean.policy]


# --------------------------------------------------------------------------- older_than


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(w|d|h|m|s)\s*$", re.IGNORECASE)
_ISO_DURATION = re.compile(
    r"^P(?:(?P<w>\d+(?:\.\d+)?)W)?(?:(?P<d>\d+(?:\.\d+)?)D)?"
    r"(?:T(?:(?P<h>\d+(?:\.\d+)?)H)?(?:(?P<m>\d+(?:\.\d+)?)M)?(?:(?P<s>\d+(?:\.\d+)?)S)?)?$",
    re.IGNORECASE,
)
_UNIT_MS = {"w": 7 * 24 * _HOUR_MS, "d": 24 * _HOUR_MS, "h": _HOUR_MS, "m": 60_000, "s": 1000}
_ACCEPTED = (
    "a duration ('7d', '36h', '90m', '30s', '2w'), an ISO 8601 duration ('P3D', 'PT36H', 'P1DT12H'), "
    "an ISO timestamp ('2026-01-01T00:00:00+00:00'; naive means UTC), epoch milliseconds (int), "
    "a datetime/date/timedelta, or None/'' for no cutoff"
)


def parse_older_than(value: Any, *, now_ms: int) -> int | None:
    """The cutoff (epoch ms) for ``older_than``, from the forms a DAG author is likely to write.

    Durations count back from ``now_ms``. A cutoff in the future is refused: it would expire
    every snapshot but the retained ones, which is almost always a typo (use '0m' if meant).
    Templates render a missing value as 'None', so 'None'/'null' mean no cutoff, like ``None``/''.
    """
    if value is None:
        return None
    if isinstance(value, timedelta):
        return _cutoff(now_ms - int(value.total_seconds() * 1000), value, now_ms)
    if isinstance(value, datetime):
        return _cutoff(_datetime_ms(value), value, now_ms)
    if isinstance(value, date):
        return _cutoff(_datetime_ms(datetime(value.year, value.month, value.day)), value, now_ms)
    if isinstance(value, bool):
        raise LakeConfigError(f"older_than={value!r} is not understood; accepted: {_ACCEPTED}.")
    if isinstance(value, (int, float)):
        return _epoch_ms(value, value, now_ms)
    if not isinstance(value, str):
        raise LakeConfigError(f"older_than={value!r} is not understood; accepted: {_ACCEPTED}.")

    if is_none(value):
        return None
    text = value.strip()
    if text.isdigit():
        return _epoch_ms(int(text), value, now_ms)
    if match := _DURATION.match(text):
        return _cutoff(now_ms - int(float(match[1]) * _UNIT_MS[match[2].lower()]), value, now_ms)
    if (match := _ISO_DURATION.match(text)) and text.upper() not in ("P", "PT") and not text.upper().endswith("T"):
        parts = match.groupdict()
        millis = sum(float(parts[u]) * _UNIT_MS[u] for u in parts if parts[u])
        return _cutoff(now_ms - int(millis), value, now_ms)
    if re.match(r"^P[\d.YMWDTHS]+$", text, re.IGNORECASE):
        raise LakeConfigError(
            f"older_than={value!r}: ISO durations may use weeks, days, hours, minutes and seconds only "
            f"(years and months have no fixed length); accepted: {_ACCEPTED}."
        )
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise LakeConfigError(f"older_than={value!r} is not understood; accepted: {_ACCEPTED}.") from None
    return _cutoff(_datetime_ms(parsed), value, now_ms)


def _datetime_ms(value: datetime) -> int:
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)  # naive means UTC: Iceberg timestamps are UTC
    return int(value.timestamp() * 1000)


def _epoch_ms(number: float, original: Any, now_ms: int) -> int:
    if number != number or number in (float("inf"), float("-inf")) or number < _MIN_EPOCH_MS:
        raise LakeConfigError(
            f"older_than={original!r} is not epoch milliseconds (too small: seconds, or a bare number meant as a "
            f"duration?); accepted: {_ACCEPTED}."
        )
    return _cutoff(int(number), original, now_ms)


def _cutoff(cutoff_ms: int, original: Any, now_ms: int) -> int:
    if cutoff_ms > now_ms:
        raise LakeConfigError(
            f"older_than={original!r} is in the future (cutoff {cutoff_ms} > now {now_ms}): every snapshot but the "
            "retained ones would expire. Use '0m' if that is really meant."
        )
    return cutoff_ms


# --------------------------------------------------------------------------- PyIceberg adapter


def history_from_table(table: Any, *, with_changed_partitions: bool = False) -> TableHistory:
    """A :class:`TableHistory` from a PyIceberg table's metadata, refs' retention and ``history.expire.*`` properties.

    Without ``with_changed_partitions`` only table metadata is read (cheap, no file I/O). With it,
    each snapshot's own manifests are read (those it added), and the partitions of the data and
    delete files it ADDED or DELETED are collected: that is what "a version of a partition" means
    for KEEP_LATEST_FILE_VERSIONS. EXISTING entries (carried over when manifests are merged) and
    entries of older snapshots are skipped, so each change is counted once, on its own snapshot.
    """
    metadata = table.metadata
    specs = metadata.specs()
    snapshots = []
    for snapshot in metadata.snapshots:
        summary = snapshot.summary
        operation = getattr(getattr(summary, "operation", None), "value", None) if summary is not None else None
        changed = _changed_partitions(table, snapshot, specs) if with_changed_partitions else frozenset()
        snapshots.append(
            SnapshotInfo(
                snapshot_id=snapshot.snapshot_id,
                parent_id=snapshot.parent_snapshot_id,
                timestamp_ms=snapshot.timestamp_ms,
                operation=operation,
                changed_partitions=changed,
            )
        )
    refs = tuple(
        SnapshotRef(
            name, ref.snapshot_id, getattr(ref.snapshot_ref_type, "value", str(ref.snapshot_ref_type)),
            min_snapshots_to_keep=ref.min_snapshots_to_keep, max_snapshot_age_ms=ref.max_snapshot_age_ms,
            max_ref_age_ms=ref.max_ref_age_ms,
        )
        for name, ref in sorted(metadata.refs.items())
    )
    return TableHistory(snapshots=tuple(snapshots), refs=refs, current_snapshot_id=metadata.current_snapshot_id,
                        retention=TableRetention.from_properties(dict(metadata.properties)))


def _changed_partitions(table: Any, snapshot: Any, specs: Mapping[int, Any]) -> frozenset[str]:
    """Partition keys of the files ``snapshot`` added or removed (data and delete files alike)."""
    from pyiceberg.manifest import (
        ManifestEntryStatus,  # only here: the rest of the module is pure
    )

    changed: set[str] = set()
    for manifest in snapshot.manifests(table.io):
        if manifest.added_snapshot_id != snapshot.snapshot_id:
            continue  # written by an earlier snapshot: its changes belong there
        spec = specs[manifest.partition_spec_id]
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=False):
            if entry.status not in (ManifestEntryStatus.ADDED, ManifestEntryStatus.DELETED):
                continue
            if entry.snapshot_id is not None and entry.snapshot_id != snapshot.snapshot_id:
                continue
            changed.add(_partition_key(spec, entry.data_file.partition))
    return frozenset(changed)


def _partition_key(spec: Any, partition: Any) -> str:
    """The partition's key by spec field name (stable across specs); "" when unpartitioned."""
    if not spec.fields:
        return ""
    return partition_key(partition_values((f.name for f in spec.fields), partition))
