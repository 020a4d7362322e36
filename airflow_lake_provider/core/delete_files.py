"""When Iceberg's position-delete rewrite cannot run on a table, decided from facts alone.

Pure: no Spark. The rewrite job (``jobs/rewrite.py``) asks :func:`position_delete_rewrite_blocked`
before it calls ``rewritePositionDeletes``, :func:`position_delete_rewrite_bug` when that call
failed, and :func:`dangling_delete_removal_unsafe` before it lets Iceberg's ``remove-dangling-deletes``
run on a table with equality deletes. What it does instead (drop the delete files no live data
file needs, from metadata) is ``jobs/dangling_deletes.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: Iceberg releases whose ``rewrite_position_delete_files`` fails on every table with a list or map
#: column anywhere in its schema, whatever its partitioning: reading the position deletes builds an
#: identity spec over every primitive column, and 1.10.0 began refusing partition sources nested
#: in a list or map (``ValidationException: Invalid partition field parent: map<string, int>``;
#: apache/iceberg#14619 and #15080, fixed upstream after 1.10.2). Any other release is tried, and
#: the same error is still recognised (:func:`position_delete_rewrite_bug`).
POSITION_DELETE_REWRITE_BROKEN = frozenset({"1.10.0", "1.10.1", "1.10.2"})
INVALID_PARTITION_PARENT = "Invalid partition field parent"


#: The first release whose ``remove-dangling-deletes`` keeps a global equality delete that still applies.
#: Before it (reproduced on 1.10.2) the option dropped a global equality delete (written under an
#: unpartitioned spec) once no data file was left under that spec, although it still deleted rows of
#: files under the partitioned spec: those rows came back. 1.12 decides from a scan instead
#: (apache/iceberg#15727); the same reproduction keeps every row on 1.12.0 (docs/safety.md).
DANGLING_DELETE_REMOVAL_SAFE_FROM = (1, 12)


def dangling_delete_removal_unsafe(iceberg_version: str) -> bool:
    """Whether Iceberg ``iceberg_version``'s ``remove-dangling-deletes`` may bring back rows of equality deletes."""
    parts = []
    for part in iceberg_version.split(".")[:2]:
        digits = "".join(ch for ch in part if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts) < DANGLING_DELETE_REMOVAL_SAFE_FROM


def dangling_delete_removal_refused(iceberg_version: str) -> str:
    """The refusal of ``remove-dangling-deletes`` on a table with equality deletes under an unsafe release."""
    return (f"remove-dangling-deletes=true on a table with equality delete files would bring deleted rows back with "
            f"Iceberg {iceberg_version}: its dangling-delete check drops a global equality delete (one written under "
            "an unpartitioned spec) once no data file is left under that spec, although it still deletes rows of "
            "files under the partitioned spec. Run Iceberg 1.12 or later (its check is scan-based), or leave the "
            "option off: the rewrite's own commit already drops delete files older than every live data file.")


def has_list_or_map(schema: Mapping[str, Any]) -> bool:
    """Whether an Iceberg schema, as its JSON (``SchemaParser.toJson``), holds a list or a map anywhere."""
    def walk(kind: Any) -> bool:
        if not isinstance(kind, Mapping):
            return False  # a primitive: "long", "string", "decimal(9, 2)" ...
        if kind.get("type") in ("list", "map"):
            return True
        return any(walk(field.get("type")) for field in kind.get("fields", ()))

    return walk(schema)


def _skipped(iceberg_version: str, error: str) -> str:
    return (
        f"not run: Iceberg {iceberg_version}'s rewrite_position_delete_files fails on tables with a list or map "
        f"column ({error}; apache/iceberg#14619, #15080). The position delete files still in use stay as they are "
        "and reads keep applying them; those no live data file needs are dropped from metadata instead "
        "(drop_dangling_deletes, reported under dangling_deletes). They are merged again once the Iceberg runtime "
        "carries the fix."
    )


def position_delete_rewrite_blocked(iceberg_version: str, schema: Mapping[str, Any]) -> str | None:
    """Why the position-delete rewrite must not run on this table with this Iceberg, or ``None``."""
    if iceberg_version in POSITION_DELETE_REWRITE_BROKEN and has_list_or_map(schema):
        return _skipped(iceberg_version, f"ValidationException: {INVALID_PARTITION_PARENT}")
    return None


def position_delete_rewrite_bug(iceberg_version: str, error: str | None) -> str | None:
    """The skip reason when the position-delete rewrite failed with Iceberg's list/map bug, else ``None``.

    ``error`` is Iceberg's own message (``ValidationException: ...``): only that bug is excused,
    every other failure stays a failure.
    """
    if error and INVALID_PARTITION_PARENT in error:
        return _skipped(iceberg_version, error)
    return None
