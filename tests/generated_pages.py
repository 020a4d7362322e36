"""What the tests observed, kept for the generated docs pages, never written into ``docs/`` by a test.

A test that measures something a page reports (the kill drill, the concurrency matrix, the bad
input catalogue) saves its observations with :func:`save` under ``test-output/generated/``
(untracked). ``make docs`` (``scripts/generate_docs.py``) renders the pages from them, so a plain
``make test`` leaves the checkout clean; the tests still assert the figures they save.
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
RECORDS_DIR = REPO / "test-output" / "generated"


def _commit() -> str:
    try:
        out = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
        return out.stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def save(page: str, observed: Any) -> Path:
    """Keep ``observed`` (JSON-able) as the latest observation for ``docs/<page>.md``."""
    RECORDS_DIR.mkdir(parents=True, exist_ok=True)
    path = RECORDS_DIR / f"{page}.json"
    record = {"page": page, "recorded_at": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
              "commit": _commit(), "observed": observed}
    path.write_text(json.dumps(record, indent=1, default=str))
    return path


def load(page: str) -> dict[str, Any] | None:
    """The latest record for ``page`` (``{recorded_at, commit, observed}``), or ``None``."""
    path = RECORDS_DIR / f"{page}.json"
    return json.loads(path.read_text()) if path.is_file() else None


def load_all(prefix: str) -> list[dict[str, Any]]:
    """Every record whose page name starts with ``prefix``, by name."""
    return [json.loads(path.read_text()) for path in sorted(RECORDS_DIR.glob(f"{prefix}*.json"))]


def save_figure(name: str, figure: str) -> Path:
    """One sentence with a figure for the block of docs/safety.md (``safety-<name>``), e.g. from a
    test that proves a guarantee: what it measured, and the test's name."""
    return save(f"safety-{name}", {"figure": figure})


def provenance(record: dict[str, Any]) -> str:
    """The line every generated page carries: which run its figures come from."""
    return f"Figures from the test run of {record['recorded_at']} on commit `{record['commit']}`."
