"""Render the generated docs pages from what the last test run observed (``make docs``).

The tests save their observations under ``test-output/generated/`` (see
``tests/generated_pages.py``); this writes ``docs/kills.md``, ``docs/concurrency.md`` and
``docs/bad-inputs.md`` from them. A page whose tests did not run keeps its current text.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "tests"), str(REPO / "scripts"), str(REPO)]

import generated_pages  # noqa: E402


def _kills(observed: dict) -> str:
    from test_kills import report
    task_process = generated_pages.load("kills-task-process")
    return report(**observed, task_process=task_process["observed"]["hits"] if task_process else None)


def _concurrency(observed: dict) -> str:
    from test_concurrency_matrix import doc
    return doc(observed["cells"], {tuple(k.split("|")): v for k, v in observed["persistent"].items()})


def _bad_inputs(observed: list[dict]) -> str:
    from bad_input_catalogue import catalogue
    return catalogue(observed)


PAGES = {"kills": _kills, "concurrency": _concurrency, "bad-inputs": _bad_inputs}


def main() -> int:
    for page, render in PAGES.items():
        record = generated_pages.load(page)
        target = REPO / "docs" / f"{page}.md"
        if record is None:
            print(f"{target.relative_to(REPO)}: unchanged (no observations; run the tests that record them first)")
            continue
        text = render(record["observed"])
        text = text.replace("-->\n", f"-->\n\n{generated_pages.provenance(record)}\n", 1)
        target.write_text(text)
        print(f"{target.relative_to(REPO)}: written ({generated_pages.provenance(record)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
