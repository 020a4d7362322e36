"""Every Spark job of this provider: its name, the contract it takes and the contract it returns.

Declared once, here (the names themselves in ``core/step_names.py``: a step runs the job of its
own name). The job hook runs an args contract and returns the job's result contract
(it finds the job by the contract's type), the application started by spark-submit and the
``batch`` job find the job's module by its name, and an unknown name is refused in one place
(:func:`job_named`). How a job's driver is best started (:class:`LaunchHints`) is declared here
too, not in the contracts. A new job is a module in ``jobs/`` and a line below.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

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
    RepairDeletionVectorsJobArgs,
    RepairDeletionVectorsResult,
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
class LaunchHints:
    """How the job hook starts a job's driver when spark-submit starts it in the task (local and client
    mode). A driver on a cluster (cluster mode) takes none: YARN fails an application whose driver starts no
    SparkContext, and its JVM is the cluster's to configure.

    The defaults suit every job that reads or writes data through Spark: the SparkSession at once, the
    JVM as Spark's own launcher sets it up. ``java_options`` go on the driver's command line
    (``SPARK_SUBMIT_OPTS``) and are fixed for the life of the JVM: a job may name an option that slows
    Spark work (the JIT's first tier only, ``-XX:TieredStopAtLevel=1``) only if it can never run Spark
    work; no job here can promise that (:func:`rewrite_launch` says why the rewrite cannot).
    """

    #: Start no SparkSession until the job uses Spark (``jobs/session.py``'s ``DeferredSparkSession``):
    #: the same code runs either way, and a job that never needs Spark skips its start and stop.
    defer_spark_session: bool = False
    java_options: tuple[str, ...] = ()


def spark_at_once(args: Any) -> LaunchHints:
    """The launch of every job that reads or writes data through Spark: no hints."""
    return LaunchHints()


def rewrite_launch(args: RewriteJobArgs) -> LaunchHints:
    """The rewrite's launch: the SparkSession deferred where the worker expects the Arrow rewriter
    (``arrow_expected``), and the JVM never limited to the JIT's first tier.

    Deferring costs nothing when Spark is needed after all: ``DeferredSparkSession`` starts it on first
    use, with the same settings. A JIT flag cannot follow the job's choice: it is fixed when the JVM
    starts, and the job chooses its rewriter after that (``jobs/rewriters.py``'s ``choose_rewriter``), on
    every attempt. Any rewrite the worker expects Arrow to do may still run Iceberg's Spark action in this
    JVM (in local mode its executors are threads of it): a file without Iceberg's field IDs found while
    reading, delete files another writer committed before a retry, a ``rewrite_manifests`` or a
    position-delete rewrite after it. Limited to the first tier, that JVM would run Spark's reading and
    writing without the second tier's optimised code for as long as the work lasts, to save start-up time
    on the Arrow path only. So the rewrite's JVM is launched as every Spark job's is.
    """
    return LaunchHints(defer_spark_session=args.arrow_expected)


def spark_when_used(args: Any) -> LaunchHints:
    """The expire and clean jobs' launch: the SparkSession deferred, since their work is metadata, a
    listing and deletes, done by Iceberg's code in the driver's JVM (``jobs/expire.py``,
    ``jobs/orphan_listing.py``); only a large table on a cluster starts Spark, for Iceberg's Spark actions."""
    return LaunchHints(defer_spark_session=True)


@dataclasses.dataclass(frozen=True)
class Job(Generic[A, R]):
    """One job: ``jobs/<name>.py``'s ``run`` reads ``args`` and returns ``result`` (as JSON); ``launch``
    says how to start its driver for those ``args`` (:class:`LaunchHints`)."""

    name: str
    args: type[A]
    result: type[R]
    launch: Callable[[A], LaunchHints] = spark_at_once

    @property
    def module(self) -> str:
        return f"airflow_lake_provider.jobs.{self.name}"


JOBS: dict[str, Job] = {job.name: job for job in (
    Job(names.SQL, SqlJobArgs, SqlJobResult),
    Job(names.PLAN, SparkPlanJobArgs, SparkPlanJobResult),
    Job(names.REWRITE, RewriteJobArgs, RewriteResult, rewrite_launch),
    Job(names.EXPIRE, ExpireJobArgs, ExpiryOutcome, spark_when_used),
    Job(names.CLEAN, CleanJobArgs, CleanJobResult, spark_when_used),
    Job(names.CONVERT_EQUALITY_DELETES, ConvertEqualityDeletesJobArgs, ConvertEqualityDeletesResult),
    Job(names.RESTORE_QUARANTINE, RestoreQuarantineJobArgs, RestoreQuarantineResult),
    Job(names.REPAIR_DELETION_VECTORS, RepairDeletionVectorsJobArgs, RepairDeletionVectorsResult),
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
