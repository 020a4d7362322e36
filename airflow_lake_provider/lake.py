"""The embedded default lake: what every step uses when no catalog connection is configured.

Layout (documented in docs/embedded-lake.md, so other tools can open the same lake)::

    $LAKE_HOME/               default ~/.lake
        catalog.db            SQLite database of the Iceberg SQL catalog named "lake"
        warehouse/            table data and metadata
"""

from __future__ import annotations

import os
from pathlib import Path

from airflow_lake_provider.catalog_config import CatalogConfig

EMBEDDED_CATALOG_NAME = "lake"


def lake_home() -> Path:
    """``$LAKE_HOME``, or ``~/.lake`` when it is not set; always absolute."""
    return Path(os.environ.get("LAKE_HOME") or Path.home() / ".lake").expanduser().resolve()


def embedded_catalog_config(home: Path | str | None = None) -> CatalogConfig:
    """The catalog of the embedded lake under ``home`` (default: :func:`lake_home`)."""
    root = Path(home).expanduser().resolve() if home else lake_home()
    root.mkdir(parents=True, exist_ok=True)
    (root / "warehouse").mkdir(exist_ok=True)
    return CatalogConfig(
        name=EMBEDDED_CATALOG_NAME,
        kind="sql",
        uri=f"sqlite:///{root / 'catalog.db'}",
        warehouse=f"file://{root / 'warehouse'}",
    )
