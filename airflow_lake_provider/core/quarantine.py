"""Quarantine instead of delete: where the clean step parks orphan files, and when they go for good.

An orphan scan can be wrong: a writer's in-flight file older than the floor looks exactly like
a dead writer's leftover. So the clean step moves orphans to a quarantine instead of deleting
them, keeps them ``quarantine_days`` (default 7), and a restore moves a run's files back to
their exact original paths. This module holds every decision of that, pure (no Spark, no
Airflow): the locations, the run key, the manifest, the purge decision, and the checks of the
two settings, so a bad value is refused before any JVM starts.

Layout of a table's quarantine (its *root*)::

    <root>/<run key>/manifest.json        what this run moved (written before any file moves)
    <root>/<run key>/files/<path relative to the table location>

The default root is ``<parent of the table location>/.lake-quarantine/<table directory name>``:
outside the table location, so Iceberg's orphan scan (which lists the table location only, and
skips names starting with ``.`` or ``_`` anyway) and every reader (which read only what metadata
names) never see it; and its name does not start with the table directory's name, so a prefix
listing of ``.../events`` cannot catch it as it would ``.../events_old``. A configured
``quarantine_location`` is a root shared by many tables: each table's runs sit under
``<quarantine_location>/<namespace>/<table>``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import re
import uuid
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import ClassVar
from urllib.parse import urlsplit

from airflow_lake_provider.core.airflow_run import AirflowRun
from airflow_lake_provider.core.contract_base import Contract
from airflow_lake_provider.exceptions import LakeConfigError

__all__ = ["DEFAULT_QUARANTINE_DAYS", "QuarantineManifest", "QuarantinedFile", "quarantine_root", "run_key",
           "run_reference", "runs_to_purge"]

#: How long the clean step keeps orphans in quarantine before a later clean purges them.
DEFAULT_QUARANTINE_DAYS = 7
#: The hidden directory beside the table location that holds the default quarantine roots.
QUARANTINE_DIR_NAME = ".lake-quarantine"
MANIFEST_NAME = "manifest.json"
FILES_DIR_NAME = "files"
DAY_MS = 24 * 3600 * 1000

# 20261123T211530123Z-<label>: sortable as text, by time first.
_RUN_KEY = re.compile(r"^(\d{8}T\d{9})Z-[A-Za-z0-9_.-]{1,120}$")
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
# Schemes that name the same object store (Hadoop's S3A also serves s3:// in this provider's setup).
_SAME_STORE = {"s3a": "s3", "s3n": "s3", "": "file"}


# -------------------------------------------------------------------------------------- settings


def checked_quarantine_days(value: object) -> float:
    """``quarantine_days`` as a number >= 0 (0: delete at once, no quarantine)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise LakeConfigError(f"quarantine_days must be a number of days >= 0 (0 deletes orphans at once, with no "
                              f"quarantine); got {value!r}.")
    return value


def _parts(uri: str) -> tuple[str, str, str]:
    """``(store scheme, authority, path without trailing /)``: the same store spelled two ways compares equal."""
    split = urlsplit(uri)
    scheme = split.scheme.lower()
    return _SAME_STORE.get(scheme, scheme), split.netloc, split.path.rstrip("/")


def _within(inner: str, outer: str) -> bool:
    """Whether ``inner`` is ``outer``, lies inside it, or begins with its name (a prefix listing
    of ``.../events`` also lists ``.../events_q``)."""
    (si, ni, pi), (so, no, po) = _parts(inner), _parts(outer)
    return (si, ni) == (so, no) and pi.startswith(po)


def _overlap(a: str, b: str) -> bool:
    return _within(a, b) or _within(b, a)


