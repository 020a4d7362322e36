"""The table's own retention as Iceberg resolves it, decided to the exact snapshot IDs (pure logic).

Iceberg's ``ExpireSnapshots`` has no "keep these IDs" option, and its age rule knows nothing of
upstream work in flight. So every decision is taken here, from metadata, in the Airflow worker:
the Spark job is then handed an explicit list of IDs and nothing else.

:func:`table_verdicts` is Iceberg's ``RemoveSnapshots`` on a :class:`TableHistory`; the expire
step's :func:`resolve_expiry` applies it (with the override, if asked for) and the clean policies
(:mod:`airflow_lake_provider.core.clean_policy`) use it as their floor. Whatever the policy, a
snapshot is never expired when it is the current snapshot, the head of a tag or branch that stays,
or in ``protected_ids`` (pending work of upstream tasks). Every :class:`RetentionDecision` says,
per snapshot and per removed ref, which rule kept or removed it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from airflow_lake_provider.core.coercion import snapshot_ids as read_snapshot_ids
from airflow_lake_provider.core.history import MAIN_BRANCH, SnapshotRef, TableHistory
from airflow_lake_provider.core.retention_settings import ExpirySettings
from airflow_lake_provider.core.table_retention import RetentionRule, human_ms
from airflow_lake_provider.exceptions import LakeSnapshotError

__all__ = ["RetentionDecision", "TableVerdicts", "decide", "merge_reasons", "resolve_expiry", "safety_reasons",
           "table_verdicts"]


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

    def explain(self, *, ids_shown: int = 3) -> str:
        """The decision for the task log: the snapshots counted by the rule that kept or removed them
        (in commit order, the first ``ids_shown`` IDs of each), then each removed ref.

        A line per snapshot would drown the result on a table with thousands of them; each
        snapshot's own reason is in the step's result (:meth:`to_dict`: ``kept`` and ``removed``).
        """
        by_reason: dict[str, list[int]] = {}
        for sid, why in self.reasons.items():  # in commit order
            by_reason.setdefault(why, []).append(sid)
        lines = []
        for why, ids in by_reason.items():
            shown = ", ".join(str(i) for i in ids[:ids_shown])
            more = f" and {len(ids) - ids_shown} more" if len(ids) > ids_shown else ""
            lines.append(f"  {len(ids)} {'snapshot' if len(ids) == 1 else 'snapshots'} {why} ({shown}{more})")
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
class TableVerdicts:
    """What Iceberg's RemoveSnapshots would keep and remove, each with its rules' words."""

    kept: dict[int, list[str]]
    removed: dict[int, str]
    removed_refs: dict[str, str]
    retained_refs: list[SnapshotRef]


def table_verdicts(
    history: TableHistory,
    now_ms: int,
    *,
    main_min: RetentionRule | None = None,
    main_age: RetentionRule | None = None,
    unreferenced_age: RetentionRule | None = None,
    main_by_policy: bool = False,
) -> TableVerdicts:
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
            removed_refs[ref.name] = (
                f"{ref.ref_type} {ref.name} removed: its snapshot {ref.snapshot_id} no longer exists"
            )
        elif rule.value is not None and now_ms - snapshot.timestamp_ms > rule.value:
            removed_refs[ref.name] = (f"{ref.ref_type} {ref.name} removed: {rule} exceeded (its snapshot "
                                      f"{ref.snapshot_id} is {human_ms(now_ms - snapshot.timestamp_ms)} old)")
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
    return TableVerdicts(kept, removed, removed_refs, retained)


def safety_reasons(history: TableHistory, protected_ids: Sequence[int]) -> dict[int, str]:
    """Snapshots no rule or policy may expire (current, protected), each with why.

    Ref heads are kept by :func:`table_verdicts` as Iceberg keeps them (a ref past its
    ``max-ref-age-ms`` is removed in the same commit as the expiry, so its head is no longer held).

    Raises LakeSnapshotError for a protected ID the table does not have: the upstream step that
    produced it acted on another table, or the snapshot was expired under its feet; either way
    the caller's picture of the table is wrong and deciding on it would be unsafe.
    """
    held: dict[int, str] = {}
    if history.current_snapshot_id is not None and history.current_snapshot_id in history.by_id:
        held[history.current_snapshot_id] = "current snapshot"
    for snapshot_id in dict.fromkeys(read_snapshot_ids(protected_ids, "protected snapshot IDs")):  # once each
        if snapshot_id not in history.by_id:
            raise LakeSnapshotError(
                f"Protected {history.describe(snapshot_id)} is not in the table's history: it was expired already, "
                "or it belongs to another table. Check which upstream result was passed as protected_snapshot_ids."
            )
        held[snapshot_id] = ", ".join(
            filter(None, (held.get(snapshot_id), "protected (pending work of an upstream task)"))
        )
    return held


def decide(
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


def merge_reasons(*sources: Mapping[int, Any]) -> dict[int, list[str]]:
    """Reasons from several rules, per snapshot, in the order given (safety first)."""
    merged: dict[int, list[str]] = {}
    for source in sources:
        for sid, why in source.items():
            merged.setdefault(sid, []).extend([why] if isinstance(why, str) else why)
    return merged


# The default of resolve_expiry: the table's own retention decides (frozen, so one instance serves every call).
_TABLE_RETENTION_DECIDES = ExpirySettings()


def resolve_expiry(
    history: TableHistory,
    settings: ExpirySettings = _TABLE_RETENTION_DECIDES,
    *,
    now_ms: int,
    snapshot_ids: Sequence[int] = (),
    protected_ids: Sequence[int] = (),
) -> RetentionDecision:
    """What Iceberg's expire_snapshots would expire, decided here so that pending work is honoured.

    By default (``ExpirySettings()``) the table's own retention decides (:func:`table_verdicts`:
    its ``history.expire.*`` properties and every ref's settings). With the override the settings'
    values replace main's rules and the age of snapshots on no ref (each ``None`` falls back to the
    table's); other branches and tags keep their own rules. ``settings`` comes checked from
    :meth:`ExpirySettings.requested`, which refuses values given without the override.

    Explicit ``snapshot_ids`` are expired as well (as in Iceberg). Explicit IDs that are missing,
    or held by the current snapshot, a ref that stays or ``protected_ids``, raise
    LakeSnapshotError: the user asked for something impossible or unsafe, and silently skipping
    it would hide that.
    """
    explicit = read_snapshot_ids(snapshot_ids, "snapshot IDs to expire")
    main_min, main_age = settings.override_rules()
    safe = safety_reasons(history, protected_ids)
    table = table_verdicts(history, now_ms, main_min=main_min, main_age=main_age, unreferenced_age=main_age)
    heads = {r.snapshot_id: f"{r.ref_type} {r.name}" for r in table.retained_refs}
    for snapshot_id in explicit:
        if snapshot_id not in history.by_id:
            raise LakeSnapshotError(
                f"Cannot expire {history.describe(snapshot_id)}: it is not in the table's history "
                "(expired already, or it belongs to another table)."
            )
        held_by = safe.get(snapshot_id) or heads.get(snapshot_id)
        if held_by:
            raise LakeSnapshotError(
                f"Refusing to expire {history.describe(snapshot_id)}: it is held by {held_by}. "
                "Tags and branches are savepoints and protected snapshots are pending work; remove the ref "
                "or the protection first if it really must go."
            )
    removed = {sid: why for sid, why in table.removed.items() if sid not in safe}
    removed.update(dict.fromkeys(explicit, "named in snapshot_ids"))
    kept = merge_reasons(safe, table.kept)
    return decide(history, set(removed), kept, removed, table.removed_refs)
