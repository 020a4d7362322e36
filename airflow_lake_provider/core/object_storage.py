"""A table's object storage (S3, GCS, ADLS) as pyarrow reaches it, from the settings the table's own FileIO reads.

The Arrow rewriter reads and writes a table's files with pyarrow. On S3 it takes the endpoint,
addressing style, region and credentials from where Iceberg's FileIO takes them, so there is no
second configuration to keep in step: the ``s3.*`` properties of Iceberg's ``S3FileIO`` (with the
storage credentials a REST catalog vends for the table's location, the longest matching prefix
winning, as ``S3FileIO`` picks them), or Hadoop's ``fs.s3a.*`` settings behind ``HadoopFileIO``
(per-bucket ``fs.s3a.bucket.NAME.*`` first, as S3A reads them). Where neither names credentials,
pyarrow takes the AWS default chain (environment, profile, instance role), as both FileIOs do.

On GCS the same from the ``gcs.*`` properties of Iceberg's ``GCSFileIO`` (and the OAuth2 token a REST
catalog vends). What pyarrow cannot take as GCSFileIO takes it (a token without its expiry, customer-
supplied encryption keys, a user project, impersonation) raises :class:`UnmappedStorage`, and so does
Hadoop's GCS connector (``fs.gs.*``, not proven here): the rewrite then stays with Iceberg's action.

On Azure Data Lake Storage (``abfs[s]://container@account-host/path``) the same from the ``adls.*``
properties of Iceberg's ``ADLSFileIO``: the endpoint (``adls.connection-string.<host>``), a SAS token
(``adls.sas-token.<host>``, also vended by a REST catalog) or the shared key. Azure's default credential
chain (Java's and pyarrow's C++ one differ in order and members), a bearer token, a custom token provider
and credentials refreshed from an endpoint raise :class:`UnmappedStorage`; so do ``wasb[s]://`` locations
(ADLSFileIO reads them since 1.12, but nothing here proves pyarrow reaches them the same way).

Pure: the options are plain values for ``pyarrow.fs.S3FileSystem`` / ``GcsFileSystem`` /
``AzureFileSystem``; nothing here imports pyarrow.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

GCS_FILE_IO = "org.apache.iceberg.gcp.gcs.GCSFileIO"
ADLS_FILE_IO = "org.apache.iceberg.azure.adlsv2.ADLSFileIO"
#: Stores by URI scheme, as Iceberg's ResolvingFileIO tells them apart (not ``wasb[s]``: see the module's doc).
_STORES = {"s3": "s3", "s3a": "s3", "s3n": "s3", "gs": "gcs", "abfs": "adls", "abfss": "adls"}


class UnmappedStorage(Exception):
    """The table's FileIO settings name something pyarrow cannot do as that FileIO does (the reason)."""


def is_local(location: str) -> bool:
    return location.startswith(("file:/", "/"))


def store_of(location: str) -> str | None:
    """``local``, ``s3``, ``gcs`` or ``adls``: the store a location is on, as the Arrow rewriter reaches it
    (``None``: one it does not reach)."""
    if is_local(location):
        return "local"
    scheme = urlsplit(location).scheme.lower() if "://" in location else ""
    return _STORES.get(scheme)


def s3_path(location: str) -> str:
    """``bucket/key`` of an S3 (or GCS) location, as pyarrow's S3 (GCS) file system names it."""
    parts = urlsplit(location)
    return f"{parts.netloc}{parts.path}"


def adls_location(location: str) -> tuple[str | None, str, str]:
    """``(container, account host, path)`` of ``abfs[s]://container@host/path``, as ADLSFileIO reads it."""
    parts = urlsplit(location)
    container, _, host = parts.netloc.rpartition("@")
    return container or None, host, parts.path.lstrip("/")


def object_path(location: str) -> str:
    """The path pyarrow's file system of the location's store names it by: ``bucket/key``, on ADLS
    ``container/path`` (the account is the file system's, not the path's)."""
    if store_of(location) == "adls":
        container, _, path = adls_location(location)
        return f"{container}/{path}"
    return s3_path(location)


