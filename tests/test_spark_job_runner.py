"""The job runner: real spark-submit, JSON in and out, readable failures, kills that kill."""

from __future__ import annotations

import threading
import time

import psutil
import pytest

from airflow_lake_provider import class_archive
from airflow_lake_provider.exceptions import LakeConfigError, LakeJobError
from airflow_lake_provider.hooks.spark_job import LakeSparkJobHook
from airflow_lake_provider.core.spark_settings import SparkSettings
from airflow_lake_provider.core.contracts import SparkPlanJobResult, SqlJobArgs
from airflow_lake_provider.core.job_registry import job_named

from lake_checks import job_processes

pytestmark = pytest.mark.spark_submit


def test_runs_a_pyspark_application_and_returns_its_json_result(lake_hook, namespace, tmp_path):
    # The JVM's class-loading log tells where each class came from: the class archive bootstrap built, or a jar.
    class_log = tmp_path / "classes.log"
    job = LakeSparkJobHook(lake_hook=lake_hook, settings=SparkSettings(
        spark_conf={"spark.driver.extraJavaOptions": f"-Xlog:class+load=info:file={class_log}"}))
    result = job.run(SqlJobArgs(statements=[
            f"CREATE TABLE lake.{namespace}.t (id BIGINT, day DATE) USING iceberg PARTITIONED BY (day)",
            f"INSERT INTO lake.{namespace}.t VALUES (1, DATE '2026-01-01'), (2, DATE '2026-01-02')",
            f"SELECT id, CAST(day AS STRING) AS day FROM lake.{namespace}.t ORDER BY id",
        ]),
    )
    assert result.to_json() == {
        "columns": ["id", "day"],
        "rows": [{"id": 1, "day": "2026-01-01"}, {"id": 2, "day": "2026-01-02"}],
        "statements": 3,
        "truncated": False,
    }
    # The table the job created is there for the PyIceberg face, with the job's commit.
    table = lake_hook.load_table(f"{namespace}.t")
    assert len(table.scan().to_arrow()) == 2 and table.current_snapshot() is not None
    assert job._submit_hook._connection["master"] == "local[*]"
    # The driver mapped Spark's and Iceberg's classes from the class archive instead of parsing them from jars.
    archive = class_archive.archive_for_driver()
    assert archive is not None, "bootstrap builds the class archive (python -m airflow_lake_provider.class_archive build)"
    loaded = class_log.read_text()
    shared = [line for line in loaded.splitlines() if "shared objects file (top)" in line]
    assert any(" org.apache.spark.sql.SparkSession " in line for line in shared), loaded[-2000:]
    assert any(" org.apache.iceberg.spark.SparkCatalog " in line for line in shared), loaded[-2000:]


def test_a_failing_application_surfaces_icebergs_error(lake_hook, namespace):
    job = LakeSparkJobHook(lake_hook=lake_hook)
    with pytest.raises(LakeJobError) as caught:
        job.run(SqlJobArgs(statements=[f"CALL lake.system.rewrite_data_files(table => '{namespace}.missing')"]))
    message = str(caught.value)
    assert message.startswith("Spark job 'sql' failed: ")
    assert "NoSuchTableException" in caught.value.error_class
    assert f"{namespace}.missing" in message and "cannot be found" in message


def test_unknown_job_and_unserialisable_args_fail_before_spark(lake_hook):
    job = LakeSparkJobHook(lake_hook=lake_hook)
    with pytest.raises(LakeConfigError, match="Unknown job 'drop_everything'"):
        job_named("drop_everything")
    with pytest.raises(LakeConfigError, match="is no job's arguments"):
        job.run(SparkPlanJobResult())
    with pytest.raises(LakeConfigError, match="each a non-empty string"):
        job.run(SqlJobArgs(statements=[object()]))
    assert job._submit_hook is None


def test_cluster_mode_requires_a_shared_result_location(lake_hook, monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_YARN", '{"conn_type": "spark", "host": "yarn"}')
    job = LakeSparkJobHook(lake_hook=lake_hook, settings=SparkSettings(spark_conn_id="spark_yarn", deploy_mode="cluster"))
    with pytest.raises(LakeConfigError, match="result_location"):
        job.run(SqlJobArgs(statements=["SELECT 1"]))
    assert job._submit_hook is None


def test_result_location_directory_is_honoured(lake_hook, tmp_path):
    """The cluster-mode path for results (a shared directory), exercised in client mode."""
    job = LakeSparkJobHook(lake_hook=lake_hook, settings=SparkSettings(result_location=f"file://{tmp_path}"))
    assert job.run(SqlJobArgs(statements=["SELECT 41 + 1 AS answer"])).rows == [{"answer": 42}]


def test_killing_the_task_kills_the_spark_application(lake_hook):
    job = LakeSparkJobHook(lake_hook=lake_hook)
    outcome: dict[str, BaseException] = {}

    def run() -> None:
        try:
            # Long enough to still be running when killed (minutes on two cores).
            job.run(SqlJobArgs(statements=["SELECT count(*) FROM range(0, 50000000000, 1, 2) WHERE id % 7 = 3"]))
        except BaseException as error:  # noqa: BLE001
            outcome["error"] = error

    thread = threading.Thread(target=run)
    thread.start()
    deadline = time.monotonic() + 120
    python_driver: list[psutil.Process] = []
    while time.monotonic() < deadline and not python_driver:
        time.sleep(0.5)
        hook = job._submit_hook
        if hook is not None:  # this job's own spec path: other runs on the machine have theirs
            python_driver = job_processes(hook._application_args[0], drivers_only=True)
    assert python_driver, "the PySpark driver never started"
    submit_process = job._submit_hook._submit_sp
    job.on_kill()
    thread.join(timeout=60)
    assert not thread.is_alive()
    assert isinstance(outcome.get("error"), LakeJobError) and "was killed" in str(outcome["error"])
    assert submit_process.poll() is not None
    gone, alive = psutil.wait_procs(python_driver, timeout=30)
    assert not alive, f"driver processes survived the kill: {alive}"
