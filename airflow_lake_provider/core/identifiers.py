"""Table identifiers: parsed strictly so a name can never smuggle SQL into a Spark statement."""

from __future__ import annotations

import re
from dataclasses import dataclass

from airflow_lake_provider.exceptions import LakeConfigError

# Letters, digits and underscores, not starting with a digit: what every catalog kind accepts
# and what needs no quoting anywhere. Anything else (quotes, semicolons, spaces) is refused.
_PART = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")


def namespace_name(value: object, what: str, way_out: str = "") -> str:
    """A namespace (``db``, ``governed.leases``) whose every level follows the rule tables do;
    ``what`` names the setting in the refusal, ``way_out`` ends it."""
    parts = value.strip().split(".") if isinstance(value, str) else []
    if not parts or not all(_PART.match(part) for part in parts):
        raise LakeConfigError(f"{what} {value!r} is not a namespace name (each level letters, digits or '_', not "
                              f"starting with a digit, levels joined by '.').{way_out}")
    return ".".join(parts)


@dataclass(frozen=True)
class TableIdentifier:
    """``namespace.table`` (the namespace may itself have several levels)."""

    namespace: tuple[str, ...]
    name: str

    @classmethod
    def parse(cls, value: object) -> TableIdentifier:
        if not isinstance(value, str) or not value.strip():
            raise LakeConfigError(f"A table must be given as 'namespace.table', got {value!r}.")
        parts = value.strip().split(".")
        if len(parts) < 2:
            raise LakeConfigError(
                f"Table {value!r} has no namespace: write it as 'namespace.table' (for example 'db.events')."
            )
        for part in parts:
            if not _PART.match(part):
                raise LakeConfigError(
                    f"Table {value!r} is not a valid identifier: each part must be letters, digits "
                    f"or '_' and not start with a digit (offending part: {part!r})."
                )
        return cls(tuple(parts[:-1]), parts[-1])

    @property
    def dotted(self) -> str:
        """The name as PyIceberg takes it: ``db.events``."""
        return ".".join((*self.namespace, self.name))

    def spark_name(self, catalog: str) -> str:
        """The fully qualified, backtick-quoted name for Spark SQL: ```lake`.`db`.`events```."""
        return ".".join(f"`{part}`" for part in (catalog, *self.namespace, self.name))

    def spark_plain_name(self, catalog: str) -> str:
        """The unquoted multipart name Iceberg's Java API (``Spark3Util.loadIcebergTable``) takes."""
        return ".".join((catalog, *self.namespace, self.name))

    def __str__(self) -> str:
        return self.dotted
