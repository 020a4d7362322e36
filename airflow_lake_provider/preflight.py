"""Checks made before any JVM starts: does the catalog answer, take the credential, know the
warehouse; does the storage take the key and hold the bucket. Each failure becomes one
sentence naming the cause and what to do (a :class:`LakeConfigError`), in seconds.

Why bounds are set here: PyIceberg's REST client (``requests``) has no timeout, so a catalog
host that drops packets hangs a task for the operating system's TCP timeout (minutes); the
REST catalog class used here gives every request :data:`REST_TIMEOUT`. PyArrow's S3 client
retries a refused connection for about two seconds and waits up to its own connect timeout
on a silent host; ``s3.connect-timeout`` defaults to :data:`S3_CONNECT_TIMEOUT_SECONDS`.

No Airflow import; PyIceberg and PyArrow are imported where used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from airflow_lake_provider.exceptions import LakeConfigError

if TYPE_CHECKING:
    from collections.abc import Callable

    from requests import PreparedRequest, Response
    from requests.adapters import HTTPAdapter

#: (connect, read) seconds for every request to a REST catalog once it is open.
REST_TIMEOUT = (10.0, 120.0)
#: (connect, read) seconds while it opens (configuration and token): a catalog that accepts the
#: connection but never answers is refused in seconds.
REST_OPEN_TIMEOUT = (10.0, 10.0)
#: Default ``s3.connect-timeout`` of the PyIceberg face (PyIceberg sets none).
S3_CONNECT_TIMEOUT_SECONDS = "10"
BOUNDED_REST_CATALOG = "airflow_lake_provider.preflight.BoundedRestCatalog"

_S3_DENIED = ("ACCESS_DENIED", "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "INVALID_ACCESS_KEY_ID",
              "SIGNATURE_DOES_NOT_MATCH")
_S3_UNREACHABLE = ("NETWORK_CONNECTION", "curlCode", "Could not connect", "Couldn't connect", "timed out")
_KIND_NAMES = {"rest": "REST", "sql": "SQL", "hive": "Hive"}
_S3_NO_BUCKET = ("NoSuchBucket", "NO_SUCH_BUCKET")


def _bounded_session_class() -> Callable[[Any], HTTPAdapter]:
    """An ``HTTPAdapter`` class, made with a catalog, that gives every request the catalog's timeout."""
    from requests.adapters import HTTPAdapter

    class _TimeoutAdapter(HTTPAdapter):
        def __init__(self, catalog: Any) -> None:
            super().__init__()
            self._catalog = catalog

        def send(
            self,
            request: PreparedRequest,
            stream: bool = False,
            timeout: float | tuple[float | None, float | None] | None = None,
            verify: bool | str = True,
            cert: str | tuple[str, str] | None = None,
            proxies: dict[str, str] | None = None,
        ) -> Response:
            if timeout is None:
                timeout = getattr(self._catalog, "_lake_timeout", REST_OPEN_TIMEOUT)
            return super().send(request, stream=stream, timeout=timeout, verify=verify, cert=cert, proxies=proxies)

    return _TimeoutAdapter


def _make_bounded_rest_catalog():
    from pyiceberg.catalog.rest import RestCatalog

    adapter_class = _bounded_session_class()

    class BoundedRestCatalog(RestCatalog):
        """PyIceberg's REST catalog with a timeout on every request (the token request too):
        :data:`REST_OPEN_TIMEOUT` while it opens, :data:`REST_TIMEOUT` after."""

        def __init__(self, name: str, **properties: str):
            self._lake_timeout = REST_OPEN_TIMEOUT
            try:
                super().__init__(name, **properties)
            except ModuleNotFoundError as error:
                # PyIceberg's loader turns a module missing here (boto3 for SigV4) into "Could not
                # initialize Catalog": raise it as an ImportError, which the hook names the extra for.
                raise ImportError(str(error), name=error.name) from None
            self._lake_timeout = REST_TIMEOUT

        def _bound(self, session):
            adapter = adapter_class(self)
            session.mount("http://", adapter)
            session.mount("https://", adapter)
            return session

        def _create_legacy_oauth2_auth_manager(self, session):
            # PyIceberg fetches the token here, on the session it is still building: bound it first.
            return super()._create_legacy_oauth2_auth_manager(self._bound(session))

        def _create_session(self):
            return self._bound(super()._create_session())

    BoundedRestCatalog.__module__ = __name__
    return BoundedRestCatalog


def __getattr__(name: str) -> Any:
    # ``py-catalog-impl`` names this class; it is built on first use so importing this module
    # does not import PyIceberg's REST client.
    if name == "BoundedRestCatalog":
        cls = _make_bounded_rest_catalog()
        globals()[name] = cls
        return cls
    raise AttributeError(name)


def pyiceberg_properties(kind: str, properties: dict[str, str]) -> dict[str, str]:
    """The PyIceberg catalog properties with this module's bounds: the bounded REST class, an S3
    connect timeout. A user's own ``py-catalog-impl`` or ``s3.connect-timeout`` is kept."""
    props = dict(properties)
    if kind == "rest" and "py-catalog-impl" not in props:
        props.pop("type", None)  # load_catalog refuses a type beside py-catalog-impl
        props["py-catalog-impl"] = BOUNDED_REST_CATALOG
    if any(key.startswith("s3.") for key in props):
        props.setdefault("s3.connect-timeout", S3_CONNECT_TIMEOUT_SECONDS)
    return props


