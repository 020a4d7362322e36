"""What a run's ``conf`` may hold: the DAG's params, nothing else.

Airflow validates the params a trigger gives, but keeps a key no param has and lets the run go
on, so a stale or misspelt key (``expire_older_than_hours``, the name before ``older_than``) is
ignored and the run does something else than asked. The shipped DAGs' first task refuses it. Pure.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import Any


def unknown_conf_keys(conf: Mapping[str, Any] | None, known: Iterable[str], *, dag_id: str) -> str | None:
    """Why a run whose ``conf`` holds keys that are no param of the DAG is refused; ``None`` when all are known."""
    params = sorted(known)
    unknown = sorted(set(conf or {}) - set(params))
    if not unknown:
        return None
    hints = [f"{key!r} (did you mean {close[0]!r}?)" if (close := difflib.get_close_matches(key, params, n=1))
             else repr(key) for key in unknown]
    return (f"The run's conf has {', '.join(hints)}, which {dag_id} does not know, so nothing was done (a key "
            f"it does not know would be ignored). Its keys are the params: {', '.join(params)}. Trigger it "
            "again without the unknown keys.")