def quarantine_root(table_location: str, table: str, quarantine_location: str | None = None) -> str:
    """The directory that holds ``table``'s quarantine runs (see the module's layout).

    Refuses (``LakeConfigError``) a ``quarantine_location`` that is not an absolute path or URI,
    and any root that overlaps the table location: the orphan scan would find the quarantined
    files there and quarantine them again, or a prefix listing would.
    """
    location = table_location.rstrip("/")
    if quarantine_location is None:
        split = urlsplit(location)
        parent, _, directory = split.path.rpartition("/")
        if not parent or not directory:
            raise LakeConfigError(f"Table {table} sits at the root of {location!r}, which has no parent for the "
                                  f"default quarantine: set quarantine_location.")
        root = f"{location[:len(location) - len(split.path)]}{parent}/{QUARANTINE_DIR_NAME}/{directory}"
    else:
        given = quarantine_location.strip() if isinstance(quarantine_location, str) else ""
        split = urlsplit(given)
        if not given or not (split.path.startswith("/") or split.netloc) or ".." in split.path.split("/"):
            raise LakeConfigError(f"quarantine_location must be an absolute path or URI (e.g. /data/quarantine or "
                                  f"s3://bucket/quarantine), without '..'; got {quarantine_location!r}.")
        root = "/".join((given.rstrip("/"), *table.split(".")))
        if _within(given, location):
            raise LakeConfigError(f"quarantine_location {quarantine_location!r} is inside the location of table "
                                  f"{table} ({location}), or begins with its name: the orphan scan (or a prefix "
                                  f"listing) would find the quarantined files there. Choose a location outside it.")
    if _overlap(root, location):
        raise LakeConfigError(f"The quarantine of table {table} would be {root}, which overlaps the table's location "
                              f"({location}): the orphan scan would find the quarantined files there. Choose a "
                              f"quarantine_location outside it.")
    return root


def relative_path(table_location: str, path: str) -> str:
    """``path`` relative to the table location (``data/day=1/x.parquet``), whatever the spelling of
    either (``file:/x`` or ``file:///x``, ``s3://`` or ``s3a://``)."""
    (sl, nl, pl), (sp, np_, pp) = _parts(table_location), _parts(path)
    if (sl, nl) != (sp, np_) or not pp.startswith(pl + "/"):
        raise LakeConfigError(f"{path} is not under the table location {table_location}.")
    return pp[len(pl) + 1:]


def run_directory(root: str, run_key: str) -> str:
    return f"{root}/{checked_run_key(run_key)}"


def manifest_location(root: str, run_key: str) -> str:
    return f"{run_directory(root, run_key)}/{MANIFEST_NAME}"


def quarantined_path(root: str, run_key: str, table_location: str, path: str) -> str:
    """Where ``path`` sits in run ``run_key``: its path relative to the table location, under ``files/``
    (so a restore puts it back exactly, and no file of the table can clash with the manifest)."""
    return f"{run_directory(root, run_key)}/{FILES_DIR_NAME}/{relative_path(table_location, path)}"


# -------------------------------------------------------------------------------------- run keys


def run_key(now_ms: int, run: AirflowRun | None = None) -> str:
    """A run's key: its time (UTC, to the millisecond, so keys sort by time as text), then a short
    label of the Airflow run (``dag_id.task_id``, sanitised) and a hash of its full identity (two
    tries of one task get two keys). Without an Airflow run (a job called by hand): a random tag."""
    stamp = datetime.fromtimestamp(now_ms / 1000, tz=timezone.utc)
    moment = f"{stamp:%Y%m%dT%H%M%S}{now_ms % 1000:03d}Z"
    if run is None:
        return f"{moment}-manual-{uuid.uuid4().hex[:8]}"
    label = _UNSAFE.sub("_", f"{run.dag_id}.{run.task_id}")[:80]
    identity = "\0".join(str(v) for v in (run.dag_id, run.run_id, run.task_id, run.map_index, run.try_number))
    return f"{moment}-{label}-{hashlib.sha256(identity.encode()).hexdigest()[:8]}"


def checked_run_key(value: object) -> str:
    """A run key as :func:`run_key` makes them (no path separators, nothing to climb out with)."""
    if not isinstance(value, str) or not _RUN_KEY.match(value.strip()):
        raise LakeConfigError(f"{value!r} is not a quarantine run key (like 20261123T211530123Z-dag.task-1a2b3c4d, "
                              f"the clean result's quarantine_run).")
    return value.strip()


