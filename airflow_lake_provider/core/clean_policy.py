"""The Hudi cleaner's policies on Iceberg snapshots, never under the table's own retention (pure logic).

A policy alone (:func:`_policy_decision`) says which snapshots it would let go; the clean step's
decision (:func:`resolve_clean_policy`) removes one only when the table's own retention, as Iceberg
resolves it (:func:`~airflow_lake_provider.core.retention_decision.table_verdicts`), lets it go as
well, unless the settings override the table's retention. The safety rules of every decision
(current snapshot, protected snapshots) apply here as in the expire step.
"""

from __future__ import annotations

from collections.abc import Sequence

from airflow_lake_provider.core.coercion import HOUR_MS
from airflow_lake_provider.core.history import SnapshotInfo, TableHistory
from airflow_lake_provider.core.retention_decision import (
    RetentionDecision,
    decide,
    merge_reasons,
    safety_reasons,
    table_verdicts,
)
from airflow_lake_provider.core.retention_settings import CleanPolicy, CleanSettings
from airflow_lake_provider.exceptions import LakeConfigError

__all__ = ["resolve_clean_policy"]


def resolve_clean_policy(
    history: TableHistory,
    settings: CleanSettings,
    *,
    now_ms: int,
    protected_ids: Sequence[int] = (),
) -> RetentionDecision:
    """Resolve a Hudi cleaner policy on an Iceberg table into the snapshots to expire.

    ``settings`` (from :meth:`CleanSettings.checked`) name the policy and its ``retained``:

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
    override = settings.override_table_retention
    label = settings.label
    safe = safety_reasons(history, protected_ids)
    policy_expire, policy_reasons = _policy_decision(history, settings.policy, settings.retained, now_ms)
    table = table_verdicts(history, now_ms, main_by_policy=override)
    expire: set[int] = set()
    removed: dict[int, str] = {}
    for snapshot in history.snapshots:
        sid = snapshot.snapshot_id
        if sid in safe or sid in table.kept:
            continue
        if sid in policy_expire:
            if override:
                expire.add(sid)
                removed[sid] = f"not kept by clean policy {label} (override_table_retention)"
            elif sid in table.removed:
                expire.add(sid)
                removed[sid] = (
                    f"not kept by clean policy {label}, and the table's retention lets it go: {table.removed[sid]}"
                )
        elif override and sid in table.removed:  # another branch's history, past its own rules
            expire.add(sid)
            removed[sid] = table.removed[sid]
    policy_kept = {s.snapshot_id: [f"clean policy {label}: {policy_reasons.get(s.snapshot_id, 'does not remove it')}"]
                   for s in history.snapshots if s.snapshot_id not in policy_expire}
    policy_would = {sid: [f"the table's retention keeps it though clean policy {label} would not"]
                    for sid in policy_expire if sid in table.kept and not override}
    kept = merge_reasons(safe, policy_kept, table.kept, policy_would)
    return decide(history, expire, kept, removed, table.removed_refs)


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
        window_start = now_ms - retained * HOUR_MS
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


def _unreferenced(history: TableHistory, main_ids: set[int]) -> list[SnapshotInfo]:
    """Snapshots off main's ancestry (rolled back, replaced, staged); safety rules apply later."""
    return [s for s in history.snapshots if s.snapshot_id not in main_ids]
