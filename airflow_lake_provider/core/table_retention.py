"""The table's own retention settings, read as Iceberg reads them (pure logic, no PyIceberg).

Iceberg's ``RemoveSnapshots`` takes its rules from three table properties (``history.expire.*``),
each overridable per branch or tag, with Iceberg's defaults where none is set. A setting is kept
as a :class:`RetentionRule` (name, value, where it came from) because every decision cites the
rule behind it, and a reader must be able to find that setting. How the rules are applied to a
history is :mod:`airflow_lake_provider.core.retention_decision`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from airflow_lake_provider.core.coercion import HOUR_MS, UNIT_MS
from airflow_lake_provider.exceptions import LakeConfigError

__all__ = [
    "DEFAULT_MAX_SNAPSHOT_AGE_MS",
    "DEFAULT_MIN_SNAPSHOTS_TO_KEEP",
    "MAX_REF_AGE_MS",
    "MAX_SNAPSHOT_AGE_MS",
    "MIN_SNAPSHOTS_TO_KEEP",
    "RetentionRule",
    "TableRetention",
    "human_ms",
]

# Iceberg's TableProperties: the table-wide retention and its defaults (RemoveSnapshots).
MIN_SNAPSHOTS_TO_KEEP = "history.expire.min-snapshots-to-keep"
MAX_SNAPSHOT_AGE_MS = "history.expire.max-snapshot-age-ms"
MAX_REF_AGE_MS = "history.expire.max-ref-age-ms"
DEFAULT_MIN_SNAPSHOTS_TO_KEEP = 1
DEFAULT_MAX_SNAPSHOT_AGE_MS = 5 * 24 * HOUR_MS


@dataclass(frozen=True)
class RetentionRule:
    """One retention setting as it was applied: Iceberg's name, its value, and where it came from.

    ``str()`` is what the log and XCom show, e.g. ``max-snapshot-age-ms=2592000000 (30d, table
    property)``, so a reader can find the setting that decided (``value=None`` means "forever").
    """

    name: str  # min-snapshots-to-keep, max-snapshot-age-ms, max-ref-age-ms
    value: int | None
    source: str  # "table property", "Iceberg default", "branch b's own setting", "override: retain_last"...

    def __str__(self) -> str:
        if self.value is None:
            return f"{self.name}=forever ({self.source})"
        if self.name.endswith("-ms"):
            return f"{self.name}={self.value} ({human_ms(self.value)}, {self.source})"
        return f"{self.name}={self.value} ({self.source})"


def human_ms(ms: int) -> str:
    """A duration as a person reads it at 2 a.m. (30d, 36h, 90m, 12s)."""
    for unit in ("d", "h", "m", "s"):
        if ms >= UNIT_MS[unit]:
            value = ms / UNIT_MS[unit]
            return f"{value:.0f}{unit}" if value == int(value) or value >= 10 else f"{value:.1f}{unit}"
    return f"{ms}ms"


@dataclass(frozen=True)
class TableRetention:
    """The table-wide retention: its ``history.expire.*`` properties, else Iceberg's defaults."""

    min_snapshots_to_keep: RetentionRule = RetentionRule(
        "min-snapshots-to-keep", DEFAULT_MIN_SNAPSHOTS_TO_KEEP, "Iceberg default")
    max_snapshot_age_ms: RetentionRule = RetentionRule(
        "max-snapshot-age-ms", DEFAULT_MAX_SNAPSHOT_AGE_MS, "Iceberg default")
    max_ref_age_ms: RetentionRule = RetentionRule("max-ref-age-ms", None, "Iceberg default")

    @classmethod
    def from_properties(cls, properties: Mapping[str, str]) -> TableRetention:
        """Read the three properties; a value Iceberg could not read either is a LakeConfigError."""
        defaults = cls()

        def rule(prop: str, default: RetentionRule) -> RetentionRule:
            text = properties.get(prop)
            if text is None:
                return default
            try:
                value = int(str(text).strip())
            except ValueError:
                value = -1
            if value < 0:
                raise LakeConfigError(
                    f"Table property {prop}={text!r} is not a whole number >= 0, so the table's retention cannot be "
                    "read (Iceberg's own expiry would fail on it too). Fix it with ALTER TABLE ... SET TBLPROPERTIES."
                )
            return RetentionRule(default.name, value, "table property")

        return cls(
            rule(MIN_SNAPSHOTS_TO_KEEP, defaults.min_snapshots_to_keep),
            rule(MAX_SNAPSHOT_AGE_MS, defaults.max_snapshot_age_ms),
            rule(MAX_REF_AGE_MS, defaults.max_ref_age_ms),
        )
