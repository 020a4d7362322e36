"""Run a step: prepare (no JVM) -> its job -> finish, then read the table's state after it.

Written once, for everyone who runs steps: the operators (which add leases, asset events and
lineage around it), the fleet (which runs many prepared steps' jobs in one application) and any
code without Airflow (a script, a test, a benchmark), which hands in how to run a job::

    from airflow_lake_provider.steps.runner import CatalogTable, run_step

    ran = run_step(ExpireStep(table="demo.events", retain_last=5, ...), CatalogTable(catalog, "demo.events"),
                   run_job=my_job_runner)
    ran.outcome.result  # the ExpireResult

Everything a step decided in ``prepare`` travels in the :class:`~airflow_lake_provider.steps.base.Prepared`
value, never on the step, so one step object can be prepared again (a retry, another table's fleet run).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from airflow_lake_provider.core.contracts import AirflowRun, Contract
from airflow_lake_provider.core.identifiers import TableIdentifier
from airflow_lake_provider.core.snapshots import describe_change
from airflow_lake_provider.core.table_digest import digest_of_table
from airflow_lake_provider.steps.base import Outcome, Prepared, Step, TableReader

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table

    from airflow_lake_provider.core.table_digest import TableDigest

R = TypeVar("R", bound=Contract)

#: How a job runs: its args contract in, its result contract out (the operators' Spark job hook;
#: a test's in-process session).
JobRunner = Callable[[Contract], Any]


@dataclasses.dataclass(frozen=True)
class CatalogTable:
    """A table read through a PyIceberg catalog (a :class:`~airflow_lake_provider.steps.base.TableReader`)."""

    catalog: Catalog
    table: str

    def load_table(self) -> Table:
        return self.catalog.load_table(TableIdentifier.parse(self.table).dotted)

    def read_digest(self) -> TableDigest:
        loaded = self.load_table()
        return digest_of_table(loaded)


@dataclasses.dataclass(frozen=True)
class StepRun(Generic[R]):
    """What running a step gave: its outcome, and the table's state before and after (``after`` is
    ``before`` when the step did not change the table; ``None`` for a step with no summary, the plan)."""

    outcome: Outcome[R]
    before: dict[str, Any]
    after: dict[str, Any] | None

    @property
    def result(self) -> R:
        return self.outcome.result


def complete(step: Step, reader: TableReader, prepared: Prepared, job_result: Any = None) -> StepRun:
    """Finish a prepared step with its job's result (none when it needed no job), and end its log
    with one line: what was done and the table before -> after.

    Raises what :meth:`Step.finish` raises (``StepFailed`` with the partial result)."""
    outcome = prepared.done if prepared.done is not None else step.finish(prepared, job_result)
    if outcome.summary is None:
        return StepRun(outcome, prepared.before, None)
    return StepRun(outcome, prepared.before, summarize(step, reader, prepared.before, outcome))


def run_step(step: Step, reader: TableReader, run: AirflowRun | None, run_job: JobRunner) -> StepRun:
    """Prepare ``step`` without a JVM, run its job with ``run_job`` when it needs one, and finish it."""
    prepared = step.prepare(reader, run)
    result = run_job(prepared.args) if prepared.args is not None else None
    return complete(step, reader, prepared, result)


def summarize(step: Step, reader: TableReader, before: dict[str, Any], outcome: Outcome) -> dict[str, Any]:
    """Log what was done and the table before -> after; returns after. An outcome that did not
    change the table (a dry run, nothing to do) reports ``before`` without reading the table again."""
    assert outcome.summary is not None, "summarize needs an outcome with a summary"
    after = reader.read_digest().state() if outcome.changed else before
    step.say("%s", describe_change(step.dotted, before, after, outcome.summary))
    return after
