"""Which listed files are orphans, compared as Iceberg's ``DeleteOrphanFiles`` compares them.

Used by the clean job when it lists orphans in the driver (``jobs/orphan_listing.py``) instead of
in Iceberg's Spark action: the same comparison, so the same files come out. Each location is read
as Hadoop's ``Path`` reads it (scheme, authority, path; repeated slashes and a trailing one
dropped) and files are matched by path alone. A listed file is an orphan when no reachable file
has its path. Where a reachable file has the path under another scheme or authority (``s3a`` and
``s3n`` count as ``s3``), Iceberg's default (``PrefixMismatchMode.ERROR``) refuses to decide, and
so does :func:`find_orphans`: nothing is taken, and the error names the pairs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

#: Iceberg's ``EQUAL_SCHEMES_DEFAULT``: these schemes name the same store.
EQUAL_SCHEMES = {"s3n": "s3", "s3a": "s3"}


class PrefixMismatch(ValueError):
    """A listed file matches a reachable one except for its scheme or authority."""


def split_location(location: str) -> tuple[str | None, str | None, str]:
    """``(scheme, authority, path)`` of ``location`` as Hadoop's ``Path(String)`` parses it."""
    start, scheme, authority = 0, None, None
    colon, slash = location.find(":"), location.find("/")
    if colon != -1 and (slash == -1 or colon < slash):
        scheme, start = location[:colon], colon + 1
    if location.startswith("//", start) and len(location) - start > 2:
        next_slash = location.find("/", start + 2)
        end = next_slash if next_slash > 0 else len(location)
        authority, start = location[start + 2:end], end
    path = re.sub("/+", "/", location[start:])
    if len(path) > 1 and path.endswith("/"):
        path = path[:-1]
    return scheme, authority or None, path


def _matches(valid: str | None, actual: str | None) -> bool:
    """Iceberg's ``uriComponentMatch``: a reachable file without the component matches any."""
    return not valid or valid.lower() == (actual or "").lower()


def find_orphans(listed: Iterable[str], reachable: Iterable[str]) -> list[str]:
    """The ``listed`` locations no ``reachable`` location names, in listed order; raises
    :class:`PrefixMismatch` when one is named only under another scheme or authority."""
    by_path: dict[str, set[tuple[str | None, str | None]]] = {}
    for location in reachable:
        scheme, authority, path = split_location(location)
        by_path.setdefault(path, set()).add((EQUAL_SCHEMES.get(scheme or "", scheme), authority))
    orphans, conflicts = [], set()
    for location in listed:
        scheme, authority, path = split_location(location)
        scheme = EQUAL_SCHEMES.get(scheme or "", scheme)
        valid = by_path.get(path)
        if valid is None:
            orphans.append(location)
            continue
        for valid_scheme, valid_authority in valid:
            if not _matches(valid_scheme, scheme):
                conflicts.add((valid_scheme, scheme))
            if not _matches(valid_authority, authority):
                conflicts.add((valid_authority, authority))
    if conflicts:
        raise PrefixMismatch(
            "Unable to tell whether some listed files are orphans: the metadata names them under another scheme "
            f"or authority ({sorted(conflicts, key=str)}, as (metadata, listed)). Iceberg refuses the same listing; "
            "nothing was taken. Check that the table's location and its files' locations name the same store.")
    return orphans