def _vended(properties: Mapping[str, str], location: str,
            storage_credentials: Iterable[tuple[str, Mapping[str, str]]]) -> dict[str, str]:
    """The FileIO's properties with the vended credential of the longest prefix of ``location`` over them."""
    matching = sorted(((prefix, config) for prefix, config in storage_credentials if location.startswith(prefix)),
                      key=lambda pair: len(pair[0]))
    return {**properties, **(matching[-1][1] if matching else {})}


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
    merged = _vended(properties, location, storage_credentials)
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


#: GCSFileIO properties with no ``GcsFileSystem`` option doing the same: the rewrite stays with Iceberg's action.
_GCS_UNMAPPED = {
    "gcs.encryption-key": "a customer-supplied encryption key",
    "gcs.decryption-key": "a customer-supplied decryption key",
    "gcs.user-project": "a user project billed for requests (requester pays)",
    "gcp.impersonate.service-account": "service-account impersonation",
}


def gcs_options_from_file_io(properties: Mapping[str, str], location: str,
                             storage_credentials: Iterable[tuple[str, Mapping[str, str]]] = ()) -> dict[str, Any]:
    """``GcsFileSystem`` options from ``GCSFileIO``'s properties and its vended storage credentials
    (the longest prefix of ``location`` wins), or :class:`UnmappedStorage` with the reason.

    Credentials as GCSFileIO picks them: ``gcs.oauth2.token`` (with ``gcs.oauth2.token-expires-at``,
    milliseconds since the epoch; pyarrow cannot refresh it as GCSFileIO does from a refresh endpoint,
    so the token must outlast the rewrite), else ``gcs.no-auth`` (anonymous), else Google's default
    credentials, which pyarrow resolves by the same rules (google.aip.dev/auth/4110)."""
    merged = _vended(properties, location, storage_credentials)
    unmapped = [what for key, what in _GCS_UNMAPPED.items() if merged.get(key)]
    if unmapped:
        raise UnmappedStorage(f"the table's GCSFileIO uses {unmapped[0]}, which pyarrow's GCS file system "
                              "cannot use as GCSFileIO does")
    options: dict[str, Any] = {**_endpoint(merged.get("gcs.service.host"))}
    if merged.get("gcs.project-id"):
        options["project_id"] = merged["gcs.project-id"]
    token = merged.get("gcs.oauth2.token")
    if token:
        expires_at = merged.get("gcs.oauth2.token-expires-at")
        if not expires_at:
            raise UnmappedStorage("the table's GCSFileIO has an OAuth2 token without gcs.oauth2.token-expires-at, "
                                  "and pyarrow's GCS file system takes a token only with its expiry")
        options.update(access_token=token, credential_token_expiration=dt.datetime.fromtimestamp(
            int(expires_at) / 1000, tz=dt.timezone.utc))
    elif str(merged.get("gcs.no-auth", "false")).lower() == "true":
        options["anonymous"] = True
    return options


#: What pyarrow's GCS file system takes beyond the options: its client retries a failing request (an
#: unreachable endpoint, a host name that does not resolve) for 15 minutes by default; Google's Java client
#: behind GCSFileIO gives up after 50 s, and so does the Arrow rewriter.
FIXED_GCS_OPTIONS: dict[str, Any] = {"retry_time_limit": dt.timedelta(seconds=50)}


#: The service hosts of an Azure account (``<account>.dfs.core.windows.net``), as pyarrow's defaults name them.
_AZURE_DFS, _AZURE_BLOB = ".dfs.core.windows.net", ".blob.core.windows.net"


