"""Iceberg's per-column metrics built from the values written (``core/file_metrics.py``): pure logic.

The serialized bounds are checked against the bytes Iceberg 1.12's own writer recorded for the same
values (its content-file JSON, read from a Spark-written file), the truncation against Iceberg's
``UnicodeUtil``/``BinaryUtil`` cases.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from airflow_lake_provider.core.file_metrics import (
    ColumnStats,
    MetricsMode,
    file_metrics,
    serialize,
    truncate_binary_max,
    truncate_string_max,
    unscaled,
    unscaled_bytes,
)

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


@pytest.mark.parametrize(("text", "mode"), [
    ("none", MetricsMode("none")), ("Counts", MetricsMode("counts")), ("full", MetricsMode("full")),
    ("truncate(16)", MetricsMode("truncate", 16)), (" TRUNCATE(1) ", MetricsMode("truncate", 1)),
])
def test_metrics_modes_are_read_as_iceberg_reads_them(text, mode):
    assert MetricsMode.parse(text) == mode


@pytest.mark.parametrize("text", ["truncate(0)", "truncate", "all", ""])
def test_a_mode_iceberg_refuses_is_refused(text):
    with pytest.raises(ValueError, match="is not a metrics mode"):
        MetricsMode.parse(text)


@pytest.mark.parametrize(("type_name", "value", "iceberg_hex"), [
    ("int", 1, "01000000"),
    ("string", "x", "78"),
    ("binary", b"\x00\xff", "00FF"),
    ("decimal(38, 2)", unscaled(Decimal("-12.50"), 2), "FB1E"),
    ("date", (dt.date(1960, 1, 2) - EPOCH.date()).days, "BCF1FFFF"),
    ("timestamp", (dt.datetime(1960, 1, 1, 0, 0, 0, 1, tzinfo=dt.timezone.utc) - EPOCH) // dt.timedelta(microseconds=1),
     "0120B32DF2E0FEFF"),
])
def test_bounds_serialize_to_the_bytes_icebergs_writer_records(type_name, value, iceberg_hex):
    assert serialize(type_name, value).hex().upper() == iceberg_hex


def test_decimals_keep_every_digit_and_the_fewest_bytes():
    assert unscaled(Decimal("9" * 28 + "." + "9" * 10), 10) == int("9" * 38)  # past the default context's 28 digits
    assert unscaled_bytes(-128) == b"\x80" and unscaled_bytes(127) == b"\x7f" and unscaled_bytes(128) == b"\x00\x80"
    assert unscaled_bytes(0) == b"\x00" and unscaled_bytes(-1) == b"\xff"


@pytest.mark.parametrize(("value", "length", "upper"), [
    ("abc", 2, "ac"), ("abc", 3, "abc"), ("ab", 16, "ab"),
    ("a\U0010ffff\U0010ffff", 2, "b"),  # the last code point overflows: the one before it goes up
    ("\U0010ffff\U0010ffff", 1, None),  # nothing to go up: no upper bound
    ("a\ud7ffz", 2, "a\ue000"),  # the surrogates are skipped
    ("~" * 20, 16, "~" * 15 + "\x7f"),  # what Iceberg's writer recorded for a long '~~~~' value
])
def test_string_upper_bounds_round_up_as_icebergs(value, length, upper):
    assert truncate_string_max(value, length) == upper


@pytest.mark.parametrize(("value", "length", "upper"), [
    (b"\x01\x02\x03", 2, b"\x01\x03"), (b"\x01\xff\xff", 2, b"\x02"), (b"\xff" * 5000, 16, None), (b"\x01", 4, b"\x01"),
])
def test_binary_upper_bounds_round_up_as_icebergs(value, length, upper):
    assert truncate_binary_max(value, length) == upper


def _stats(**chunks) -> ColumnStats:
    stats = ColumnStats()
    for chunk in chunks.values():
        stats.add(**chunk)
    return stats


def test_each_mode_records_what_icebergs_writer_records():
    stats = {
        1: _stats(a={"values": 3, "nulls": 1, "nans": 1, "lower": 2.5, "upper": 7.0}),
        2: _stats(a={"values": 3, "nulls": 0, "lower": "!" + "a" * 50, "upper": "~" * 50},
                  b={"values": 2, "nulls": 2}),
        3: _stats(a={"values": 3, "nulls": 0, "lower": 5, "upper": 9}),
        4: _stats(a={"values": 3, "nulls": 3}),
    }
    columns = [(1, "double", MetricsMode("counts")), (2, "string", MetricsMode("truncate", 4)),
               (3, "long", MetricsMode("none")), (4, "string", MetricsMode("full"))]
    metrics = file_metrics(5, columns, stats, {1: 10, 2: 20, 3: 30, 4: 40})
    assert metrics.column_sizes == {1: 10, 2: 20, 4: 40}  # none: nothing at all
    assert metrics.value_counts == {1: 3, 2: 5, 4: 3} and metrics.null_value_counts == {1: 1, 2: 2, 4: 3}
    assert metrics.nan_value_counts == {1: 1}  # floats and doubles only
    assert metrics.lower_bounds == {2: b"!aaa"} and metrics.upper_bounds == {2: b"~~~\x7f"}  # counts: no bounds


def test_a_zero_is_bounded_for_both_signs():
    """Iceberg orders -0.0 below 0.0 where SQL holds them equal: a zero bound covers both signs."""
    columns = [(1, "double", MetricsMode("full")), (2, "float", MetricsMode("full")),
               (3, "double", MetricsMode("full"))]
    stats = {1: _stats(a={"values": 2, "nulls": 0, "lower": 0.0, "upper": 0.0}),
             2: _stats(a={"values": 2, "nulls": 0, "lower": -3.0, "upper": -0.0}),
             3: _stats(a={"values": 2, "nulls": 0, "lower": 1.0, "upper": 2.0})}
    metrics = file_metrics(2, columns, stats, {})
    assert metrics.lower_bounds[1] == serialize("double", -0.0) and metrics.upper_bounds[1] == serialize("double", 0.0)
    assert metrics.lower_bounds[2] == serialize("float", -3.0) and metrics.upper_bounds[2] == serialize("float", 0.0)
    assert metrics.lower_bounds[3] == serialize("double", 1.0)
