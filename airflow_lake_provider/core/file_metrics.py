"""Iceberg's per-column metrics of a data file, computed from the values written: pure logic.

Why: readers prune files by the bounds and counts in the manifests (Spark, Trino, PyIceberg and
DuckDB skip a file whose bounds exclude the filter's value). A bound that misses one value the
file holds loses that row for every reader. The Arrow rewriter therefore does not read its
metrics back from Parquet's footer statistics, which Arrow's writer leaves out for values over
its size limit and orders differently for signed zeros; it builds them from the values it
writes, as Iceberg's own writer does (``FieldMetrics`` per column), under the table's metrics
modes:

* ``none``: nothing for the column.
* ``counts``: the column's compressed size, value, null and (float, double) NaN counts.
* ``truncate(n)``: counts and bounds, strings and binaries cut to ``n`` code points or bytes; the
  upper bound rounded up (Iceberg's ``UnicodeUtil.truncateStringMax`` and
  ``BinaryUtil.truncateBinaryMax``) or left out when it cannot be.
* ``full``: counts and bounds, untruncated.

Bounds leave out NULL and NaN (NaN has its own count), and go beyond Iceberg's writer for signed
zeros: SQL holds ``-0.0 = 0.0``, while Iceberg orders ``-0.0 < 0.0`` when it evaluates a filter
against the bounds, so a file holding only ``0.0`` whose bounds are ``[0.0, 0.0]`` is skipped by
``WHERE d = -0.0`` (and a file of ``-0.0`` by ``WHERE d = 0.0``). Whenever a zero is a bound,
the lower bound is ``-0.0`` and the upper ``+0.0``, so a query for either sign finds it
(``docs/safety.md``, "Signed zeros").

Bounds are serialized as Iceberg's single-value binary form (``Conversions.toByteBuffer``).
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Context, Decimal
from typing import Any

_TRUNCATE = re.compile(r"^truncate\((\d+)\)$")

#: Iceberg's floating-point types: NaN counted apart from the bounds, zeros bounded for both signs.
FLOATING_TYPES = frozenset({"float", "double"})


@dataclass(frozen=True)
class MetricsMode:
    """A column's metrics mode (Iceberg's ``MetricsModes``): ``kind`` is none, counts, truncate or full."""

    kind: str
    length: int | None = None

    @classmethod
    def parse(cls, text: str) -> MetricsMode:
        """Iceberg's ``write.metadata.metrics.*`` value, as ``MetricsModes.fromString`` reads it."""
        value = text.strip().lower()
        if value in ("none", "counts", "full"):
            return cls(value)
        match = _TRUNCATE.match(value)
        if match and int(match.group(1)) > 0:
            return cls("truncate", int(match.group(1)))
        raise ValueError(f"{text!r} is not a metrics mode (none, counts, truncate(n) with n > 0, full)")

    @property
    def counts(self) -> bool:
        return self.kind != "none"

    @property
    def bounds(self) -> bool:
        return self.kind in ("truncate", "full")


@dataclass
class ColumnStats:
    """What one column's values add up to over the chunks written, before any mode applies.

    ``lower``/``upper`` are in the column's order domain: ints for int, long, date and the
    timestamps (days and microseconds), the unscaled integer for decimals, ``str`` (code-point
    order, which is UTF-8 byte order), ``bytes`` (unsigned), ``bool`` and ``float``.
    """

    values: int = 0
    nulls: int = 0
    nans: int = 0
    lower: Any = None
    upper: Any = None

    def add(self, *, values: int, nulls: int, nans: int = 0, lower: Any = None, upper: Any = None) -> None:
        """Fold in one chunk: its counts, and its least and greatest non-null, non-NaN values."""
        self.values += values
        self.nulls += nulls
        self.nans += nans
        if lower is not None and (self.lower is None or lower < self.lower):
            self.lower = lower
        if upper is not None and (self.upper is None or upper > self.upper):
            self.upper = upper


@dataclass
class FileMetrics:
    """A data file's metrics by Iceberg field ID, bounds already serialized."""

    record_count: int
    column_sizes: dict[int, int] = field(default_factory=dict)
    value_counts: dict[int, int] = field(default_factory=dict)
    null_value_counts: dict[int, int] = field(default_factory=dict)
    nan_value_counts: dict[int, int] = field(default_factory=dict)
    lower_bounds: dict[int, bytes] = field(default_factory=dict)
    upper_bounds: dict[int, bytes] = field(default_factory=dict)


