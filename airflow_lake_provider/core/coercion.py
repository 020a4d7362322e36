"""The one place where rendered values become typed values.

Airflow renders templated fields to text unless the DAG renders native objects, and the params
form, the REST API and ``dag.test()`` each hand over their own spellings: ``"None"`` for a
missing value, ``"False"`` for a switch, ``"['a', 'b']"`` for a list. Every operator coerces its
templated fields here, by the type annotation of its ``__init__`` parameter, before it reads
them (``LakeMaintenanceOperator.coerce_rendered_fields``); nothing else parses rendered text.

The pure decisions read their own arguments through the same functions (:func:`snapshot_ids`,
:func:`positive_int`, :func:`parse_older_than`), so a value handed to them directly is read as
the operator would read it.

Pure: no Airflow, no Spark. Errors are :class:`LakeConfigError` sentences naming the field.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import json
import re
import types
import typing
from collections.abc import Mapping, Sequence
from datetime import date, datetime, timedelta, timezone
from functools import cache
from typing import Annotated, Any, NewType, Union

from airflow_lake_provider.exceptions import LakeConfigError

#: Snapshot IDs handed over by upstream tasks: an ID, a list of IDs, or step results (see :func:`snapshot_ids`).
SnapshotIds = NewType("SnapshotIds", list)

#: Durations, one type in three units: a setting named ``*_seconds``, ``*_hours`` or ``*_days`` takes a
#: number in that unit, a ``timedelta``, or text with its unit (``"90s"``, ``"36h"``, ``"7d"``, ``"PT1H"``),
#: and reads it as a number of its unit (:func:`in_unit`).
@dataclasses.dataclass(frozen=True)
class DurationUnit:
    """The unit a duration setting reads a plain number in."""

    name: str
    seconds: float


@dataclasses.dataclass(frozen=True)
class OneOf:
    """The values a text setting may take (``Annotated[str, OneOf(...)]``): anything else is refused
    wherever the setting is read, a DAG's parse included, naming the values and the closest one.

    ``upper``: the value is read in any case and kept upper case (the clean policies' names).
    """

    values: tuple[str, ...]
    upper: bool = False

    def read(self, value: Any, what: str) -> str:
        text = str(value).strip()
        text = text.upper() if self.upper else text
        if text not in self.values:
            close = difflib.get_close_matches(text, self.values, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise LakeConfigError(f"{what} must be one of {', '.join(self.values)}; got {value!r}{hint}.")
        return text


def one_of(annotation: Any) -> OneOf | None:
    """The allowed values of a text setting's annotation, ``None`` when any text goes."""
    if typing.get_origin(annotation) is Annotated:
        return next((m for m in annotation.__metadata__ if isinstance(m, OneOf)), None)
    return None


Seconds = Annotated[Union[float, timedelta, str], DurationUnit("seconds", 1.0)]  # noqa: UP007 - an alias used at runtime
Hours = Annotated[Union[float, timedelta, str], DurationUnit("hours", 3600.0)]  # noqa: UP007
Days = Annotated[Union[float, timedelta, str], DurationUnit("days", 86400.0)]  # noqa: UP007

#: Texts that mean "no value" for an optional field: what Jinja renders for None, and empty input.
NONE_TEXTS = frozenset({"", "none", "null"})
_TRUE_TEXTS = frozenset({"true", "1", "yes", "on"})
_FALSE_TEXTS = frozenset({"false", "0", "no", "off"})

#: Milliseconds in each unit a duration may be written in (``"2w"``, ``"7d"``, ``"36h"``, ``"90m"``, ``"30s"``).
UNIT_MS = {"w": 7 * 24 * 3_600_000, "d": 24 * 3_600_000, "h": 3_600_000, "m": 60_000, "s": 1000}
HOUR_MS = UNIT_MS["h"]


def is_none(value: Any) -> bool:
    """``None``, or a text that stands for it (``""``, ``"None"``, ``"null"``)."""
    return value is None or (isinstance(value, str) and value.strip().lower() in NONE_TEXTS)


def flag(value: Any, what: str) -> bool:
    """A yes/no switch: a bool, or ``true``/``false``/``1``/``0``/``yes``/``no`` in any case.

    A missing value (``None``, ``""``, ``"None"``) is false: an unset switch is off.
    """
    if isinstance(value, bool):
        return value
    if is_none(value):
        return False
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    text = str(value).strip().lower()
    if text in _TRUE_TEXTS:
        return True
    if text in _FALSE_TEXTS:
        return False
    raise LakeConfigError(f"{what} must be true or false; got {value!r}.")


def whole_number(value: Any, what: str, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """An integer from an int or its text (``"5"``, ``"5.0"``); a bool or a fraction is refused."""
    number = value
    if isinstance(value, str):
        text = value.strip().replace("_", "")
        try:
            number = int(text)
        except ValueError:
            try:
                as_float = float(text)
            except ValueError:
                raise LakeConfigError(f"{what} must be a whole number; got {value!r}.") from None
            number = int(as_float) if as_float.is_integer() else as_float
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    if isinstance(number, bool) or not isinstance(number, int):
        raise LakeConfigError(f"{what} must be a whole number; got {value!r}.")
    if (minimum is not None and number < minimum) or (maximum is not None and number > maximum):
        bounds = (f"from {minimum} to {maximum}" if minimum is not None and maximum is not None
                  else f">= {minimum}" if minimum is not None else f"<= {maximum}")
        raise LakeConfigError(f"{what} must be a whole number {bounds}; got {value!r}.")
    return number


def positive_int(value: Any, what: str) -> int:
    """A count of at least 1 (``retain_last``, ``retained``): an int, or its digits as templated params arrive.

    Stricter than :func:`whole_number`: a bool or a float is refused, not read (``True`` would
    silently mean 1, ``2.0`` is not a count anyone writes).
    """
    exact = (isinstance(value, int) and not isinstance(value, bool)) or (
        isinstance(value, str) and value.strip().isdigit())
    if exact:
        try:
            return whole_number(value, what, minimum=1)
        except LakeConfigError:
            pass
    raise LakeConfigError(f"{what} must be an integer >= 1; got {value!r}.")


def number(value: Any, what: str) -> float:
    """A number (int or float) from a number or its text."""
    if isinstance(value, bool):
        raise LakeConfigError(f"{what} must be a number; got {value!r}.")
    if isinstance(value, (int, float)):
        return value
    try:
        return float(str(value).strip())
    except ValueError:
        raise LakeConfigError(f"{what} must be a number; got {value!r}.") from None


def duration(value: Any, what: str) -> timedelta:
    """A ``timedelta``, or text with its unit (``"90m"``, ``"36h"``, ``"7d"``, ``"2w"``, ISO ``"PT36H"``)."""
    if isinstance(value, timedelta):
        return value
    text = str(value).strip() if isinstance(value, str) else ""
    if match := _DURATION.match(text):
        return timedelta(milliseconds=float(match[1]) * UNIT_MS[match[2].lower()])
    if (match := _ISO_DURATION.match(text)) and text.upper() not in ("P", "PT") and not text.upper().endswith("T"):
        return timedelta(milliseconds=sum(float(v) * UNIT_MS[u] for u, v in match.groupdict().items() if v))
    raise LakeConfigError(f"{what} must be a duration: a timedelta or text with its unit ('90m', '36h', '7d', "
                          f"'PT36H'); got {value!r}.")


def in_unit(value: Any, unit: DurationUnit, what: str) -> float:
    """A duration as a number of ``unit`` (that of :data:`Seconds`, :data:`Hours`, :data:`Days`): a plain
    number is already in it; a ``timedelta`` or text with its own unit is converted."""
    if isinstance(value, timedelta) or (isinstance(value, str) and not _is_number(value)):
        try:
            return duration(value, what).total_seconds() / unit.seconds
        except LakeConfigError:
            raise LakeConfigError(f"{what} must be a number of {unit.name} or a duration (a timedelta, or text with "
                                  f"its unit: '90m', '36h', '7d', 'PT36H'); got {value!r}.") from None
    return number(value, what)


def duration_unit(annotation: Any) -> DurationUnit | None:
    """The unit of a duration annotation (:data:`Seconds`...), ``None`` for any other."""
    if typing.get_origin(annotation) is Annotated:
        return next((m for m in annotation.__metadata__ if isinstance(m, DurationUnit)), None)
    return None


def _is_number(text: str) -> bool:
    try:
        float(text.strip())
    except ValueError:
        return False
    return True



def _literal(text: str) -> Any:
    """A JSON or Python literal (what Jinja renders for a list or dict); the text itself otherwise."""
    for parse in (json.loads, ast.literal_eval):
        try:
            return parse(text)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
    return text


def string_list(value: Any, what: str) -> list[str]:
    """A list of texts from a list, its JSON or Python repr, or ``"a, b"`` typed by hand."""
    if isinstance(value, str):
        text = value.strip()
        parsed = _literal(text) if text.startswith(("[", "(")) else None
        if parsed is None or isinstance(parsed, str):
            return [item.strip().strip("'\"") for item in text.strip("[]()").split(",") if item.strip()]
        value = parsed
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return [str(item) for item in value]
    raise LakeConfigError(f"{what} must be a list of names; got {value!r}.")


def mapping(value: Any, what: str) -> dict[str, Any]:
    """A dict from a mapping or its JSON or Python-literal text."""
    if isinstance(value, str):
        value = _literal(value.strip())
    if isinstance(value, Mapping):
        return dict(value)
    raise LakeConfigError(f"{what} must be a mapping (a dict, or its JSON); got {value!r}.")


def snapshot_ids(value: Any, what: str = "snapshot IDs") -> list[int]:
    """Snapshot IDs from what upstream tasks hand over: ints, texts, lists, JSON, or step results.

    A step result (dict) contributes the snapshots its outcome still needs: the state it acted on
    or left (``snapshot_id``, ``snapshot_id_after``) and its newest own commit (the last of
    ``committed_snapshot_ids``, oldest first), by which a retried task recognises its work.
    Its earlier commits are intermediate states no step reads: the rewrite's data commit, made
    before its position-delete commit, still references every old delete file, and protecting it
    would keep them all on storage until the next run.
    """
    if is_none(value):
        return []
    if isinstance(value, bool):
        raise LakeConfigError(f"{value!r} is not a snapshot ID ({what}).")
    if isinstance(value, int):
        return [value]
    if isinstance(value, str):
        text = value.strip()
        if text.startswith(("[", "{", "(")):
            parsed = _literal(text)
            if isinstance(parsed, str):
                raise LakeConfigError(f"Cannot read snapshot IDs from {value!r} ({what}).")
            return snapshot_ids(parsed, what)
        if text.lstrip("-").isdigit():
            return [int(text)]
        raise LakeConfigError(f"{value!r} is not a snapshot ID (a 64-bit integer) ({what}).")
    if isinstance(value, Mapping):
        ids: list[int] = []
        for key in ("snapshot_id", "snapshot_id_after"):
            ids += snapshot_ids(value.get(key), what)
        return ids + snapshot_ids(value.get("committed_snapshot_ids"), what)[-1:]
    if isinstance(value, Sequence):
        return [sid for item in value for sid in snapshot_ids(item, what)]
    raise LakeConfigError(f"Cannot read snapshot IDs from a {type(value).__name__} ({what}).")


def optional_snapshot_id(value: Any, what: str) -> int | None:
    """One snapshot ID or none (``None``, ``""``, ``"None"``)."""
    ids = snapshot_ids(value, what)
    if len(ids) > 1:
        raise LakeConfigError(f"{what} must be one snapshot ID; got {value!r}.")
    return ids[0] if ids else None


# Below this an integer cannot be epoch milliseconds of any real table (it is 1973-03-03):
# it is epoch seconds or a bare number meant as a duration, both of which would silently expire nothing.
_MIN_EPOCH_MS = 10**11
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(w|d|h|m|s)\s*$", re.IGNORECASE)
_ISO_DURATION = re.compile(
    r"^P(?:(?P<w>\d+(?:\.\d+)?)W)?(?:(?P<d>\d+(?:\.\d+)?)D)?"
    r"(?:T(?:(?P<h>\d+(?:\.\d+)?)H)?(?:(?P<m>\d+(?:\.\d+)?)M)?(?:(?P<s>\d+(?:\.\d+)?)S)?)?$",
    re.IGNORECASE,
)
_ACCEPTED = (
    "a duration ('7d', '36h', '90m', '30s', '2w'), an ISO 8601 duration ('P3D', 'PT36H', 'P1DT12H'), "
    "an ISO timestamp ('2026-01-01T00:00:00+00:00'; naive means UTC), epoch milliseconds (int), "
    "a datetime/date/timedelta, or None/'' for no cutoff"
)


def parse_older_than(value: Any, *, now_ms: int) -> int | None:
    """The cutoff (epoch ms) for ``older_than``, from the forms a DAG author is likely to write.

    Durations count back from ``now_ms``. A cutoff in the future is refused: it would expire
    every snapshot but the retained ones, which is almost always a typo (use '0m' if meant).
    Templates render a missing value as 'None', so 'None'/'null' mean no cutoff, like ``None``/''.
    """
    if value is None:
        return None
    if isinstance(value, timedelta):
        return _cutoff(now_ms - int(value.total_seconds() * 1000), value, now_ms)
    if isinstance(value, datetime):
        return _cutoff(_datetime_ms(value), value, now_ms)
    if isinstance(value, date):
        return _cutoff(_datetime_ms(datetime(value.year, value.month, value.day, tzinfo=timezone.utc)), value, now_ms)
    if isinstance(value, bool):
        raise LakeConfigError(f"older_than={value!r} is not understood; accepted: {_ACCEPTED}.")
    if isinstance(value, (int, float)):
        return _epoch_ms(value, value, now_ms)
    if not isinstance(value, str):
        raise LakeConfigError(f"older_than={value!r} is not understood; accepted: {_ACCEPTED}.")

    if is_none(value):
        return None
    text = value.strip()
    if text.isdigit():
        return _epoch_ms(int(text), value, now_ms)
    if match := _DURATION.match(text):
        return _cutoff(now_ms - int(float(match[1]) * UNIT_MS[match[2].lower()]), value, now_ms)
    if (match := _ISO_DURATION.match(text)) and text.upper() not in ("P", "PT") and not text.upper().endswith("T"):
        parts = match.groupdict()
        millis = sum(float(parts[u]) * UNIT_MS[u] for u in parts if parts[u])
        return _cutoff(now_ms - int(millis), value, now_ms)
    if re.match(r"^P[\d.YMWDTHS]+$", text, re.IGNORECASE):
        raise LakeConfigError(
            f"older_than={value!r}: ISO durations may use weeks, days, hours, minutes and seconds only "
            f"(years and months have no fixed length); accepted: {_ACCEPTED}."
        )
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise LakeConfigError(f"older_than={value!r} is not understood; accepted: {_ACCEPTED}.") from None
    return _cutoff(_datetime_ms(parsed), value, now_ms)


def _datetime_ms(value: datetime) -> int:
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)  # naive means UTC: Iceberg timestamps are UTC
    return int(value.timestamp() * 1000)


def _epoch_ms(millis: float, original: Any, now_ms: int) -> int:
    if millis != millis or millis in (float("inf"), float("-inf")) or millis < _MIN_EPOCH_MS:
        raise LakeConfigError(
            f"older_than={original!r} is not epoch milliseconds (too small: seconds, or a bare number meant as a "
            f"duration?); accepted: {_ACCEPTED}."
        )
    return _cutoff(int(millis), original, now_ms)


def _cutoff(cutoff_ms: int, original: Any, now_ms: int) -> int:
    if cutoff_ms > now_ms:
        raise LakeConfigError(
            f"older_than={original!r} is in the future (cutoff {cutoff_ms} > now {now_ms}): every snapshot but the "
            "retained ones would expire. Use '0m' if that is really meant."
        )
    return cutoff_ms


def _optional(annotation: Any) -> tuple[bool, Any]:
    """``(True, X)`` for ``X | None`` / ``Optional[X]``, else ``(False, annotation)``."""
    if typing.get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) < len(typing.get_args(annotation)):
            # A Union of types known only at runtime has no `X | Y` spelling.
            return True, (args[0] if len(args) == 1 else Union[tuple(args)])  # noqa: UP007
    return False, annotation


