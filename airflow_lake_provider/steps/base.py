"""A maintenance step as a plain object: it prepares without a JVM, one Spark job runs, it finishes.

Why steps are not operators: the fleet, the benchmarks and a user's own code want a table's
checks without pretending to be Airflow. A step reads the table through a :class:`TableReader`,
is told which Airflow run it belongs to (an :class:`~airflow_lake_provider.core.contracts.AirflowRun`
or ``None``), and never imports Airflow. :mod:`~airflow_lake_provider.steps.runner` runs it
(prepare -> job -> finish); the operators add what only Airflow has (leases, asset events, lineage).

A step's dataclass fields declared with :func:`~airflow_lake_provider.core.settings.setting` are
its settings, and the only place they are declared: the operator's signature, templated fields
and docstring, the maintenance group's per-step mappings, the form's fields and the reference
tables in ``docs/operators/`` are derived from them.
"""

from __future__ import annotations

import dataclasses
import difflib
import logging
from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, TypeVar

from airflow_lake_provider.core.coercion import coerce
from airflow_lake_provider.core.contracts import DEFAULT_COMMIT_RETRY, AirflowRun, Contract
from airflow_lake_provider.core.identifiers import TableIdentifier
from airflow_lake_provider.core.settings import Setting, field_hints, setting, settings_of
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
    #: What prepare decided that finish needs (the step's own value: the table read, the retention decision).
    state: Any = None

    def __post_init__(self) -> None:
        if (self.args is None) == (self.done is None):
            raise ValueError("A prepared step has either job arguments or an outcome.")


class StepFailed(LakeJobError):
    """A step whose job ran but whose outcome fails the task; ``partial_result`` is what it did."""

    def __init__(self, message: str, *, job: str, partial_result: Contract) -> None:
        super().__init__(message, job=job)
        self.partial_result = partial_result


def max_commit_attempts_setting() -> Any:
    """``max_commit_attempts`` of a step whose job swaps delete files beside other writers (convert, repair)."""
    return setting(DEFAULT_COMMIT_RETRY.max_attempts, doc=(
        "Attempts when the commit conflicts with another writer (1-10)."))


def commit_retry_backoff_setting() -> Any:
    """``commit_retry_backoff_seconds`` of the same steps."""
    return setting(DEFAULT_COMMIT_RETRY.retry_backoff_seconds, doc=(
        "Wait before the first retry in seconds, or a duration (``'5s'``), doubled for each further one."))


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
    #: The sentences :meth:`say` logged, in order: the operator hands them to XCom ``summary``.
    said: list[str] = dataclasses.field(default_factory=list, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        """Read each setting by its type, whoever built the step (an operator's rendered text, a
        script's ``ExpireStep(protected_snapshot_ids=[rewrite_result])``)."""
        klass: type = type(self)
        hints = field_hints(klass)
        for s in settings_of(klass):
            setattr(self, s.name, coerce(getattr(self, s.name), hints[s.name], what=s.name))

    def say(self, message: str, *args: Any) -> None:
        """Log a sentence a person reads (the plan, a retention decision, where orphans went, the
        closing line) and keep it: the Lake health page and the demo show the same sentences."""
        self.log.info(message, *args)
        self.said.append(message % args if args else message)

    @property
    def identifier(self) -> TableIdentifier:
        return TableIdentifier.parse(self.table)

    @property
    def dotted(self) -> str:
        return self.identifier.dotted

    @classmethod
    def settings(cls) -> tuple[Setting, ...]:
        """The step's settings (its fields declared with :func:`setting`), in declaration order."""
        klass: type = cls  # as a plain type: mypy does not see type[S] as Hashable (the cache's key)
        return settings_of(klass)

    @classmethod
    def parameter_names(cls) -> tuple[str, ...]:
        """The names of the step's settings: what an operator, a group's mapping or a fleet may set."""
        return tuple(s.name for s in cls.settings())

    @classmethod
    def check(cls, settings: Mapping[str, Any], *, where: str, wired_ok: bool = False) -> None:
        """Refuse what cannot be right before anything runs (a DAG's parse): an unknown name, with the
        closest one, a value of the wrong type, and (unless ``wired_ok``) a setting the group wires.

        Values not known until run time (a ``{{ template }}``, an upstream task's output) pass.
        """
        known = {s.name: s for s in cls.settings()}
        for key, value in settings.items():
            if key not in known:
                cls.refuse_unknown(key, where=where, wired_ok=wired_ok)
            if known[key].wired and not wired_ok:
                raise LakeConfigError(f"{where}: {key!r} of the {cls.name} step is wired by the maintenance group "
                                      "itself (from the task before it); leave it out.")
            if _known_now(value):
                klass: type = cls
                coerce(value, field_hints(klass)[key], what=f"{where}: {key}")

    @classmethod
    def with_more(cls, values: Mapping[str, Any], more: Mapping[str, Any] | None, *, named: AbstractSet[str],
                  where: str) -> dict[str, Any]:
        """The settings ``values`` (``named``: those given by name) with ``more`` settings given as one
        mapping (an operator's ``settings``) over them: checked, and a setting given both ways refused."""
        if not more:
            return dict(values)
        cls.check(more, where=f"{where}: settings")
        both = sorted(set(more) & set(named))
        if both:
            raise LakeConfigError(f"{where}: {', '.join(both)} given both by name and in settings: "
                                  "give each setting once.")
        return {**values, **more}

    @classmethod
    def refuse_unknown(cls, key: str, *, where: str, wired_ok: bool = False) -> None:
        """Refuse ``key``, which is no setting of the step, naming the closest one and those it has."""
        known = {s.name: s for s in cls.settings()}
        close = difflib.get_close_matches(key, known, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        settable = [name for name, s in known.items() if wired_ok or not s.wired]
        raise LakeConfigError(f"{where}: the {cls.name} step has no setting {key!r}; {hint}"
                              f"its settings are {', '.join(settable)}.")

    @classmethod
    def build(cls: type[S], *, table: str, log: StepLog | None = None, **parameters: Any) -> S:
        """The step with ``parameters`` as given (each read by its type in ``__post_init__``).

        An unknown parameter is refused as :meth:`check` refuses it, with the closest setting.
        """
        for key in sorted(set(parameters) - set(cls.parameter_names())):
            cls.refuse_unknown(key, where=f"{cls.name} of {table}", wired_ok=True)
        return cls(table=table, **({"log": log} if log is not None else {}), **parameters)

    def prepare(self, reader: TableReader, run: AirflowRun | None) -> Prepared[A, R]:
        """Everything before Spark, without a JVM: checks, the job's args, or the outcome."""
        raise NotImplementedError

    def finish(self, prepared: Prepared[A, R], result: Any) -> Outcome[R]:
        """After the job: say what it did; raise when its outcome must fail the task."""
        raise NotImplementedError


def _known_now(value: Any) -> bool:
    """A value given as it is, not one Airflow fills in at run time (a template, an ``XComArg``)."""
    if isinstance(value, str):
        return "{{" not in value and "{%" not in value
    if isinstance(value, (bool, int, float)) or value is None:
        return True
    if isinstance(value, (list, tuple)):
        return all(_known_now(v) for v in value)
    if isinstance(value, Mapping):
        return all(_known_now(v) for v in value.values())
    return False
