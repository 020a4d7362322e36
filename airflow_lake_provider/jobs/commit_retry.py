"""Bounded retries of a commit that conflicts with another writer, shared by the jobs that commit.

Iceberg refuses a commit whose validation fails (``ValidationException``: another writer changed
the files this one depends on) or that loses the race for the table pointer after its own
retries (``CommitFailedException``). Both mean "plan again from the current snapshot": the
stage is run again, a bounded number of times, with a doubling wait in between. Anything else
is a real failure and propagates at once.
"""

from __future__ import annotations

import time
from typing import Any

_CONFLICTS = {
    "org.apache.iceberg.exceptions.ValidationException": "validation",
    "org.apache.iceberg.exceptions.CommitFailedException": "commit",
}
MAX_BACKOFF_SECONDS = 30.0


class CommitConflict(Exception):
    """Every attempt of a commit conflicted with another writer's commit."""


def conflict_reason(error: BaseException) -> str | None:
    """Iceberg's own words when ``error`` is a commit conflict (anywhere in the Java cause chain)."""
    java = getattr(error, "java_exception", None)
    seen = 0
    while java is not None and seen < 20:
        name = str(java.getClass().getName())
        message = str(java.getMessage() or "")
        if name in _CONFLICTS:
            return f"{name.rsplit('.', 1)[-1]}: {message}"
        if "partial-progress.max-failed-commits" in message:
            return message
        cause = java.getCause()
        java = cause if cause is not None and cause != java else None
        seen += 1
    return None


def retrying(stage, *, label: str, jtable, attempts: list[dict[str, Any]], max_attempts: int, backoff: float,
             give_up, error: type[CommitConflict] = CommitConflict):
    """Run ``stage()`` until it finishes, at most ``max_attempts`` times, waiting (doubling, bounded) between.

    ``stage`` returns ``(value, outcome, unfinished)``: ``unfinished`` names work Iceberg dropped
    (tried again). A commit conflict raised by Iceberg is tried again too; after the last attempt
    it becomes ``error`` with ``give_up()``'s message. Other errors propagate.
    """
    for attempt in range(1, max_attempts + 1):
        if attempt > 1:
            time.sleep(min(backoff * 2 ** (attempt - 2), MAX_BACKOFF_SECONDS))
            jtable.refresh()  # plan again from the current snapshot
        start = jtable.currentSnapshot()
        record = {"stage": label, "attempt": attempt,
                  "starting_snapshot_id": int(start.snapshotId()) if start is not None else None}
        try:
            value, outcome, unfinished = stage()
        except Exception as failure:  # only conflicts are retried, the rest re-raised
            reason = conflict_reason(failure)
            if reason is None:
                raise
            attempts.append({**record, "outcome": "conflict", "detail": reason})
            if attempt == max_attempts:
                raise error(give_up()) from None
            continue
        attempts.append({**record, "outcome": outcome, "detail": unfinished or ""})
        if not unfinished or attempt == max_attempts:
            return value
    raise AssertionError("unreachable")
