"""A setting declared once: a dataclass field with its documentation.

The steps' settings (:mod:`airflow_lake_provider.steps.base`), the Spark launch settings
(:mod:`airflow_lake_provider.core.spark_settings`) and the lease settings
(:class:`~airflow_lake_provider.core.lease.LeaseSettings`) are declared with :func:`setting`; the
operators' parameters, templated fields and docstrings, the maintenance group's mappings, the
form's fields and the reference tables of the docs are read from :func:`settings_of`. Pure.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import typing
from collections.abc import Callable, Sequence
from functools import cache
from typing import Any, TypeVar

T = TypeVar("T")

#: The metadata keys of a setting's documentation and of the mark of a setting the maintenance group wires.
DOC, WIRED = "doc", "wired"


def setting(default: Any = dataclasses.MISSING, *, doc: str, wired: bool = False,
            default_factory: Any = dataclasses.MISSING) -> Any:
    """A setting: a dataclass field with its documentation (one or more sentences, reST).

    ``wired``: the maintenance group sets it from an upstream task (the plan, the lease, an
    approval), so the group refuses it in a step's mapping.
    """
    return dataclasses.field(default=default, default_factory=default_factory, metadata={DOC: doc, WIRED: wired})


@dataclasses.dataclass(frozen=True)
class Setting:
    """One setting, as the operators, the group, the form and the docs read it."""

    name: str
    annotation: Any
    default: Any
    doc: str
    wired: bool

    @property
    def renderer(self) -> str | None:
        """How Airflow's UI shows the rendered value (mappings as JSON)."""
        kinds = [typing.get_origin(a) or a for a in (self.annotation, *typing.get_args(self.annotation))]
        return "json" if any(kind in (dict, typing.Mapping) for kind in kinds) else None


@cache
def field_hints(cls: type) -> dict[str, Any]:
    """The resolved annotations of a dataclass's fields (with their ``Annotated`` units)."""
    return typing.get_type_hints(cls, include_extras=True)


@cache
def settings_of(cls: type) -> tuple[Setting, ...]:
    """The fields of ``cls`` declared with :func:`setting`, in declaration order."""
    hints = field_hints(cls)
    return tuple(
        Setting(f.name, hints[f.name],
                f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default,
                f.metadata[DOC], f.metadata[WIRED])
        for f in dataclasses.fields(cls) if DOC in f.metadata
    )


def taking_settings(init: Any, settings: Sequence[Setting], *, own: Any = None) -> Any:
    """``init`` with the signature and annotations of one keyword-only parameter per setting (and
    ``own``'s keyword-only ones), so Airflow's ``default_args``, ``partial`` and the coercion of
    rendered text see each setting with its default and type."""
    own_parameters = [p for p in inspect.signature(own).parameters.values()
                      if p.kind is inspect.Parameter.KEYWORD_ONLY] if own is not None else []
    init.__annotations__ = {**(inspect.get_annotations(own, eval_str=True) if own else {}),
                            **{s.name: s.annotation for s in settings}}
    init.__signature__ = inspect.Signature([
        inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY),
        *own_parameters,
        *(inspect.Parameter(s.name, inspect.Parameter.KEYWORD_ONLY, default=s.default, annotation=s.annotation)
          for s in settings),
        inspect.Parameter("kwargs", inspect.Parameter.VAR_KEYWORD, annotation=Any),
    ])
    return init


def set_settings(obj: Any, settings: Sequence[Setting], given: dict[str, Any]) -> None:
    """Each setting as an attribute of ``obj``: its value popped from ``given``, else its default."""
    for s in settings:
        setattr(obj, s.name, given.pop(s.name) if s.name in given else copy.copy(s.default))


def takes_settings(settings: Sequence[Setting]) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Decorate an operator's own ``__init__`` so it also takes each setting as a keyword-only parameter:
    popped from the keyword arguments before the body runs, set as an attribute after it (its default
    when not given), and in the signature and annotations (:func:`taking_settings`)."""
    def decorate(own: Callable[..., None]) -> Callable[..., None]:
        def __init__(self: Any, **kwargs: Any) -> None:
            given = {s.name: kwargs.pop(s.name) for s in settings if s.name in kwargs}
            own(self, **kwargs)
            set_settings(self, settings, given)

        __init__.__qualname__, __init__.__module__ = own.__qualname__, own.__module__
        return taking_settings(__init__, settings, own=own)
    return decorate


def param_lines(settings: Sequence[Setting]) -> str:
    """One ``:param name: doc`` line per setting, for the docstring of a class that takes them."""
    return "\n".join(f":param {s.name}: {s.doc}" for s in settings)


def with_params(doc: str | None, settings: Sequence[Setting]) -> str:
    """A class's docstring ``doc`` followed by the :func:`param_lines` of ``settings``."""
    return "\n\n".join((inspect.cleandoc(doc or ""), param_lines(settings)))


def read_settings(owner: type[T], source: Any, **given: Any) -> T:
    """An ``owner`` (a dataclass of settings) from ``source``'s attributes named as its settings (an
    operator's parameters), and ``given``."""
    klass: type = owner  # as a plain type: mypy does not see type[T] as Hashable (the cache's key)
    values = {s.name: getattr(source, s.name) for s in settings_of(klass) if hasattr(source, s.name)}
    return owner(**{**values, **given})


def default_of(owner: type, name: str) -> Any:
    """The default of dataclass ``owner``'s field ``name``: for a setting that passes a lower layer's
    field on as it is (a step's setting that is its job's argument), so the default is written once."""
    field = owner.__dataclass_fields__[name]  # type: ignore[attr-defined]
    if field.default is dataclasses.MISSING:
        raise TypeError(f"{owner.__name__}.{name} has no plain default")
    return field.default
