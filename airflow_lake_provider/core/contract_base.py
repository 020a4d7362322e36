"""The base of every contract: a frozen dataclass with JSON out, JSON in, and one validation.

Below :mod:`airflow_lake_provider.core.contracts` (the step contracts) so that modules those
contracts build on, such as :mod:`airflow_lake_provider.core.quarantine` (its manifest is a
contract), can define contracts of their own without importing the step contracts back.
Older JSON still reads: unknown keys are ignored and missing ones take their default.

Shipped to the Spark driver with the jobs: pure Python, no Airflow, no Spark.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from functools import cache
from typing import TYPE_CHECKING, Any, ClassVar

from airflow_lake_provider.exceptions import LakeConfigError

if TYPE_CHECKING:  # typing_extensions is there for the type checker only: the Spark driver may not have it
    from typing_extensions import Self


class Contract:
    """Base of the step contracts (frozen dataclasses): JSON out, JSON in, one validation."""

    #: The step's name in error messages.
    what: ClassVar[str] = "step"

    if TYPE_CHECKING:  # every subclass is a dataclass: dataclasses.fields/replace take its instances and class
        __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]

    def to_json(self) -> dict[str, Any]:
        """Plain JSON values (dicts, lists, str, int, float, bool, None), nested contracts included."""
        return {f.name: _to_json(getattr(self, f.name)) for f in dataclasses.fields(self)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | Self | None) -> Self:
        """The contract from its JSON: unknown keys ignored, missing keys take their default."""
        if data is None:
            data = {}
        if isinstance(data, cls):
            return data
        if not isinstance(data, Mapping):
            raise LakeConfigError(f"The {cls.what} contract needs a mapping; got {type(data).__name__}.")
        klass: type = cls  # as a plain type: mypy does not see type[Self] as Hashable (the cache's key)
        hints = _hints(klass)
        values = {}
        for f in dataclasses.fields(cls):
            if f.name in data and f.init:
                values[f.name] = _from_json(data[f.name], hints.get(f.name))
        try:
            return cls(**values)
        except TypeError as error:  # a required field is missing
            raise LakeConfigError(f"The {cls.what} contract is incomplete: {error}.") from None

    def validate(self) -> Self:
        """Refuse a contract that cannot be right (``LakeConfigError``); returns itself."""
        return self

    def replace(self, **changes: Any) -> Self:
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
    if origin in (typing.Union, types.UnionType):  # ``tuple[X, ...] | None`` and the like
        for candidate in typing.get_args(annotation):
            if typing.get_origin(candidate) in (list, tuple) and isinstance(value, (list, tuple)):
                return _from_json(value, candidate)
        return value
    if origin in (list, tuple) and isinstance(value, (list, tuple)):
        item = (typing.get_args(annotation) or (None,))[0]
        items = [_from_json(v, item) for v in value]
        return tuple(items) if origin is tuple else items
    return value
