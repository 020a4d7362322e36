"""One family of errors, each saying what happened and what to do about it."""

from __future__ import annotations


class LakeError(Exception):
    """Base class of every error this provider raises on purpose."""


class LakeConfigError(LakeError, ValueError):
    """A connection, option or parameter is invalid. Raised before any Spark starts."""


class LakePlanRefused(LakeConfigError):
    """The planner cannot plan this table as asked, because of what the table holds (not a typo).

    The message says what to do. In the maintenance group a refused plan fails its task, the
    steps after it do not run, and the run fails.
    """


class LakeTableNotFound(LakeError):
    """The named namespace or table does not exist in the catalog."""


class LakeSnapshotError(LakeError):
    """A snapshot ID handed to a step is not (or no longer) part of the table's history."""


class LakeJobError(LakeError):
    """A PySpark application of this provider failed; the message carries Spark's own error."""

    def __init__(self, message: str, *, error_class: str | None = None, job: str | None = None):
        super().__init__(message)
        self.error_class = error_class
        self.job = job
