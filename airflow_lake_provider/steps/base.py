"""A maintenance step as a plain object: it prepares without a JVM, one Spark job runs, it finishes.

Why steps are not operators: the fleet, the benchmarks and a user's own code want a table's
checks without pretending to be Airflow. A step reads the table through a :class:`TableReader`,
is told which Airflow run it belongs to (an :class:`~airflow_lake_provider.core.contracts.AirflowRun`
or ``None``), and never imports Airflow. The operator layer's runner
(:meth:`~airflow_lake_provider.operators.base.LakeMaintenanceOperator.run_step`) owns what every
step shares: coercion, leases, submitting the job, the log summary, asset events and lineage.
"""

from __future__ import annotations

import dataclasses
import logging
import typing
from functools import cache
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, TypeVar

from airflow_lake_provider.core.coercion import coerce
from airflow_lake_provider.core.contracts import AirflowRun, Contract
from airflow_lake_provider.core.identifiers import TableIdentifier
from airflow_lake_provider.exceptions import LakeConfigError, LakeJobError

if TYPE_CHECKING:
    from pyiceberg.table import Table

    from airflow_lake_provider.core.table_digest import TableDigest

A = TypeVar("A", bound=Contract)
R = TypeVar("R", bound=Contract)
S = TypeVar("S", bound="Step")


class StepLog(Protocol):
    """Where a step logs: a stdlib :class:`logging.Logger`, or an Airflow task's ``self.log``."""

    def debug(self, msg: Any, /, *args: Any) -> object: ...
    def info(self, msg: Any, /, *args: Any) -> object: ...
    def warning(self, msg: Any, /, *args: Any) -> object: ...
    def error(self, msg: Any, /, *args: Any) -> object: ...
    def exception(self, msg: Any, /, *args: Any) -> object: ...


class TableReader(Protocol):
    """How a step reads its table (the operator's lake hook; a test's catalog)."""

    def load_table(self) -> Table:
        """The PyIceberg table (validated name, no JVM)."""
        ...

    def read_digest(self) -> TableDigest:
        """The table's metadata read lean, for steps that decide from the history alone."""
        ...


@dataclasses.dataclass(frozen=True)
class Outcome(Generic[R]):
    """What a step did: its result contract (the XCom ``return_value``) and one human line.

    ``changed``: the table may have changed, so the summary reads its state again. A step that
    only reads the table (the plan) has no summary.
    """

    result: R
    summary: str | None
    changed: bool = True


@dataclasses.dataclass(frozen=True)
class Prepared(Generic[A, R]):
    """A step ready for Spark: the table's state before, and the job's args, or the outcome
    when no job is needed (a dry run, nothing to do, recovered from an earlier try)."""

    before: dict[str, Any]
    args: A | None = None
    done: Outcome[R] | None = None

    def __post_init__(self) -> None:
        if (self.args is None) == (self.done is None):
            raise ValueError("A prepared step has either job arguments or an outcome.")


class StepFailed(LakeJobError):
    """A step whose job ran but whose outcome fails the task; ``partial_result`` is what it did."""

    def __init__(self, message: str, *, job: str, partial_result: Contract) -> None:
        super().__init__(message, job=job)
        self.partial_result = partial_result


@dataclasses.dataclass(kw_only=True)
class Step(Generic[A, R]):
    """Base of the steps: the table, where to log, and the prepare -> job -> finish protocol.

    Subclasses are dataclasses whose fields are the step's parameters, with the names the
    operators use for them; :meth:`build` reads them from text as a rendered template gives them.
    """

    #: The step's name in summaries, asset events and lineage (``rewrite``, ``expire``...).
    name: ClassVar[str] = "step"

    table: str
    log: StepLog = dataclasses.field(default=logging.getLogger(__name__), repr=False, compare=False)

    @property
    def identifier(self) -> TableIdentifier:
        return TableIdentifier.parse(self.table)

    @property
    def dotted(self) -> str:
        return self.identifier.dotted

    @classmethod
    def parameter_names(cls) -> tuple[str, ...]:
        """The step's own parameters (what an operator or a fleet's settings may set): its fields
        but the table, the log, and the state a step keeps between prepare and finish (``init=False``)."""
        return tuple(f.name for f in dataclasses.fields(cls) if f.init and f.name not in ("table", "log"))

    @classmethod
    def build(cls: type[S], *, table: str, log: StepLog | None = None, **parameters: Any) -> S:
        """The step with ``parameters`` coerced from text (``"False"``, ``"5"``...) by the field types.

        Unknown parameters are refused with the names the step takes.
        """
        unknown = sorted(set(parameters) - set(cls.parameter_names()))
        if unknown:
            raise LakeConfigError(f"The {cls.name} step takes no {', '.join(unknown)}; it takes "
                                  f"{', '.join(cls.parameter_names())}.")
        klass: type = cls  # as a plain type: mypy does not see type[S] as Hashable (the cache's key)
        hints = _field_hints(klass)
        values = {key: coerce(value, hints[key], what=key) for key, value in parameters.items()}
        return cls(table=table, **({"log": log} if log is not None else {}), **values)

    @classmethod
    def of(cls: type[S], source: Any, *, table: str, log: StepLog | None = None) -> S:
        """The step named by ``source``'s attributes of the step's parameter names (an operator, which
        has every one of them)."""
        return cls(table=table, **({"log": log} if log is not None else {}),
                   **{key: getattr(source, key) for key in cls.parameter_names()})

    def prepare(self, reader: TableReader, run: AirflowRun | None) -> Prepared[A, R]:
        """Everything before Spark, without a JVM: checks, the job's args, or the outcome."""
        raise NotImplementedError

    def finish(self, prepared: Prepared[A, R], result: Any) -> Outcome[R]:
        """After the job: say what it did; raise when its outcome must fail the task."""
        raise NotImplementedError


@cache
def _field_hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)
