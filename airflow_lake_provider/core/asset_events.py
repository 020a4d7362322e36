"""What a maintenance step tells downstream DAGs: the asset event's ``extra``, or nothing.

A step emits an event for its table only when it changed the table: a commit (rewrite,
conversion), expired snapshots (expire) or removed files (clean). A dry run, an empty plan or
a clean with nothing to take emits none, so a DAG scheduled on the table's Asset runs after
maintenance that changed it and not after maintenance that did nothing. Pure: no Airflow.
"""

from __future__ import annotations

from typing import Any

# The table's headline figures (core.snapshots.table_state) compared before and after a step.
_FIGURES = ("data_files", "delete_files", "bytes", "records", "snapshots")


def _changed(before: dict[str, Any], after: dict[str, Any], result: dict[str, Any]) -> bool:
    if result.get("dry_run"):
        return False
    if before.get("snapshot_id") != after.get("snapshot_id"):
        return True
    if any(before.get(key) != after.get(key) for key in _FIGURES):
        return True
    # A retried step whose first try committed finds the table already changed: its result says so.
    return bool(result.get("committed_snapshot_ids") or result.get("expired_snapshot_ids")
                or result.get("orphan_file_count") or result.get("quarantined_file_count"))


def maintenance_event_extra(step: str, table: str, before: dict[str, Any], after: dict[str, Any],
                            result: dict[str, Any] | None, *, health_score: int | None = None) -> dict[str, Any] | None:
    """The ``extra`` of the asset event for ``table`` after ``step``, or ``None`` when it changed nothing.

    ``before`` and ``after`` are the table's figures around the step; ``result`` is the step's
    XCom result. Small and JSON-able: figures and snapshot IDs, never file lists or secrets.
    """
    result = result if isinstance(result, dict) else {}
    if not _changed(before, after, result):
        return None
    extra: dict[str, Any] = {
        "table": table,
        "step": step,
        "snapshot_id_before": result.get("snapshot_id_before", before.get("snapshot_id")),
        "snapshot_id_after": result.get("snapshot_id_after", after.get("snapshot_id")),
        **{f"{key}_before": before.get(key) for key in _FIGURES},
        **{f"{key}_after": after.get(key) for key in _FIGURES},
    }
    if result.get("committed_snapshot_ids"):
        extra["committed_snapshot_ids"] = [int(s) for s in result["committed_snapshot_ids"]]
    if result.get("expired_snapshot_ids"):
        extra["expired_snapshots"] = len(result["expired_snapshot_ids"])
    if result.get("orphan_file_count"):
        extra["orphan_files_taken"] = int(result["orphan_file_count"])
    if health_score is not None:
        extra["health_score"] = int(health_score)
    return extra