def run_key_time_ms(key: str) -> int:
    """The time a run key was made (epoch ms)."""
    match = _RUN_KEY.match(checked_run_key(key))
    assert match is not None  # checked_run_key refused anything else
    stamp = match.group(1)
    moment = datetime.strptime(stamp[:15], "%Y%m%dT%H%M%S").replace(tzinfo=timezone.utc)
    return int(moment.timestamp()) * 1000 + int(stamp[15:])


def is_run_key(value: str) -> bool:
    return bool(_RUN_KEY.match(value))


def run_reference(value: object) -> tuple[str, str | None]:
    """``(run key, manifest location or None)`` from what a user hands the restore: a run key (the
    clean result's ``quarantine_run``), or a manifest's location (``quarantine_manifest``)."""
    text = value.strip() if isinstance(value, str) else value
    if isinstance(text, str) and text.endswith("/" + MANIFEST_NAME):
        key = text[:-len(MANIFEST_NAME) - 1].rpartition("/")[2]
        if is_run_key(key):
            return key, text
    try:
        return checked_run_key(text), None
    except LakeConfigError:
        raise LakeConfigError(f"quarantine_run must be a quarantine run key (like 20261123T211530123Z-dag.task-"
                              f"1a2b3c4d: the clean result's quarantine_run) or the location of its manifest.json "
                              f"(quarantine_manifest); got {value!r}.") from None


# -------------------------------------------------------------------------------------- manifest


@dataclasses.dataclass(frozen=True, kw_only=True)
class QuarantinedFile(Contract):
    """One file a run moved: where it was (exactly as the orphan scan named it), where it is, and
    its size and modification time before the move (an object store's move is a copy, which
    stamps a new time)."""

    what: ClassVar[str] = "quarantined file"

    original_path: str
    quarantined_path: str
    size: int
    modified_ms: int


@dataclasses.dataclass(frozen=True, kw_only=True)
class QuarantineManifest(Contract):
    """What one clean run moved to quarantine. Written before the first file moves, so a job killed
    half way leaves a manifest naming every file it may have moved; a restore skips the ones still
    at their original path."""

    what: ClassVar[str] = "quarantine manifest"
    version: int = 1

    table: str
    table_location: str
    run_key: str
    moved_at_ms: int
    moved_at: str = ""  # the same instant in ISO 8601 (UTC), for people reading the file
    airflow_run: AirflowRun | None = None
    files: tuple[QuarantinedFile, ...] = ()

    @classmethod
    def new(cls, *, table: str, table_location: str, run_key: str, moved_at_ms: int, airflow_run: AirflowRun | None,
            files: list[QuarantinedFile]) -> QuarantineManifest:
        moved_at = datetime.fromtimestamp(moved_at_ms / 1000, tz=timezone.utc).isoformat(timespec="milliseconds")
        return cls(table=table, table_location=table_location, run_key=run_key, moved_at_ms=moved_at_ms,
                   moved_at=moved_at, airflow_run=airflow_run, files=tuple(files))


# -------------------------------------------------------------------------------------- purge


def access_denied(error: BaseException) -> bool:
    """Whether the store refused the request (S3's 403, as S3A reports it through py4j or pyarrow
    through the AWS SDK): a default quarantine root a table bucket will not list holds nothing."""
    text = str(error)
    return any(sign in text for sign in ("AccessDenied", "ACCESS_DENIED", "Status Code: 403", "403 Forbidden"))


def runs_to_purge(runs: Mapping[str, int | None], quarantine_days: float, now_ms: int) -> list[str]:
    """The run keys past ``quarantine_days`` at ``now_ms``, oldest first.

    ``runs``: run key -> its manifest's ``moved_at_ms``, or ``None`` when the manifest is missing
    or unreadable (a job killed before it was written: then the key's own time counts). Directories
    that are not run keys are never purged. ``quarantine_days=0`` purges every run.
    """
    limit = now_ms - checked_quarantine_days(quarantine_days) * DAY_MS
    due = []
    for key, moved_at_ms in runs.items():
        if not is_run_key(key):
            continue
        when = moved_at_ms if moved_at_ms is not None else run_key_time_ms(key)
        if when <= limit:
            due.append(key)
    return sorted(due)
