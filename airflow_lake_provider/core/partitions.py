"""Partition identity: the one way this provider writes a partition's values and names a partition.

Planning, health, retention, the Spark planning job and the rewrite operator all meet the same
partitions, so they must agree on two things:

* :func:`json_value`: a partition value as JSON. PyIceberg (and the Spark planning job, which
  normalises to the same form) hands out Iceberg's internal values: dates and timestamps, whether
  identity or ``day``/``month``/``hour`` transforms, arrive as ints (days, months, hours or
  microseconds since the epoch) and stay ints, the values Spark's Iceberg filters use too.
* :func:`partition_key` / :func:`partition_id`: a stable text key of a partition's values (by
  field name, so the same across specs), and the identity of a partition within a spec.

Pure Python: no PyIceberg, no Spark, no Airflow (it ships to the Spark driver with the jobs).
"""

from __future__ import annotations

import datetime as _dt
import decimal
import json
import math
import uuid
from collections.abc import Iterable, Mapping
from typing import Any


def json_value(value: Any) -> Any:
    """A partition value as JSON: temporal, decimal, bytes and UUID objects become text.

    None, booleans, ints and strings stay as they are; a float stays unless it is NaN or
    infinite (not JSON), then it is its text. Idempotent: a value already converted stays.
    """
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, (_dt.date, _dt.datetime, _dt.time)):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if isinstance(value, (decimal.Decimal, uuid.UUID)):
        return str(value)
    return str(value)


def partition_values(field_names: Iterable[str], values: Iterable[Any]) -> dict[str, Any]:
    """``{field name: JSON value}`` of one partition, from its spec's field names and its values in order
    (as many values as names: a mismatch raises ``ValueError``)."""
    return {name: json_value(value) for name, value in zip(field_names, values, strict=True)}


def partition_key(partition: Mapping[str, Any]) -> str:
    """A stable text key of a partition's values, by field name: grouping, sorting and de-duplication use it.

    Independent of the spec id: a partition of the same field names and values has the same key
    in every spec (what "a version of a partition" means to retention). ``"{}"`` when unpartitioned.
    """
    return json.dumps({str(name): json_value(value) for name, value in partition.items()}, sort_keys=True, default=str)


def partition_id(spec_id: int, partition: Mapping[str, Any]) -> tuple[int, str]:
    """The identity of a partition within a partition spec: ``(spec id, partition key)``."""
    return int(spec_id), partition_key(partition)



def identity_constants(spec: Mapping[str, Any], partition: list[Any],
                       types: Mapping[int, str]) -> dict[int, Any]:
    """The values a data file's identity partition fields give their source columns, by source field ID.

    A file may leave such a column out (Iceberg allows it; tables migrated from Hive, or built with
    ``add_files``, ``migrate`` or ``snapshot``, have them only in the partition metadata): its rows
    then hold the partition's value, as Iceberg's readers fill it in. ``spec``: the partition spec
    as Iceberg's JSON; ``partition``: the file's partition as Iceberg's content-file JSON writes it
    (one value per spec field); ``types``: the table's column types by field ID (schema JSON).
    """
    constants = {}
    for spec_field, value in zip(spec["fields"], partition, strict=True):
        if spec_field["transform"] == "identity" and spec_field["source-id"] in types:
            constants[spec_field["source-id"]] = single_value(types[spec_field["source-id"]], value)
    return constants


def single_value(type_name: str, value: Any) -> Any:
    """A value of Iceberg's JSON single-value form (``SingleValueParser``) as Python's object of that type."""
    if value is None:
        return None
    if type_name == "date":
        return _dt.date.fromisoformat(value)
    if type_name in ("timestamp", "timestamptz"):
        parsed = _dt.datetime.fromisoformat(value)
        return parsed.astimezone(_dt.timezone.utc) if type_name == "timestamptz" else parsed
    if type_name.startswith("decimal"):
        return decimal.Decimal(value)
    if type_name == "binary" or type_name.startswith("fixed"):
        return bytes.fromhex(value)
    if type_name in ("float", "double") and isinstance(value, str):
        return float(value)  # NaN and the infinities are JSON text
    return value


__all__ = ["identity_constants", "json_value", "partition_id", "partition_key", "partition_values", "single_value"]