def file_metrics(record_count: int, columns: Iterable[tuple[int, str, MetricsMode]],
                 stats: Mapping[int, ColumnStats], column_sizes: Mapping[int, int]) -> FileMetrics:
    """The metrics Iceberg records for a file of ``record_count`` rows.

    ``columns``: each column's field ID, Iceberg type (schema JSON) and mode; ``stats`` and
    ``column_sizes`` by field ID.
    """
    metrics = FileMetrics(record_count)
    for field_id, type_name, mode in columns:
        if not mode.counts:
            continue
        found = stats[field_id]
        metrics.column_sizes[field_id] = int(column_sizes.get(field_id, 0))
        metrics.value_counts[field_id] = found.values
        metrics.null_value_counts[field_id] = found.nulls
        if type_name in FLOATING_TYPES:
            metrics.nan_value_counts[field_id] = found.nans
        if not mode.bounds or found.lower is None:
            continue
        lower, upper = widened_zeros(type_name, found.lower, found.upper)
        lower, upper = truncated(type_name, mode, lower, upper)
        if lower is not None:
            metrics.lower_bounds[field_id] = serialize(type_name, lower)
        if upper is not None:
            metrics.upper_bounds[field_id] = serialize(type_name, upper)
    return metrics


def widened_zeros(type_name: str, lower: Any, upper: Any) -> tuple[Any, Any]:
    """A zero bound of a float column widened to both signs: ``-0.0`` below, ``+0.0`` above."""
    if type_name not in FLOATING_TYPES:
        return lower, upper
    return (-0.0 if lower == 0 else lower), (0.0 if upper == 0 else upper)


def truncated(type_name: str, mode: MetricsMode, lower: Any, upper: Any) -> tuple[Any, Any]:
    """The bounds as ``truncate(n)`` keeps them: strings and binaries cut, the upper rounded up
    (``None`` where no shorter value is above it); every other type whole."""
    if mode.kind != "truncate" or type_name not in ("string", "binary"):
        return lower, upper
    assert mode.length is not None
    if type_name == "string":
        return lower[:mode.length], truncate_string_max(upper, mode.length)
    return lower[:mode.length], truncate_binary_max(upper, mode.length)


def truncate_string_max(value: str, length: int) -> str | None:
    """Iceberg's ``UnicodeUtil.truncateStringMax``: the first ``length`` code points, the last one that
    can be incremented incremented (skipping the surrogate range), or ``None``."""
    if len(value) <= length:
        return value
    kept = value[:length]
    for index in range(length - 1, -1, -1):
        code = ord(kept[index])
        if code == 0x10FFFF:
            continue
        following = 0xE000 if code == 0xD7FF else code + 1
        return kept[:index] + chr(following)
    return None


def truncate_binary_max(value: bytes, length: int) -> bytes | None:
    """Iceberg's ``BinaryUtil.truncateBinaryMax``: the first ``length`` bytes, the last one below 0xFF
    incremented and the rest cut, or ``None``."""
    if len(value) <= length:
        return value
    kept = value[:length]
    for index in range(length - 1, -1, -1):
        if kept[index] != 0xFF:
            return kept[:index] + bytes([kept[index] + 1])
    return None


def serialize(type_name: str, value: Any) -> bytes:
    """Iceberg's single-value binary serialization of a bound (``Conversions.toByteBuffer``)."""
    if type_name == "boolean":
        return b"\x01" if value else b"\x00"
    if type_name in ("int", "date"):
        return struct.pack("<i", value)
    if type_name in ("long", "time", "timestamp", "timestamptz"):
        return struct.pack("<q", value)
    if type_name == "float":
        return struct.pack("<f", value)
    if type_name == "double":
        return struct.pack("<d", value)
    if type_name == "string":
        return value.encode("utf-8")
    if type_name == "binary" or type_name.startswith("fixed"):
        return bytes(value)
    if type_name.startswith("decimal"):
        return unscaled_bytes(value)
    raise ValueError(f"no bound serialization for Iceberg type {type_name}")


def unscaled_bytes(unscaled: int) -> bytes:
    """``BigInteger.toByteArray()``: the fewest big-endian two's-complement bytes holding ``unscaled``."""
    bits = (~unscaled if unscaled < 0 else unscaled).bit_length()
    return unscaled.to_bytes(bits // 8 + 1, "big", signed=True)


def unscaled(value: Decimal, scale: int) -> int:
    """A decimal's unscaled integer at ``scale``, exactly (38 digits are past the default context's 28)."""
    return int(value.scaleb(scale, context=Context(prec=100)))
