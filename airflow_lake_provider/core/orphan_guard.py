"""Which orphan candidates must never be taken, decided on paths alone (pure: no Spark).

The same file is spelt several ways: Iceberg's metadata says ``file:///lake/t/x.parquet`` where
Hadoop's listing says ``file:/lake/t/x.parquet`` (or a bare ``/lake/t/x.parquet``); S3 is
``s3://``, ``s3a://`` or ``s3n://`` depending on the writer; partition values are URL-encoded in
directory names (``name=a%2Fb``) and a listing may hand them back decoded. :func:`file_key` maps
every spelling of one file to one key, so a reference and a candidate match whoever wrote them.
Merging spellings errs on the safe side: two keys that collide can only make more files kept.

:class:`CandidateIndex` finds, among many referenced paths, the few that are candidates; the
reason sentences say why a candidate stays (they travel in the clean result's ``kept_referenced``).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable
from urllib.parse import unquote, urlsplit

#: Schemes that name the same store (Iceberg's ``equal_schemes`` default for S3).
EQUAL_SCHEMES = {"s3a": "s3", "s3n": "s3", "file": ""}
#: The file a Hadoop catalog reads the current metadata version from (``metadata/version-hint.text``).
VERSION_HINT = "version-hint.text"


def file_key(path: str) -> str:
    """One key for every spelling of ``path``: the scheme folded (``s3a``/``s3n`` -> ``s3``,
    ``file:`` and no scheme -> none), repeated and trailing slashes dropped, percent-escapes decoded.

    >>> file_key("file:///lake/t/a%3Db.parquet") == file_key("/lake/t/a=b.parquet")
    True
    >>> file_key("file:/lake/t/a=b.parquet") == file_key("/lake/t/a=b.parquet")
    True
    >>> file_key("s3a://bucket/t/x") == file_key("s3://bucket//t/x/")
    True
    """
    parts = urlsplit(path)
    scheme = parts.scheme.lower()
    if len(scheme) == 1:  # a Windows drive letter, not a scheme
        scheme, body = "", path
    else:
        scheme = EQUAL_SCHEMES.get(scheme, scheme)
        body = parts.path
        if parts.query:  # '?' and '#' are part of an object key, not a URL's query
            body = f"{body}?{parts.query}"
        if parts.fragment:
            body = f"{body}#{parts.fragment}"
    body = re.sub(r"/{2,}", "/", unquote(body)).rstrip("/") or "/"
    authority = parts.netloc.lower() if scheme else ""
    return f"{scheme}://{authority}{body}" if scheme else body


def file_name(path: str) -> str:
    """The last path segment, decoded (what :class:`CandidateIndex` first matches on)."""
    return posixpath.basename(file_key(path))


def is_version_hint(path: str) -> bool:
    """A Hadoop table's version hint: never an orphan, it names the current metadata file."""
    return file_name(path) == VERSION_HINT


class CandidateIndex:
    """The candidates by :func:`file_key`: ``match(path)`` says which candidates ``path`` names."""

    def __init__(self, candidates: Iterable[str]):
        self._by_key: dict[str, list[str]] = {}
        for candidate in candidates:
            self._by_key.setdefault(file_key(candidate), []).append(candidate)

    def __bool__(self) -> bool:
        return bool(self._by_key)

    def match(self, path: str | None) -> list[str]:
        return self._by_key.get(file_key(path), []) if path else []

    def names(self) -> list[str]:
        """Every last segment a reference to a candidate may end with (decoded and as written):
        a cheap first filter to run where the references are (in Spark), before :meth:`match`."""
        found = set()
        for candidates in self._by_key.values():
            for candidate in candidates:
                found.update({file_name(candidate), posixpath.basename(candidate.rstrip("/"))})
        return sorted(found)


def own_table_guard(candidates: Iterable[str], *, current_metadata: str, metadata_log: Iterable[str],
                    statistics: dict[str, int], partition_statistics: dict[str, int]) -> dict[str, str]:
    """Of ``candidates``, the table's own files that are never orphans, each with why.

    ``statistics`` and ``partition_statistics``: path -> the snapshot the file describes.
    The version hint is recognised by name wherever it sits (a Hadoop table's
    ``metadata/version-hint.text``): it is rewritten in place on every commit, so its age says nothing.
    """
    index = CandidateIndex(candidates)
    kept: dict[str, str] = {}

    def keep(path: str, reason: str) -> None:
        for candidate in index.match(path):
            kept.setdefault(candidate, reason)

    keep(current_metadata, "the table's current metadata file")
    for path in metadata_log:
        keep(path, "a metadata file in the table's metadata log (write.metadata.previous-versions-max)")
    for path, snapshot_id in statistics.items():
        keep(path, f"the table's statistics file (Puffin) of snapshot {snapshot_id}")
    for path, snapshot_id in partition_statistics.items():
        keep(path, f"the table's partition-statistics file of snapshot {snapshot_id}")
    for candidate in candidates:
        if is_version_hint(candidate):
            kept.setdefault(candidate, "the table's version hint (metadata/version-hint.text)")
    return kept


#: What each kind of reference is called in a reason sentence.
REFERENCE_KINDS = {
    "data": "data file", "position_deletes": "position-delete file or deletion vector",
    "equality_deletes": "equality-delete file", "deletes": "delete file", "manifest": "manifest",
    "manifest_list": "manifest list",
    "metadata": "metadata file", "statistics": "statistics file (Puffin)",
    "partition_statistics": "partition-statistics file",
}
#: ``content`` of Iceberg's ``all_files`` metadata table -> the kind above.
CONTENT_KINDS = {0: "data", 1: "position_deletes", 2: "equality_deletes"}


def referenced_by(table: str, kind: str) -> str:
    """``referenced by table ns.copy (data file)``."""
    return f"referenced by table {table} ({REFERENCE_KINDS.get(kind, kind)})"


def unchecked(what: str, error: str) -> str:
    """Why every candidate stays when ``what`` (``table ns.t``, ``namespace ns``) could not be read."""
    first_line = (error.strip().splitlines() or [""])[0][:300]
    return (f"not taken: {what} could not be read to check whether it references this file "
            f"({first_line}); no candidate is taken until every table of the checked namespaces can be read")


def unknown_namespace(namespace: str, catalog: str) -> str:
    return (f"not taken: reference namespace {namespace!r} does not exist in catalog {catalog}; "
            f"no candidate is taken until reference_namespaces names existing namespaces")
