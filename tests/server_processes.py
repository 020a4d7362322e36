"""Waiting for a server the tests started, and stopping it: one way for every server module.

Each server runs in its own process group (``start_new_session=True``), so stopping it reaches
whatever it forked too (``weed mini``'s parts, a JVM under a launcher script).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Sequence


def wait_until_serving(ready: Callable[[], bool], *, processes: Sequence[subprocess.Popen], timeout: float,
                       what: str, log: Callable[[], str], stop: Callable[[], None]) -> None:
    """Return once ``ready()`` holds (an ``OSError`` from it counts as not yet). As soon as one of the
    server's ``processes`` exits, or after ``timeout`` seconds, ``stop()`` it and raise with its ``log()``."""
    deadline = time.monotonic() + timeout
    try:
        while True:
            for process in processes:
                if process.poll() is not None:
                    raise RuntimeError(f"{what} exited ({process.returncode}):\n{log()}")
            try:
                if ready():
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what} was not ready within {timeout:.0f} s:\n{log()}")
            time.sleep(0.3)
    except BaseException:
        stop()
        raise


def stop_process_group(process: subprocess.Popen | None, *, grace: float) -> None:
    """SIGTERM the process's group; SIGKILL it if the process has not exited after ``grace`` seconds."""
    if process is None or process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
