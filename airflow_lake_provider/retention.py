"""Retention policies resolved to the exact snapshot IDs to expire (pure logic, no Airflow, no Spark).

Iceberg's ``ExpireSnapshots`` has no "keep these IDs" option, and its age rule knows nothing of
upstream work in flight. So every decision is taken here, from metadata, in the Airflow worker:
the Spark job is then handed an explicit list of IDs and nothing else. Two users:

* the expire step (:func:`resolve_expiry`): Iceberg's own ``older_than`` / ``retain_last`` /
  explicit IDs;
* the clean step (:func:`resolve_clean_policy`): the Hudi cleaner's policies
  (:class:`CleanPolicy`) applied to Iceberg snapshots.

Whatever the policy, a snapshot is never expired when it is the current snapshot, the head of a
tag or a branch (savepoints), in the ancestry of a non-main branch (someone else's work), or in
``protected_ids`` (pending work of upstream tasks).

PyIceberg is imported only inside :func:`history_from_table`, so the policies can be unit-tested
(and reasoned about) on hand-built histories.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from enum import Enum
from functools import cached_property
from typing import Any

from airflow_lake_provider.exceptions import LakeConfigError, LakeSnapshotError

MAIN_BRANCH = "main"
_HOUR_MS = 3_600_000
# Below this an integer cannot be epoch milliseconds of any real table (it is 1973-03-03):
# it is epoch seconds or a bare number meant as a duration, both of which would silently expire nothing.
_MIN_EPOCH_MS = 10**11

__all__ = [
    "CleanPolicy",
    "RetentionDecision",
    "SnapshotInfo",
    "SnapshotRef",
    "TableHistory",
    "history_from_table",
    "parse_older_than",
    "resolve_clean_policy",
    "resolve_expiry",
]


# --------------------------------------------------------------------------- history model


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
    """A named reference: a branch (``main`` included) or a tag."""

    name: str
    snapshot_id: int
    ref_type: str  # "branch" or "tag"


@dataclass(frozen=True)
class TableHistory:
    """A table's snapshots and refs, detached from PyIceberg so policies are plain functions."""

    snapshots: tuple[SnapshotInfo, ...]
    refs: tuple[SnapshotRef, ...]
    current_snapshot_id: int | None

    @cached_property
    def by_id(self) -> dict[int, SnapshotInfo]:
        """Snapshots by ID (computed once; the dataclass is frozen, so it cannot go stale)."""
        return {s.snapshot_id: s for s in self.snapshots}

    def ancestry(self, snapshot_id: int | None) -> list[SnapshotInfo]:
        """``snapshot_id`` and its ancestors, newest first, following ``parent_id`` while present.

        Stops at the first parent that is no longer in the table (already expired); an unknown
        or ``None`` start gives an empty list.
        """
        found: list[SnapshotInfo] = []
        seen: set[int] = set()
        snapshot = self.by_id.get(snapshot_id) if snapshot_id is not None else None
        while snapshot is not None and snapshot.snapshot_id not in seen:  # `seen` guards bad metadata
            found.append(snapshot)
            seen.add(snapshot.snapshot_id)
            snapshot = self.by_id.get(snapshot.parent_id) if snapshot.parent_id is not None else None
        return found

    def main_ancestry(self) -> list[SnapshotInfo]:
        """The current snapshot and its ancestors, newest first: the history readers of main see."""
        return self.ancestry(self.current_snapshot_id)

    def referenced_ids(self) -> set[int]:
        """Heads of every tag and branch (main included, i.e. the current snapshot)."""
        ids = {ref.snapshot_id for ref in self.refs}
        if self.current_snapshot_id is not None:
            ids.add(self.current_snapshot_id)
        return ids

    def branch_ancestry_ids(self) -> set[int]:
        """Every snapshot in the ancestry of a non-main branch: other branches are someone's work."""
        ids: set[int] = set()
        for ref in self.refs:
            if ref.ref_type == "branch" and ref.name != MAIN_BRANCH:
                ids.update(s.snapshot_id for s in self.ancestry(ref.snapshot_id))
        return ids

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
    """The exact snapshots to expire, and why every other snapshot stays."""

    expire_ids: tuple[int, ...]  # sorted ascending by timestamp
    kept_ids: tuple[int, ...]  # sorted ascending by timestamp
    reasons: dict[int, str] = field(default_factory=dict)  # why each kept snapshot is kept

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form for XCom and logs (reason keys become strings, as JSON requires)."""
        return {
            "expire_ids": [int(i) for i in self.expire_ids],
            "kept_ids": [int(i) for i in self.kept_ids],
            "reasons": {str(k): v for k, v in self.reasons.items()},
        }


def _safety_reasons(history: TableHistory, protected_ids: Iterable[int]) -> dict[int, str]:
    """Snapshots no policy may expire, each with the reason(s) why.

    Raises LakeSnapshotError for a protected ID the table does not have: the upstream step that
    produced it acted on another table, or the snapshot was expired under its feet; either way
    the caller's picture of the table is wrong and deciding on it would be unsafe.
    """
    held: dict[int, list[str]] = {}

    def add(snapshot_id: int, reason: str) -> None:
        if snapshot_id in history.by_id and reason not in held.setdefault(snapshot_id, []):
            held[snapshot_id].append(reason)

    if history.current_snapshot_id is not None:
        add(history.current_snapshot_id, "current")
    for ref in sorted(history.refs, key=lambda r: (r.ref_type != "branch", r.name)):
        if ref.ref_type == "branch" and ref.name == MAIN_BRANCH and ref.snapshot_id == history.current_snapshot_id:
            continue  # already "current"
        add(ref.snapshot_id, f"{ref.ref_type} '{ref.name}'")
    for ref in sorted(history.refs, key=lambda r: r.name):
        if ref.ref_type == "branch" and ref.name != MAIN_BRANCH:
            for snapshot in history.ancestry(ref.snapshot_id)[1:]:  # the head already says "branch 'x'"
                add(snapshot.snapshot_id, f"ancestor of branch '{ref.name}'")
    for snapshot_id in _ids(protected_ids, "protected_ids"):
        if snapshot_id not in history.by_id:
            raise LakeSnapshotError(
                f"Protected {history._describe(snapshot_id)} is not in the table's history: it was expired already, "
                "or it belongs to another table. Check which upstream result was passed as protected_snapshot_ids."
            )
        add(snapshot_id, "protected")
    return {k: ", ".join(v) for k, v in held.items()}


def _decide(
    history: TableHistory, expire: set[int], safe: Mapping[int, str], policy_reasons: Mapping[int, str]
) -> RetentionDecision:
    """Remove the never-expire snapshots from ``expire`` and explain every snapshot that stays."""
    expire = expire - set(safe)

    def order(snapshot_id: int) -> tuple[int, int]:
        return history.by_id[snapshot_id].timestamp_ms, snapshot_id

    kept = sorted((s.snapshot_id for s in history.snapshots if s.snapshot_id not in expire), key=order)
    reasons = {i: safe.get(i) or policy_reasons.get(i) or "within policy" for i in kept}
    return RetentionDecision(tuple(sorted(expire, key=order)), tuple(kept), reasons)


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

    Tags, branches, their ancestry on non-main branches and ``protected_ids`` are always kept.
    """
    policy = _parse_policy(policy)
    retained = _positive_int(retained, "retained")
    safe = _safety_reasons(history, protected_ids)
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
        reasons.update({s.snapshot_id: f"within policy: one of the last {retained} commits" for s in kept_main})

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
                reasons[snapshot.snapshot_id] = f"within policy: latest {retained} version(s) of {shown}"
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
                reasons[snapshot.snapshot_id] = f"within policy: current within the last {retained} h"
            elif opened_by is None:
                opened_by = snapshot.snapshot_id
                reasons[snapshot.snapshot_id] = f"within policy: current when the {retained} h window opened"
            else:
                expire.add(snapshot.snapshot_id)
        expire.update(s.snapshot_id for s in _unreferenced(history, main_ids) if s.timestamp_ms < window_start)

    return _decide(history, expire, safe, reasons)


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
    older_than_ms: int | None = None,
    retain_last: int | None = None,
    snapshot_ids: Iterable[int] = (),
    protected_ids: Iterable[int] = (),
) -> RetentionDecision:
    """Iceberg's expire_snapshots rule, decided here so that refs and pending work are honoured.

    Expires every snapshot older than ``older_than_ms`` (strictly, as Iceberg does) except the
    newest ``retain_last`` (default 1) of main's ancestry, plus the explicit ``snapshot_ids``.
    Explicit IDs that are missing, or held by the current snapshot, a ref, a non-main branch or
    ``protected_ids``, raise LakeSnapshotError: the user asked for something impossible or unsafe,
    and silently skipping it would hide that. ``now_ms`` is accepted for symmetry with
    :func:`resolve_clean_policy`; cutoffs come already resolved (see :func:`parse_older_than`).
    """
    explicit = _ids(snapshot_ids, "snapshot_ids")
    if older_than_ms is None and not explicit:
        raise LakeConfigError(
            "Nothing to decide: give older_than (a duration such as '7d' or a timestamp) and/or snapshot_ids."
        )
    retain_last = 1 if retain_last is None else _positive_int(retain_last, "retain_last")
    safe = _safety_reasons(history, protected_ids)
    for snapshot_id in explicit:
        if snapshot_id not in history.by_id:
            raise LakeSnapshotError(
                f"Cannot expire {history._describe(snapshot_id)}: it is not in the table's history "
                "(expired already, or it belongs to another table)."
            )
        if snapshot_id in safe:
            raise LakeSnapshotError(
                f"Refusing to expire {history._describe(snapshot_id)}: it is held by {safe[snapshot_id]}. "
                "Tags and branches are savepoints and protected snapshots are pending work; remove the ref "
                "or the protection first if it really must go."
            )

    main = history.main_ancestry()
    retained = main[:retain_last]
    reasons = {s.snapshot_id: f"retain_last: one of the newest {retain_last} of main" for s in retained}
    expire = set(explicit)
    if older_than_ms is not None:
        retained_ids = set(reasons)
        for snapshot in history.snapshots:
            if snapshot.snapshot_id in retained_ids or snapshot.snapshot_id in expire:
                continue
            if snapshot.timestamp_ms < older_than_ms:
                expire.add(snapshot.snapshot_id)
            else:
                reasons[snapshot.snapshot_id] = "newer than older_than"
    default = "not requested" if older_than_ms is None else "within policy"
    for snapshot in history.snapshots:
        reasons.setdefault(snapshot.snapshot_id, default)
    # Explicitly requested IDs override retain_last, as in Iceberg; the safety rules were checked above.
    return _decide(history, expire, safe, {k: v for k, v in reasons.items() if k not in expire})


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

    text = value.strip()
    if text == "" or text.lower() in ("none", "null"):
        return None
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
    """A :class:`TableHistory` from a PyIceberg table's metadata.

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
        SnapshotRef(name, ref.snapshot_id, getattr(ref.snapshot_ref_type, "value", str(ref.snapshot_ref_type)))
        for name, ref in sorted(metadata.refs.items())
    )
    return TableHistory(snapshots=tuple(snapshots), refs=refs, current_snapshot_id=metadata.current_snapshot_id)


def _changed_partitions(table: Any, snapshot: Any, specs: Mapping[int, Any]) -> frozenset[str]:
    """Partition keys of the files ``snapshot`` added or removed (data and delete files alike)."""
    from pyiceberg.manifest import ManifestEntryStatus  # only here: the rest of the module is pure

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
    """JSON of the partition by spec field name (stable across specs); "" when unpartitioned."""
    if not spec.fields:
        return ""
    values = {f.name: partition[pos] for pos, f in enumerate(spec.fields)}
    return json.dumps(values, sort_keys=True, default=str)
