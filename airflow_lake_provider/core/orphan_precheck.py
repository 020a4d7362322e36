"""Whether the clean step needs Iceberg's orphan listing at all, decided in the worker (no JVM).

Iceberg's ``DeleteOrphanFiles`` takes only files under the table location last modified before
the orphan floor. When no file there is that old (a table younger than the floor: every new
table, the demo's, one rebuilt at a new location) the listing is empty whatever the metadata
says, so a Spark application started only to learn that is a wasted 10-30 s. The worker lists
the location through the table's own FileIO (its credentials, its endpoint) and stops at the
first file older than the floor: on a table that old, that is one or two listings, after which
the job runs as before and Iceberg's listing decides what is taken.

The same holds for the quarantine's purge, which the job runs at its start: a run whose key is
younger than ``quarantine_days`` is not due (the key is written with the time the files moved).

Anything the worker cannot decide (a FileIO other than PyArrow's, a listing refused or failing,
a file with no modification time, more directories than :data:`MAX_DIRECTORIES`) means "needed":
the shortcut may only ever skip a job whose answer is known to be empty.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from typing import TYPE_CHECKING

from airflow_lake_provider.core.quarantine import access_denied, is_run_key, runs_to_purge

if TYPE_CHECKING:
    from pyiceberg.io import FileIO

#: Directories listed before the worker gives up and leaves the question to the job.
MAX_DIRECTORIES = 2_000


@dataclasses.dataclass(frozen=True)
class Listing:
    """What the worker saw under one location: ``decided`` False means it could not tell."""

    decided: bool
    #: What makes the job needed: a file modified before the floor, or a quarantine run past its days.
    found: str | None = None
    #: Entries looked at: files (the table location) or quarantine runs.
    seen: int = 0
    why_undecided: str | None = None

    @property
    def nothing_old(self) -> bool:
        return self.decided and self.found is None


def _undecided(why: str | BaseException, seen: int = 0) -> Listing:
    if isinstance(why, BaseException):
        why = f"{type(why).__name__}: {why}"[:300]
    return Listing(False, seen=seen, why_undecided=why)


def _filesystem(io: FileIO, location: str):
    """PyArrow's file system for ``location`` and the path in it, or ``None`` for another FileIO."""
    from pyiceberg.io.pyarrow import PyArrowFileIO

    if not isinstance(io, PyArrowFileIO):
        return None
    scheme, netloc, path = PyArrowFileIO.parse_location(location, io.properties)
    return io.fs_by_scheme(scheme, netloc), path.rstrip("/")


def find_file_older_than(io: FileIO, location: str, cutoff_ms: int) -> Listing:
    """List ``location`` breadth first, ``metadata/`` before the rest, until a file older than
    ``cutoff_ms`` (epoch ms, strictly before, as Iceberg compares) turns up or nothing is left."""
    from pyarrow import fs as pafs

    try:
        found = _filesystem(io, location)
        if found is None:
            return _undecided(f"{type(io).__name__} cannot list")
        filesystem, root = found
        pending, directories, files = deque([root]), 0, 0
        while pending:
            directories += 1
            if directories > MAX_DIRECTORIES:
                return _undecided(f"more than {MAX_DIRECTORIES} directories", files)
            entries = filesystem.get_file_info(pafs.FileSelector(pending.popleft(), allow_not_found=True))
            for entry in sorted(entries, key=lambda e: (e.base_name != "metadata", e.path)):
                if entry.type == pafs.FileType.Directory:
                    pending.append(entry.path)
                elif entry.type == pafs.FileType.File:
                    files += 1
                    mtime = entry.mtime_ns
                    if mtime is None or mtime // 1_000_000 < cutoff_ms:
                        return Listing(True, found=entry.path, seen=files)
        return Listing(True, seen=files)
    except (OSError, ValueError, ImportError) as error:  # a refusal (403 on a table bucket), the network: the job
        return _undecided(error)


def quarantine_purge_due(io: FileIO, root: str, quarantine_days: float, now_ms: int, *,
                         default_root: bool) -> Listing:
    """Whether a quarantine run under ``root`` may be past ``quarantine_days`` (``found``: its key).

    ``default_root``: the root beside the table, which a table bucket or credentials vended for the
    table may refuse to list; as the job's purge does, a refusal there means nothing is quarantined."""
    from pyarrow import fs as pafs

    try:
        found = _filesystem(io, root)
        if found is None:
            return _undecided(f"{type(io).__name__} cannot list")
        filesystem, path = found
        keys = [entry.base_name for entry in filesystem.get_file_info(pafs.FileSelector(path, allow_not_found=True))
                if entry.type == pafs.FileType.Directory and is_run_key(entry.base_name)]
    except (OSError, ValueError, ImportError) as error:
        if default_root and access_denied(error):
            return Listing(True)
        return _undecided(error)
    due = runs_to_purge(dict.fromkeys(keys), quarantine_days, now_ms)
    return Listing(True, found=due[0] if due else None, seen=len(keys))
