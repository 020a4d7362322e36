"""Every Spark job of this provider: its name, the contract it takes and the contract it returns.

Declared once, here (the names themselves in ``core/step_names.py``: a step runs the job of its
own name). The job hook runs an args contract and returns the job's result contract
(it finds the job by the contract's type), the application started by spark-submit and the
``batch`` job find the job's module by its name, and an unknown name is refused in one place
(:func:`job_named`). A new job is a module in ``jobs/`` and a line below.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Generic, TypeVar

from airflow_lake_provider.core import step_names as names
from airflow_lake_provider.core.contracts import (
    BatchJobArgs,
    BatchJobItem,
    BatchJobResult,
    CleanJobArgs,
    CleanJobResult,
    Contract,
    ConvertEqualityDeletesJobArgs,
    ConvertEqualityDeletesResult,
    ExpireJobArgs,
    ExpiryOutcome,
    RestoreQuarantineJobArgs,
    RestoreQuarantineResult,
    RewriteJobArgs,
    RewriteResult,
    SparkPlanJobArgs,
    SparkPlanJobResult,
    SqlJobArgs,
    SqlJobResult,
)
from airflow_lake_provider.exceptions import LakeConfigError

A = TypeVar("A", bound=Contract)
R = TypeVar("R", bound=Contract)


@dataclasses.dataclass(frozen=True)
class Job(Generic[A, R]):
    """One job: ``jobs/<name>.py``'s ``run`` reads ``args`` and returns ``result`` (as JSON)."""

    name: str
    args: type[A]
    result: type[R]

    @property
    def module(self) -> str:
        return f"airflow_lake_provider.jobs.{self.name}"


JOBS: dict[str, Job] = {job.name: job for job in (
    Job(names.SQL, SqlJobArgs, SqlJobResult),
    Job(names.PLAN, SparkPlanJobArgs, SparkPlanJobResult),
    Job(names.REWRITE, RewriteJobArgs, RewriteResult),
    Job(names.EXPIRE, ExpireJobArgs, ExpiryOutcome),
    Job(names.CLEAN, CleanJobArgs, CleanJobResult),
    Job(names.CONVERT_EQUALITY_DELETES, ConvertEqualityDeletesJobArgs, ConvertEqualityDeletesResult),
    Job(names.RESTORE_QUARANTINE, RestoreQuarantineJobArgs, RestoreQuarantineResult),
    Job(names.BATCH, BatchJobArgs, BatchJobResult),
)}
_BY_ARGS: dict[type, Job] = {job.args: job for job in JOBS.values()}


def job_named(name: str) -> Job:
    """The job called ``name``; anything else is refused with the known names."""
    try:
        return JOBS[name]
    except (KeyError, TypeError):
        raise LakeConfigError(f"Unknown job {name!r}; known jobs: {', '.join(JOBS)}.") from None


def job_for(args: Contract) -> Job:
    """The job that takes ``args`` (by its exact contract type: a clean's args are not an expire's)."""
    try:
        return _BY_ARGS[type(args)]
    except KeyError:
        raise LakeConfigError(f"{type(args).__name__} is no job's arguments; the jobs take "
                              f"{', '.join(t.__name__ for t in _BY_ARGS)}.") from None


def check_batch(batch: BatchJobArgs) -> BatchJobArgs:
    """``batch`` validated, every job of it known (refused before a JVM starts)."""
    batch.validate()
    unknown = [item.job for item in batch.jobs if item.job not in JOBS]
    if unknown:
        raise LakeConfigError(f"Unknown jobs in the batch: {', '.join(map(repr, unknown))}; known jobs: "
                              f"{', '.join(JOBS)}.")
    return batch


def batch_of(jobs: Sequence[Contract]) -> BatchJobArgs:
    """One ``batch`` application running the jobs that take ``jobs`` (args contracts), in order."""
    return check_batch(BatchJobArgs(jobs=[BatchJobItem(job=job_for(args).name, args=args.validate().to_json())
                                          for args in jobs]))
