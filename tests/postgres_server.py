"""A throwaway PostgreSQL server for the tests: 127.0.0.1, a free port, a temp directory.

The server refuses to run as root, so when the tests run as root the data directory is
handed to the ``postgres`` OS user and every server command runs through ``runuser``.
Password authentication is on for TCP (scram-sha-256), so the catalog's Login/Password
fields are exercised for real. Import the ``postgres_server`` fixture into a test module.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from ports import free_port

SUPERUSER = "postgres"
CATALOG_USER = "lake_catalog"
CATALOG_PASSWORD = "catalog-pw-" + uuid.uuid4().hex[:8]


def _bin_dir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(found[-1]).parent if found else None


@dataclass
class PostgresServer:
    root: Path
    bin_dir: Path
    port: int
    os_user: str | None  # run server commands as this user (None: as ourselves)

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    def _cmd(self, *args: str) -> list[str]:
        return ["runuser", "-u", self.os_user, "--", *args] if self.os_user else list(args)

    def _run(self, *args: str) -> str:
        done = subprocess.run(self._cmd(*args), capture_output=True, text=True, cwd=self.root, timeout=120)
        if done.returncode:
            raise RuntimeError(f"{' '.join(args)} failed ({done.returncode}): {done.stderr or done.stdout}")
        return done.stdout

    def start(self) -> None:
        self._run(str(self.bin_dir / "initdb"), "-D", str(self.data_dir), "-U", SUPERUSER, "--auth-local=trust",
                  "--auth-host=scram-sha-256", "-E", "UTF8", "--no-sync")
        options = (f"-c listen_addresses=127.0.0.1 -c port={self.port} -c unix_socket_directories={self.root} "
                   "-c fsync=off -c full_page_writes=off -c max_connections=100")
        self._run(str(self.bin_dir / "pg_ctl"), "-D", str(self.data_dir), "-l", str(self.root / "server.log"),
                  "-o", options, "-w", "-t", "60", "start")
        self.psql(f"CREATE ROLE {CATALOG_USER} LOGIN PASSWORD '{CATALOG_PASSWORD}'")

    def stop(self) -> None:
        try:
            self._run(str(self.bin_dir / "pg_ctl"), "-D", str(self.data_dir), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def psql(self, sql: str, database: str = "postgres") -> str:
        return self._run(str(self.bin_dir / "psql"), "-h", str(self.root), "-p", str(self.port), "-U", SUPERUSER,
                         "-d", database, "-v", "ON_ERROR_STOP=1", "-qAt", "-c", sql)

    def create_database(self, name: str | None = None) -> str:
        """A fresh database owned by the catalog user; returns its name."""
        name = name or f"lake_{uuid.uuid4().hex[:8]}"
        self.psql(f"CREATE DATABASE {name} OWNER {CATALOG_USER}")
        return name

    def uri(self, database: str) -> str:
        return f"postgresql://127.0.0.1:{self.port}/{database}"

    def connection(self, database: str, warehouse: Path, catalog_name: str = "lake") -> dict:
        """An ``iceberg_lake`` Airflow connection (the AIRFLOW_CONN_* JSON form) on ``database``."""
        return {
            "conn_type": "iceberg_lake",
            "host": self.uri(database),
            "login": CATALOG_USER,
            "password": CATALOG_PASSWORD,
            "extra": {"catalog_kind": "sql", "catalog_name": catalog_name, "warehouse": f"file://{warehouse}"},
        }


@pytest.fixture(scope="session")
def postgres_server():
    """One PostgreSQL server for the test session, stopped and deleted at the end."""
    bin_dir = _bin_dir()
    if bin_dir is None:
        pytest.skip("PostgreSQL is not installed (Debian package 'postgresql'); run scripts/bootstrap.sh.")
    root = Path(tempfile.mkdtemp(prefix="lake-pg-"))
    os_user = None
    if os.geteuid() == 0:
        os_user = SUPERUSER
        entry = pwd.getpwnam(os_user)
        os.chown(root, entry.pw_uid, entry.pw_gid)
    server = PostgresServer(root=root, bin_dir=bin_dir, port=free_port(), os_user=os_user)
    server.start()
    try:
        yield server
    finally:
        server.stop()
