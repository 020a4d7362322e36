"""A table's S3 storage as pyarrow reaches it, from the settings the table's own FileIO reads.

The Arrow rewriter reads and writes a table's files with pyarrow. On S3 it takes the endpoint,
addressing style, region and credentials from where Iceberg's FileIO takes them, so there is no
second configuration to keep in step: the ``s3.*`` properties of Iceberg's ``S3FileIO`` (with the
storage credentials a REST catalog vends for the table's location, the longest matching prefix
winning, as ``S3FileIO`` picks them), or Hadoop's ``fs.s3a.*`` settings behind ``HadoopFileIO``
(per-bucket ``fs.s3a.bucket.NAME.*`` first, as S3A reads them). Where neither names credentials,
pyarrow takes the AWS default chain (environment, profile, instance role), as both FileIOs do.

Pure: the options are plain values for ``pyarrow.fs.S3FileSystem``; nothing here imports pyarrow.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit


def is_local(location: str) -> bool:
    return location.startswith(("file:/", "/"))


def s3_path(location: str) -> str:
    """``bucket/key`` of an S3 location, as pyarrow's S3 file system names it."""
    parts = urlsplit(location)
    return f"{parts.netloc}{parts.path}"


def _endpoint(endpoint: str | None) -> dict[str, Any]:
    if not endpoint:
        return {}
    parts = urlsplit(endpoint if "://" in endpoint else f"https://{endpoint}")
    return {"endpoint_override": parts.netloc, "scheme": parts.scheme or "https"}


def _addressing(path_style: str | None, endpoint: str | None) -> dict[str, Any]:
    """pyarrow addresses buckets by path when an endpoint is set, by virtual host otherwise."""
    if endpoint and str(path_style).lower() == "false":
        return {"force_virtual_addressing": True}
    return {}


def _credentials(access_key: str | None, secret_key: str | None, session_token: str | None) -> dict[str, Any]:
    if not (access_key and secret_key):
        return {}
    return {"access_key": access_key, "secret_key": secret_key,
            **({"session_token": session_token} if session_token else {})}


def s3_options_from_file_io(properties: Mapping[str, str], location: str,
                            storage_credentials: Iterable[tuple[str, Mapping[str, str]]] = ()) -> dict[str, Any]:
    """``S3FileSystem`` options from ``S3FileIO``'s properties and its vended storage credentials
    ((prefix, config) pairs: the longest prefix of ``location`` wins)."""
    matching = sorted(((prefix, config) for prefix, config in storage_credentials if location.startswith(prefix)),
                      key=lambda pair: len(pair[0]))
    merged = {**properties, **(matching[-1][1] if matching else {})}
    endpoint = merged.get("s3.endpoint")
    region = merged.get("client.region") or merged.get("s3.region")
    return {**_endpoint(endpoint), **_addressing(merged.get("s3.path-style-access") or "false", endpoint),
            **({"region": region} if region else {}),
            **_credentials(merged.get("s3.access-key-id"), merged.get("s3.secret-access-key"),
                           merged.get("s3.session-token"))}


def s3_options_from_s3a(setting: Callable[[str], str | None], bucket: str) -> dict[str, Any]:
    """``S3FileSystem`` options from Hadoop's S3A settings (``setting(key)``: the value or ``None``)."""
    def get(suffix: str) -> str | None:
        return setting(f"fs.s3a.bucket.{bucket}.{suffix}") or setting(f"fs.s3a.{suffix}")

    endpoint = get("endpoint")
    if endpoint and "://" not in endpoint:
        ssl = (get("connection.ssl.enabled") or "true").lower() != "false"
        endpoint = f"{'https' if ssl else 'http'}://{endpoint}"
    region = get("endpoint.region")
    return {**_endpoint(endpoint), **_addressing(get("path.style.access") or "false", endpoint),
            **({"region": region} if region else {}),
            **_credentials(get("access.key"), get("secret.key"), get("session.token"))}


#: What pyarrow's S3 file system takes beyond the options: Iceberg's writers never create buckets
#: nor directory markers (S3 has no directories).
FIXED_S3_OPTIONS: dict[str, Any] = {"allow_bucket_creation": False, "allow_bucket_deletion": False}
