"""Bounded retries of a commit that conflicts with another writer, shared by the jobs that commit.

Iceberg refuses a commit whose validation fails (``ValidationException``: another writer changed
the files this one depends on) or that loses the race for the table pointer after its own
retries (``CommitFailedException``). Both mean "plan again from the current snapshot": the
stage is run again, a bounded number of times, with a doubling wait in between. Anything else
is a real failure and propagates at once.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

T = TypeVar("T")

_CONFLICTS = {
    "org.apache.iceberg.exceptions.ValidationException": "validation",
    "org.apache.iceberg.exceptions.CommitFailedException": "commit",
}
MAX_BACKOFF_SECONDS = 30.0


class CommitConflict(Exception):
    """Every attempt of a commit conflicted with another writer's commit."""


@dataclasses.dataclass(frozen=True)
class Finished(Generic[T]):
    """How one attempt of a stage finished (a conflict raises instead): its ``outcome`` as the attempts
    record it (``committed``, ``nothing to commit``, ...), the stage's ``value``, and ``unfinished``:
    work Iceberg dropped, in words, which is tried again."""

    outcome: str
    value: T
    unfinished: str | None = None


@dataclasses.dataclass(frozen=True)
class AttemptRecord:
    """One attempt of one stage, as a job's result lists it (``attempts``)."""

    stage: str
    attempt: int
    starting_snapshot_id: int | None
    outcome: str
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


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


class CommitRetries:
    """The bounded retries of every stage of one job on one table, and the record of every attempt.

    :meth:`run` runs a stage until it finishes, at most ``max_attempts`` times, waiting ``backoff``
    seconds before the first retry, doubled for each further one (at most :data:`MAX_BACKOFF_SECONDS`),
    each retry planned again from the table's current snapshot. After the last conflicting attempt it
    raises ``error`` with ``give_up(attempts)``'s message.
    """

    def __init__(self, jtable, *, max_attempts: int, backoff: float,
                 give_up: Callable[[Sequence[AttemptRecord]], str], error: type[CommitConflict] = CommitConflict):
        self.jtable, self.max_attempts, self.backoff = jtable, max_attempts, backoff
        self.give_up, self.error = give_up, error
        self.attempts: list[AttemptRecord] = []

    def run(self, label: str, stage: Callable[[], Finished[T]]) -> T:
        """``stage()``'s value once it finishes: a :class:`Finished` with nothing ``unfinished``, or the last
        attempt's. A commit conflict raised by Iceberg is tried again; other errors propagate."""
        for attempt in range(1, self.max_attempts + 1):
            if attempt > 1:
                time.sleep(min(self.backoff * 2 ** (attempt - 2), MAX_BACKOFF_SECONDS))
                self.jtable.refresh()  # plan again from the current snapshot
            start = self.jtable.currentSnapshot()
            starting_snapshot_id = int(start.snapshotId()) if start is not None else None
            try:
                finished = stage()
            except Exception as failure:  # only conflicts are retried, the rest re-raised
                reason = conflict_reason(failure)
                if reason is None:
                    raise
                self.attempts.append(AttemptRecord(label, attempt, starting_snapshot_id, "conflict", reason))
                if attempt == self.max_attempts:
                    raise self.error(self.give_up(self.attempts)) from None
                continue
            self.attempts.append(AttemptRecord(label, attempt, starting_snapshot_id, finished.outcome,
                                               finished.unfinished or ""))
            if not finished.unfinished or attempt == self.max_attempts:
                return finished.value
        raise AssertionError("unreachable")

    def to_json(self) -> list[dict[str, Any]]:
        return [attempt.to_json() for attempt in self.attempts]