def coerce(value: Any, annotation: Any, *, what: str) -> Any:
    """``value`` as the type ``annotation`` names (bool, int, float, str, list[str], dict, SnapshotIds).

    Optional annotations take the texts of :data:`NONE_TEXTS` as ``None``. A type this module does
    not know (``Any``, unions of several types, classes) passes the value through unchanged, for
    the operator's own validation.
    """
    optional, target = _optional(annotation)
    if optional and is_none(value):
        return [] if target is SnapshotIds else None
    if target is SnapshotIds:
        return snapshot_ids(value, what)
    origin = typing.get_origin(target) or target
    if (unit := duration_unit(target)) is not None:
        return in_unit(value, unit, what)
    if (choices := one_of(target)) is not None:
        return choices.read(value, what)
    if target is timedelta:
        return duration(value, what)
    if target is bool:
        return flag(value, what)
    if target is int:
        return whole_number(value, what)
    if target is float:
        return number(value, what)
    if target is str:
        return value if isinstance(value, str) else str(value)
    if origin in (list, Sequence, tuple) and typing.get_args(target)[:1] in ((str,), ()):
        return string_list(value, what)
    if origin in (dict, Mapping):
        return mapping(value, what)
    return value


def coerce_attributes(obj: Any, names: Sequence[str], hints: Mapping[str, Any]) -> None:
    """Coerce each attribute of ``obj`` in ``names`` that has a type hint, in place."""
    for name in names:
        if name in hints and hasattr(obj, name):
            setattr(obj, name, coerce(getattr(obj, name), hints[name], what=name))


@cache
def init_type_hints(cls: type) -> dict[str, Any]:
    """The ``__init__`` parameter annotations of ``cls`` and of its bases in this package, resolved.

    Airflow's own classes are left out: their annotations may name types only imported for type
    checking, and their fields are not ours to coerce.
    """
    hints: dict[str, Any] = {}
    for klass in reversed(cls.__mro__):
        if klass.__module__.startswith("airflow_lake_provider.") and "__init__" in vars(klass):
            hints.update(typing.get_type_hints(vars(klass)["__init__"], include_extras=True))
    hints.pop("return", None)
    return hints


def coerce_rendered_fields(task: Any) -> None:
    """Coerce ``task``'s templated fields (``template_fields``) by its ``__init__`` annotations, in place.

    The first line of every operator's ``execute`` and of every sensor's wait: a templated
    ``"False"`` is False, ``"None"`` is None for an optional field, ``"5"`` is 5.
    """
    task_class: type = type(task)  # as a plain type: mypy does not see type[X] as Hashable (the cache's key)
    coerce_attributes(task, task.template_fields, init_type_hints(task_class))
