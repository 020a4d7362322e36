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
from postgres_server import CATALOG_PASSWORD, CATALOG_USER, postgres_server  # noqa: F401 - a session fixture

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
os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"

OUTPUT_DIR = REPO / "test-output"
# py4j logs from __del__ at interpreter exit, after pytest closed its streams.
logging.getLogger("py4j").setLevel(logging.WARNING)


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
    from airflow_lake_provider.jars import resolve_jars

    # The PostgreSQL driver too, so tests can register a PostgreSQL catalog in this session.
    jars = list(dict.fromkeys([*lake_hook.spark_jars(), *resolve_jars("postgresql")]))
    session = local_session(
        lake_hook.spark_catalog_conf(),
        jars=jars,
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


def load_dag(file_name: str, dag_id: str):
    """Import a DAG file from the test dags folder and return the DAG object."""
    path = DAGS_FOLDER / file_name
    spec = importlib.util.spec_from_file_location(f"dagfile_{path.stem}_{uuid.uuid4().hex[:6]}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
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
def bad_input():
    """``bad_input(surface, given, error)``: record a bad input tried and the error the user saw."""
    return bad_input_catalogue.record


def pytest_sessionfinish(session, exitstatus):
    """After a full, green run (no -k/-m, default paths), regenerate docs/bad-inputs.md."""
    config = session.config
    full_run = config.args_source == pytest.Config.ArgsSource.TESTPATHS and not config.option.markexpr \
        and not config.option.keyword
    if exitstatus == 0 and full_run and bad_input_catalogue.RECORDED:
        bad_input_catalogue.write_catalogue(REPO / "docs" / "bad-inputs.md")
