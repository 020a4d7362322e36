"""A throwaway Azure Data Lake Storage for the tests: Azurite's blob service on 127.0.0.1, a free port.

Azurite comes from npm (``azurite`` 3.37.0), installed by scripts/bootstrap.sh into the provider's tools cache
(``$LAKE_TOOLS``, default ``~/.cache/airflow-lake-provider/tools/azurite-3.37.0``), or as ``azurite-blob`` on
PATH; Node.js runs it. It holds its blobs in memory and serves the emulator's well-known account
``devstoreaccount1`` path-style (``http://127.0.0.1:PORT/devstoreaccount1``): Iceberg's ``ADLSFileIO`` reaches
it through ``adls.connection-string.<account host>``, pyarrow through the blob and DFS authorities. What
Azurite does not serve of the DFS API (a prefix listing gets HTTP 400) the rewrite does not use.
Import the ``azurite_server`` fixture (conftest.py does, once per session); it skips with a sentence when
Azurite is not installed.

PyIceberg 0.12's ``PyArrowFileIO`` keeps the account in the path of ``abfs[s]://container@host/path``
(apache/iceberg-python#2698), so pyarrow reads ``container@host`` as the container: :class:`AbfsPyArrowFileIO`
parses such locations as pyarrow does (``container/path``) for the oracle's PyIceberg reader.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from pyiceberg.io.pyarrow import PyArrowFileIO

from ports import free_port
from server_processes import stop_process_group, wait_until_serving

AZURITE_VERSION = "3.37.0"
ACCOUNT = "devstoreaccount1"
#: The emulator's published development key (the same in every Azurite), not a secret.
ACCOUNT_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
HOST = f"{ACCOUNT}.dfs.core.windows.net"
CONTAINER = "warehouse"
_MISSING = (f"Azurite is not installed: run scripts/bootstrap.sh (npm install azurite@{AZURITE_VERSION} into the "
            "tools cache; it needs Node.js and npm).")


def azurite_binary() -> str | None:
    """Azurite's blob service from the tools cache, else ``azurite-blob`` on PATH (with node to run it)."""
    if not shutil.which("node"):
        return None
    tools = Path(os.environ.get("LAKE_TOOLS", Path.home() / ".cache" / "airflow-lake-provider" / "tools"))
    binary = tools / f"azurite-{AZURITE_VERSION}" / "node_modules" / ".bin" / "azurite-blob"
    return str(binary) if binary.is_file() else shutil.which("azurite-blob")


class AbfsPyArrowFileIO(PyArrowFileIO):
    """PyArrowFileIO that names ``abfs[s]://container@host/path`` by ``container/path``, as pyarrow does."""

    @staticmethod
    def parse_location(location, properties=None):  # noqa: ANN001, ANN205 - PyArrowFileIO's signature
        scheme, netloc, path = PyArrowFileIO.parse_location(location, *([properties] if properties else []))
        if scheme in ("abfs", "abfss") and "@" in netloc:
            container = netloc.split("@", 1)[0]
            path = f"{container}{path[len(netloc):]}"
        return scheme, netloc, path


@dataclass
class Azurite:
    """A running Azurite blob service with a container ``warehouse`` in the account ``devstoreaccount1``."""

    root: Path
    port: int
    process: subprocess.Popen | None = field(default=None, repr=False)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}/{ACCOUNT}"

    @property
    def log(self) -> Path:
        return self.root / "azurite.log"

    def adls_properties(self) -> dict[str, str]:
        """The connection's ``properties``, both engines' names: Iceberg's ADLSFileIO (the endpoint per account
        host, the shared key) and PyIceberg's PyArrowFileIO (account, key, authorities, schemes)."""
        authority = f"127.0.0.1:{self.port}"
        return {
            f"adls.connection-string.{HOST}": self.endpoint,
            "adls.auth.shared-key.account.name": ACCOUNT,
            "adls.auth.shared-key.account.key": ACCOUNT_KEY,
            "py-io-impl": f"{AbfsPyArrowFileIO.__module__}.{AbfsPyArrowFileIO.__name__}",
            "adls.account-name": ACCOUNT,
            "adls.account-key": ACCOUNT_KEY,
            "adls.blob-storage-authority": authority,
            "adls.dfs-storage-authority": authority,
            "adls.blob-storage-scheme": "http",
            "adls.dfs-storage-scheme": "http",
        }

    def sql_connection(self, catalog_uri: str, prefix: str, *, catalog_name: str = "lake") -> dict:
        """An ``iceberg_lake`` connection: SQL catalog at ``catalog_uri``, warehouse
        ``abfs://warehouse@devstoreaccount1.dfs.core.windows.net/<prefix>``."""
        return {
            "conn_type": "iceberg_lake",
            "host": catalog_uri,
            "extra": {"catalog_kind": "sql", "catalog_name": catalog_name,
                      "warehouse": f"abfs://{CONTAINER}@{HOST}/{prefix.strip('/')}",
                      "properties": self.adls_properties()},
        }

    def filesystem(self):
        """A pyarrow Azure file system on this server, for reading files in tests."""
        from pyarrow import fs

        authority = f"127.0.0.1:{self.port}"
        return fs.AzureFileSystem(account_name=ACCOUNT, account_key=ACCOUNT_KEY, blob_storage_authority=authority,
                                  dfs_storage_authority=authority, blob_storage_scheme="http",
                                  dfs_storage_scheme="http")

    # -- life cycle -------------------------------------------------------------------------
    @classmethod
    def launch(cls, root: Path) -> Azurite:
        binary = azurite_binary()
        if binary is None:
            raise FileNotFoundError(_MISSING)
        root.mkdir(parents=True, exist_ok=True)
        server = cls(root=root, port=free_port())
        argv = [binary, "--blobHost", "127.0.0.1", "--blobPort", str(server.port), "--inMemoryPersistence",
                "--skipApiVersionCheck", "--loose", "--disableTelemetry", "--silent"]
        with open(server.log, "wb") as log:
            server.process = subprocess.Popen(argv, cwd=root, stdout=log, stderr=subprocess.STDOUT,
                                              stdin=subprocess.DEVNULL, start_new_session=True)
        wait_until_serving(server._answers, processes=[server.process], timeout=30, what="Azurite",
                           log=lambda: server.log.read_text()[-3000:], stop=server.stop)
        server.filesystem().create_dir(CONTAINER)
        return server

    def _answers(self) -> bool:
        try:
            urllib.request.urlopen(f"{self.endpoint}?comp=list", timeout=2).close()
        except urllib.error.HTTPError:  # any answer (unsigned: 403) means it serves
            pass
        return True

    def stop(self) -> None:
        stop_process_group(self.process, grace=5)


@pytest.fixture(scope="session")
def azurite_server():
    """One Azurite for the test session, stopped and deleted at the end."""
    if azurite_binary() is None:
        pytest.skip(_MISSING)
    server = Azurite.launch(Path(tempfile.mkdtemp(prefix="lake-azurite-")))
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(server.root, ignore_errors=True)