def _server_message(error: BaseException, limit: int = 200) -> str:
    text = " ".join(str(error).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _unreachable_reason(error: BaseException) -> str:
    from requests import exceptions as http

    text = str(error)
    if isinstance(error, http.ConnectTimeout):
        return "the connection timed out"
    if isinstance(error, http.Timeout):
        return "it accepted the connection but did not answer in time"
    if "Connection refused" in text or "Errno 111" in text:
        return "connection refused"
    if "Name or service not known" in text or "nodename nor servname" in text or "getaddrinfo" in text:
        return "the host name does not resolve"
    return _server_message(error, 120)


#: What AWS-style servers answer when a SigV4 signature or its key is wrong (not a missing permission).
_SIGNATURE_REFUSALS = ("signature we calculated does not match", "access key id you provided does not exist",
                       "security token included in the request is invalid", "invalidsignatureexception")


def rejected_signature(error: BaseException) -> bool:
    """Whether a refusal is of the request's SigV4 signature or signing key, rather than of access."""
    return any(phrase in str(error).lower() for phrase in _SIGNATURE_REFUSALS)


def describe_catalog_error(kind: str, name: str, uri: str, warehouse: str | None, error: BaseException) -> str | None:
    """One sentence for a catalog that cannot be opened or listed, or ``None`` when the error
    is not one this module knows (the caller keeps its own message)."""
    from pyiceberg import exceptions as ice
    from requests import exceptions as http  # PyIceberg requires requests

    what = f"the {_KIND_NAMES.get(kind, kind)} catalog {name!r} at {uri}"
    if isinstance(error, (http.ConnectionError, http.Timeout)):
        return (f"Cannot reach {what} ({_unreachable_reason(error)}). Check the connection's Host (the catalog's "
                "base URI, e.g. http://HOST:8181) and that the catalog server is running and reachable from this "
                "worker.")
    if kind == "rest" and isinstance(error, (ice.OAuthError, ice.UnauthorizedError)):
        return (f"{what[0].upper()}{what[1:]} rejected the connection's credential ({_server_message(error)}). Check "
                "Login (the OAuth client id) and Password (the client secret, or a token with no Login); if tokens "
                "come from another identity provider, set properties.oauth2-server-uri to its token endpoint.")
    if kind == "rest" and isinstance(error, ice.ForbiddenError) and rejected_signature(error):
        return (f"{what[0].upper()}{what[1:]} rejected the request's SigV4 signature ({_server_message(error)}). "
                "Check the signing credentials (pyiceberg_properties client.access-key-id and "
                "client.secret-access-key, else the worker's AWS credentials; spark_properties rest.access-key-id "
                "and rest.secret-access-key for the Spark jobs) and rest.signing-name / rest.signing-region.")
    if kind == "rest" and isinstance(error, ice.ForbiddenError):
        return (f"{what[0].upper()}{what[1:]} accepted the credential but refused access ({_server_message(error)}). "
                "Grant the client access to the warehouse, or use a client that has it.")
    if kind == "rest" and (isinstance(error, ice.NoSuchNamespaceError) or "warehouse" in str(error).lower()):
        return (f"{what[0].upper()}{what[1:]} has no warehouse {warehouse!r} ({_server_message(error)}). Set the "
                "connection's warehouse extra to one the catalog serves (for S3 Tables and SeaweedFS: the table "
                "bucket's name).")
    return None


def describe_storage_error(location: str, error: BaseException) -> str | None:
    """One sentence for an S3 request that failed (rejected key, unreachable endpoint, missing
    bucket), or ``None`` for other errors."""
    text = str(error)
    parts = urlsplit(location)
    bucket = parts.netloc
    if any(marker in text for marker in _S3_UNREACHABLE):
        return (f"Cannot reach the S3 endpoint for {location} ({_server_message(error, 160)}). Check "
                "properties.s3.endpoint (scheme, host and port) and that the store is reachable from this worker.")
    if any(marker in text for marker in _S3_NO_BUCKET):
        return f"Bucket {bucket!r} does not exist on the S3 endpoint ({location}). Create it, or fix the warehouse."
    if any(marker in text for marker in _S3_DENIED):
        return (f"The S3 store refused the connection's key for {location} (access denied: a wrong or revoked key, "
                "or one without rights on the bucket). Check properties.s3.access-key-id and "
                "properties.s3.secret-access-key (the S3 key, not the catalog's OAuth client).")
    return None


def check_s3_bucket(properties: dict[str, str], location: str) -> None:
    """Refuse, in seconds, an S3 location whose bucket is missing, whose key is refused, or whose
    endpoint does not answer (one ``HeadBucket`` request)."""
    from pyarrow.fs import FileType
    from pyiceberg.io.pyarrow import PyArrowFileIO

    bucket = urlsplit(location).netloc
    try:
        filesystem = PyArrowFileIO(properties).fs_by_scheme("s3", bucket)
        info = filesystem.get_file_info(bucket)
    except OSError as error:
        raise LakeConfigError(describe_storage_error(location, error) or
                              f"Cannot read {location}: {_server_message(error)}") from None
    if info.type == FileType.NotFound:
        raise LakeConfigError(f"Bucket {bucket!r} does not exist on the S3 endpoint "
                              f"{properties.get('s3.endpoint') or '(AWS)'} (warehouse {location}). Create the "
                              "bucket, or set the connection's warehouse to one that exists.")


def check_readable(io, location: str) -> None:
    """Refuse a table whose files the storage will not serve with this key (one ``HeadObject``)."""
    try:
        io.new_input(location).exists()
    except OSError as error:
        message = describe_storage_error(location, error)
        if message:
            raise LakeConfigError(message) from None
        raise