def _adls_endpoint(endpoint: str, account: str) -> dict[str, Any]:
    """``AzureFileSystem``'s authorities and schemes for the endpoint ADLSFileIO connects to: path-style
    (``http://127.0.0.1:10000/<account>``, an emulator) or the account's own host (a ``.dfs.`` or ``.blob.``
    service host: the other service is the same suffix, as Azure's SDK derives it)."""
    parts = urlsplit(endpoint if "://" in endpoint else f"https://{endpoint}")
    scheme = (parts.scheme or "https").lower()
    if parts.query or parts.fragment:
        raise UnmappedStorage("the table's ADLSFileIO endpoint carries a query (a SAS token in the connection "
                              "string), which the Arrow rewriter does not map")
    path = parts.path.strip("/")
    if path == account:
        authority = {"blob_storage_authority": parts.netloc, "dfs_storage_authority": parts.netloc}
    elif not path and parts.netloc.startswith(f"{account}.") and ":" not in parts.netloc:
        suffix = parts.netloc[len(account):]
        service, _, rest = suffix[1:].partition(".")
        if service not in ("dfs", "blob") or not rest:
            raise UnmappedStorage(f"the table's ADLS host {parts.netloc} is not an account's dfs or blob service")
        blob, dfs = f".blob.{rest}", f".dfs.{rest}"
        authority = {**({"blob_storage_authority": blob} if blob != _AZURE_BLOB else {}),
                     **({"dfs_storage_authority": dfs} if dfs != _AZURE_DFS else {})}
    else:
        raise UnmappedStorage(f"the table's ADLSFileIO endpoint {parts.scheme}://{parts.netloc}/{path} names "
                              f"neither the account {account} by its path nor its host")
    schemes = {"blob_storage_scheme": scheme, "dfs_storage_scheme": scheme} if scheme != "https" else {}
    return {**authority, **schemes}


#: ADLSFileIO properties whose credentials pyarrow's Azure file system cannot take as ADLSFileIO does.
_ADLS_UNMAPPED = {
    "adls.token": "a bearer token (adls.token)",
    "adls.token-credential-provider": "a custom token credential provider",
}


def adls_options_from_file_io(properties: Mapping[str, str], location: str,
                              storage_credentials: Iterable[tuple[str, Mapping[str, str]]] = ()) -> dict[str, Any]:
    """``AzureFileSystem`` options (``account_name`` among them) from ``ADLSFileIO``'s properties and its
    vended storage credentials (the longest prefix of ``location`` wins), or :class:`UnmappedStorage`.

    As ADLSFileIO (Iceberg 1.12) picks them, per account host: a SAS token (``adls.sas-token.<host>``), else
    the shared key (``adls.auth.shared-key.account.name``/``.key``); the endpoint is
    ``adls.connection-string.<host>`` (a URL), else ``https://<host>``."""
    container, host, _ = adls_location(location)
    if not container:
        raise UnmappedStorage(f"the ADLS location {location} names no container (abfs[s]://container@host/path)")
    account = host.split(".", 1)[0]
    merged = _vended(properties, location, storage_credentials)
    refresh = str(merged.get("adls.refresh-credentials-enabled", "true")).lower() != "false"
    if refresh and merged.get("adls.refresh-credentials-endpoint"):
        raise UnmappedStorage("the table's ADLSFileIO refreshes its credentials from an endpoint, which pyarrow's "
                              "Azure file system cannot do")
    options: dict[str, Any] = {"account_name": account,
                               **_adls_endpoint(merged.get(f"adls.connection-string.{host}") or host, account)}
    name, key = merged.get("adls.auth.shared-key.account.name"), merged.get("adls.auth.shared-key.account.key")
    sas_token = merged.get(f"adls.sas-token.{host}")
    if sas_token:
        return {**options, "sas_token": sas_token.lstrip("?")}
    if name or key:
        if not (name and key):
            raise UnmappedStorage("the table's ADLSFileIO has half a shared key (adls.auth.shared-key.account.name "
                                  "and .key go together)")
        if name != account:
            raise UnmappedStorage(f"the table's ADLSFileIO signs with the shared key of account {name} for a "
                                  f"location in account {account}")
        return {**options, "account_key": key}
    unmapped = [what for key, what in _ADLS_UNMAPPED.items() if merged.get(key)]
    raise UnmappedStorage(f"the table's ADLSFileIO uses {unmapped[0] if unmapped else 'no SAS token or shared key'}"
                          f" for {host}: pyarrow's Azure file system cannot authenticate as ADLSFileIO does (Azure's "
                          "default credential chain differs between Java and pyarrow's C++ SDK)")
