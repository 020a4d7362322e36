"""The browser tests' shared parts: Debian's chromium, headless and quiet, and logging in to the ``airflow`` stack.

The ``page`` and ``output_dir`` fixtures (conftest.py) use them.
"""

from __future__ import annotations

import re
from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")
# Headless, and nothing that phones home: these machines have no network beyond the registries.
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
]


def log_in(page, airflow) -> None:
    """Sign in to the stack's UI as its admin user."""
    page.goto(f"{airflow.base_url}/")
    page.locator("input[name=username]").fill(airflow.USER)
    page.locator("input[name=password]").fill(airflow.password)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(re.compile(r"^(?!.*/auth/login).*$"))
