"""What every step takes and returns: one typed contract per step, read here and nowhere else.

Each value that crosses a seam (Airflow task -> Spark job, Spark job -> task, task -> XCom ->
next task) is one of these frozen dataclasses. The operator builds a step's job arguments (and
:meth:`Contract.validate` refuses bad ones before any JVM starts), the PySpark job reads the same
class with :meth:`Contract.from_json`, its result comes back as a class, and the operator returns
it to XCom as plain JSON with :meth:`Contract.to_json`. Defaults are the field defaults: written
once. Older XComs still read: unknown keys are ignored and missing ones take their default.

Shipped to the Spark driver with the jobs: pure Python, no Airflow, no Spark.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from functools import cache
from typing import Any, ClassVar, TypeVar

from airflow_lake_provider.exceptions import LakeConfigError

C = TypeVar("C", bound="Contract")


class Contract:
    """Base of the step contracts (frozen dataclasses): JSON out, JSON in, one validation."""

    #: The step's name in error messages.
    what: ClassVar[str] = "step"

    def to_json(self) -> dict[str, Any]:
        """Plain JSON values (dicts, lists, str, int, float, bool, None), nested contracts included."""
        return {f.name: _to_json(getattr(self, f.name)) for f in dataclasses.fields(self)}

    @classmethod
    def from_json(cls: type[C], data: Mapping[str, Any] | None) -> C:
        """The contract from its JSON: unknown keys ignored, missing keys take their default."""
        if data is None:
            data = {}
        if isinstance(data, cls):
            return data
        if not isinstance(data, Mapping):
            raise LakeConfigError(f"The {cls.what} contract needs a mapping; got {type(data).__name__}.")
        hints = _hints(cls)
        values = {}
        for f in dataclasses.fields(cls):
            if f.name in data and f.init:
                values[f.name] = _from_json(data[f.name], hints.get(f.name))
        try:
            return cls(**values)
        except TypeError as error:  # a required field is missing
            raise LakeConfigError(f"The {cls.what} contract is incomplete: {error}.") from None

    def validate(self: C) -> C:
        """Refuse a contract that cannot be right (``LakeConfigError``); returns itself."""
        return self

    def replace(self: C, **changes: Any) -> C:
        return dataclasses.replace(self, **changes)


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _to_json(value: Any) -> Any:
    if isinstance(value, Contract):
        return value.to_json()
    if isinstance(value, Mapping):
        return {str(k): _to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_to_json(v) for v in value]
    return value


def _from_json(value: Any, annotation: Any) -> Any:
    """Nested contracts (``X``, ``X | None``, ``list[X]``, ``tuple[X, ...]``) from their JSON."""
    if value is None or annotation is None:
        return value
    for candidate in (annotation, *typing.get_args(annotation)):
        if isinstance(candidate, type) and issubclass(candidate, Contract) and isinstance(value, Mapping):
            return candidate.from_json(value)
    origin = typing.get_origin(annotation)
    if origin in (list, tuple) and isinstance(value, (list, tuple)):
        item = (typing.get_args(annotation) or (None,))[0]
        items = [_from_json(v, item) for v in value]
        return tuple(items) if origin is tuple else items
    return value


# == plan ==
# (the plan operator's XCom: PlanResult)





# == spark plan job ==
# (the Spark plan job's arguments and result)





# == rewrite ==
# (RewriteJobArgs, RewriteResult)





# == expire ==
# (ExpireJobArgs, ExpireResult; a shared commit-retry contract may start here)





# == clean ==
# (CleanJobArgs, CleanResult)





# == convert equality deletes ==
# (ConvertEqualityDeletesJobArgs, ConvertEqualityDeletesResult)
