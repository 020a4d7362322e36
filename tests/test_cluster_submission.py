"""What the job hook hands spark-submit for a cluster, read from the command SparkSubmitHook builds.

No JVM: ``LakeSparkJobHook.prepare`` writes the spec and builds the call, and the command line
is SparkSubmitHook's own ``_build_spark_submit_command``. Refusals are checked through
``run``: they must come before anything is submitted.
"""

from __future__ import annotations

import importlib.util
import json
import os
import stat
import sys
from pathlib import Path

import pytest

from airflow_lake_provider.exceptions import LakeConfigError
from airflow_lake_provider.hooks.lake import IcebergLakeHook
from airflow_lake_provider.hooks.spark_job import LakeSparkJobHook, Submission
from airflow_lake_provider.core.spark_settings import SparkSettings
from airflow_lake_provider.core.contracts import SqlJobArgs

SECRET = "s3-secret-9f1c2e"


def _spark_connection(monkeypatch, conn_id: str, host: str, port: int | None = None, **extra) -> None:
    conn = {"conn_type": "spark", "host": host, "extra": extra}
    if port:
        conn["port"] = port
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(conn))


def _lake_connection(monkeypatch, tmp_path: Path, conn_id: str = "lake_cluster", **extra) -> IcebergLakeHook:
    fields = {"conn_type": "iceberg_lake", "host": f"sqlite:///{tmp_path}/catalog.db",
              "extra": {"warehouse": f"file://{tmp_path}/warehouse", **extra}}
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(fields))
    return IcebergLakeHook(conn_id)


def _prepare(job_hook: LakeSparkJobHook, tmp_path: Path) -> tuple[Submission, list[str]]:
    work_dir = tmp_path / "work"
    work_dir.mkdir(parents=True, exist_ok=True)
    submission = job_hook.prepare(SqlJobArgs(statements=["SELECT 1"]), job_hook.resolve_target(), work_dir)
    return submission, submission.command()


def _confs(command: list[str]) -> dict[str, str]:
    pairs = [command[i + 1] for i, arg in enumerate(command) if arg == "--conf"]
    return dict(pair.split("=", 1) for pair in pairs)


def _flag(command: list[str], flag: str) -> str | None:
    return command[command.index(flag) + 1] if flag in command else None


def test_deploy_mode_comes_from_the_connection_and_the_operator_overrides_it(monkeypatch, tmp_path, lake_hook):
    _spark_connection(monkeypatch, "spark_yarn", "yarn", **{"deploy-mode": "cluster", "queue": "maintenance"})
    job = LakeSparkJobHook(lake_hook=lake_hook, settings=SparkSettings(spark_conn_id="spark_yarn", result_location="hdfs://nn/tmp/lake-results"))
    submission, command = _prepare(job, tmp_path)
    assert submission.target.deploy_mode == "cluster"
    assert _flag(command, "--master") == "yarn" and _flag(command, "--deploy-mode") == "cluster"
    assert _flag(command, "--queue") == "maintenance"
    # The driver runs on the cluster: the spec and the driver's log configuration travel with
    # --files into its working directory, where the application finds the spec by its name.
    shipped = _flag(command, "--files").split(",")
    assert [Path(f).name for f in shipped] == ["spec.json", "log4j2.properties"]
    assert command[-1] == "spec.json"
    assert _confs(command)["spark.driver.extraJavaOptions"] == "-Dlog4j.configurationFile=log4j2.properties"
    assert submission.result_location.startswith("hdfs://nn/tmp/lake-results/sql-")
    # No local path of this machine reaches the remote driver as its warehouse directory.
    assert "spark.sql.warehouse.dir" not in _confs(command)

    job = LakeSparkJobHook(lake_hook=lake_hook, settings=SparkSettings(spark_conn_id="spark_yarn", deploy_mode="client"))
    submission, command = _prepare(job, tmp_path / "client")
    assert submission.target.deploy_mode == "client" and _flag(command, "--deploy-mode") == "client"
    assert "--files" not in command and command[-1] == str(submission.spec_path)


def test_launch_settings_of_the_connection_reach_spark_submit_and_secrets_do_not(monkeypatch, tmp_path):
    lake = _lake_connection(monkeypatch, tmp_path, spark_conf={
        "spark.executor.memory": "2g", "spark.cores.max": "1", "spark.executor.instances": "2",
        "spark.jars.packages": "org.example:lake-extra:1.0",
        "spark.hadoop.fs.s3a.endpoint": "http://127.0.0.1:9000",
        "spark.hadoop.fs.s3a.secret.key": SECRET,
    })
    _spark_connection(monkeypatch, "spark_standalone", "spark://10.0.0.5", 7077)
    job = LakeSparkJobHook(lake_hook=lake, settings=SparkSettings(spark_conn_id="spark_standalone", spark_conf={"spark.executor.memory": "3g"}))
    submission, command = _prepare(job, tmp_path)
    confs = _confs(command)
    assert _flag(command, "--master") == "spark://10.0.0.5:7077"
    # The operator's value wins over the connection's; the cluster manager reads them at launch.
    assert confs["spark.executor.memory"] == "3g"
    assert confs["spark.cores.max"] == "1" and confs["spark.executor.instances"] == "2"
    assert confs["spark.hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:9000"
    # spark-submit ignores spark.jars.packages when --packages is given: merged into the flag.
    assert "spark.jars.packages" not in confs and "org.example:lake-extra:1.0" in _flag(command, "--packages")
    assert SECRET not in " ".join(command)
    assert SECRET not in json.dumps(submission.environment())

    spec = json.loads(submission.spec_path.read_text())
    assert stat.S_IMODE(os.stat(submission.spec_path).st_mode) == 0o600
    assert spec["session_conf"]["spark.hadoop.fs.s3a.secret.key"] == SECRET
    # A launch setting is set once: a session value would undo the operator's override.
    assert "spark.executor.memory" not in spec["session_conf"]
    assert spec["session_conf"]["spark.sql.catalog.lake.type"] == "jdbc"


def test_own_session_extensions_replace_icebergs_on_the_command_line(tmp_path, lake_hook):
    extensions = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions,com.example.Audit"
    job = LakeSparkJobHook(lake_hook=lake_hook, settings=SparkSettings(spark_conf={"spark.sql.extensions": extensions}))
    submission, command = _prepare(job, tmp_path)
    assert _confs(command)["spark.sql.extensions"] == extensions
    assert "spark.sql.extensions" not in json.loads(submission.spec_path.read_text())["session_conf"]


def test_no_python_or_path_of_this_worker_is_sent_to_a_cluster(monkeypatch, tmp_path, lake_hook):
    _spark_connection(monkeypatch, "spark_standalone", "spark://10.0.0.5", 7077)
    job = LakeSparkJobHook(lake_hook=lake_hook, settings=SparkSettings(spark_conn_id="spark_standalone"))
    submission, command = _prepare(job, tmp_path)
    env = submission.environment()
    # Executors on other hosts choose their own Python: nothing names this interpreter for them.
    assert "PYSPARK_PYTHON" not in env and "SPARK_LOCAL_IP" not in env
    assert not [c for c in _confs(command) if c.startswith("spark.pyspark") or "Env." in c]
    # The driver runs here (client mode), with this interpreter; PATH finds this spark-submit.
    assert env["PYSPARK_DRIVER_PYTHON"] == (os.environ.get("PYSPARK_DRIVER_PYTHON") or sys.executable)
    assert env["PATH"].split(os.pathsep)[0] == str(Path(sys.executable).parent)

    # Naming the executors' Python (the documented way) keeps the driver on this one: Spark
    # would otherwise run spark.pyspark.python for the driver too, a path of the cluster's hosts.
    job = LakeSparkJobHook(lake_hook=lake_hook, settings=SparkSettings(spark_conn_id="spark_standalone",
                           spark_conf={"spark.pyspark.python": "/opt/cluster/python3"}))
    _, command = _prepare(job, tmp_path / "named")
    confs = _confs(command)
    assert confs["spark.pyspark.python"] == "/opt/cluster/python3"
    assert confs["spark.pyspark.driver.python"] == (os.environ.get("PYSPARK_DRIVER_PYTHON") or sys.executable)


def test_yarn_gets_the_users_env_vars_but_not_this_workers_path(monkeypatch, tmp_path, lake_hook):
    _spark_connection(monkeypatch, "spark_yarn", "yarn")
    job = LakeSparkJobHook(lake_hook=lake_hook, settings=SparkSettings(spark_conn_id="spark_yarn", env_vars={"LAKE_TEAM": "data"}))
    submission, command = _prepare(job, tmp_path)
    confs = _confs(command)
    assert confs["spark.yarn.appMasterEnv.LAKE_TEAM"] == "data"
    assert not [c for c in confs if c.startswith("spark.yarn.appMasterEnv.") and c != "spark.yarn.appMasterEnv.LAKE_TEAM"]
    assert "PYSPARK_PYTHON" not in submission.environment()


def test_local_masters_keep_this_interpreter_and_loopback(tmp_path, lake_hook):
    job = LakeSparkJobHook(lake_hook=lake_hook, settings=SparkSettings(spark_conn_id="no_such_spark_connection"))
    submission, command = _prepare(job, tmp_path)
    env = submission.environment()
    assert _flag(command, "--master") == "local[*]" and _flag(command, "--deploy-mode") == "client"
    assert env["SPARK_LOCAL_IP"] == "127.0.0.1"
    assert env["PYSPARK_PYTHON"] == (os.environ.get("PYSPARK_PYTHON") or sys.executable)
    assert _confs(command)["spark.driver.host"] == "127.0.0.1"


@pytest.mark.parametrize("master,port", [("local[*]", None), ("spark://10.0.0.5", 7077)])
def test_task_logs_are_quiet_on_every_master(monkeypatch, tmp_path, lake_hook, master, port):
    _spark_connection(monkeypatch, "spark_any", master, port)
    submission, _ = _prepare(LakeSparkJobHook(lake_hook=lake_hook, settings=SparkSettings(spark_conn_id="spark_any")), tmp_path)
    options = submission.environment()["SPARK_SUBMIT_OPTS"]
    config = Path(options.split("-Dlog4j.configurationFile=file:", 1)[1].split()[0])
    assert "rootLogger.level = warn" in config.read_text()


def test_the_submitting_client_in_cluster_mode_keeps_the_lines_spark_submit_hook_tracks(monkeypatch, tmp_path, lake_hook):
    _spark_connection(monkeypatch, "spark_yarn", "yarn", **{"deploy-mode": "cluster"})
    job = LakeSparkJobHook(lake_hook=lake_hook, settings=SparkSettings(spark_conn_id="spark_yarn", result_location="hdfs://nn/tmp/r"))
    submission, _ = _prepare(job, tmp_path)
    options = submission.environment()["SPARK_SUBMIT_OPTS"]
    config = Path(options.split("-Dlog4j.configurationFile=file:", 1)[1].split()[0]).read_text()
    # The YARN application id (for on_kill) is logged at INFO by org.apache.spark.deploy.yarn.Client.
    assert "rootLogger.level = warn" in config and "logger.deploy.name = org.apache.spark.deploy" in config


def test_iceberg_runtime_provided_by_the_image_ships_no_runtime_jar(monkeypatch, tmp_path):
    from airflow_lake_provider.jars import jar_file_name, spark_line

    lake = _lake_connection(monkeypatch, tmp_path, iceberg_runtime_provided=True)
    _spark_connection(monkeypatch, "spark_standalone", "spark://10.0.0.5", 7077)
    _, command = _prepare(LakeSparkJobHook(lake_hook=lake, settings=SparkSettings(spark_conn_id="spark_standalone")), tmp_path)
    jars = [Path(j).name for j in _flag(command, "--jars").split(",")]
    assert jars == ["sqlite-jdbc.jar"]  # the catalog's JDBC driver still travels
    # The operator's argument overrides the connection.
    job = LakeSparkJobHook(lake_hook=lake, settings=SparkSettings(spark_conn_id="spark_standalone", iceberg_runtime_provided=False))
    _, command = _prepare(job, tmp_path / "shipped")
    runtime = jar_file_name(spark_line().iceberg_runtime)  # the installed Spark line's, from the jar cache
    assert runtime in [Path(j).name for j in _flag(command, "--jars").split(",")]


@pytest.mark.parametrize(
    "host,port,extra,hook_args,message",
    [
        ("local[*]", None, {}, {"deploy_mode": "cluster"}, "has no cluster deploy mode"),
        ("local[2]", None, {"deploy-mode": "cluster"}, {}, "has no cluster deploy mode"),
        ("spark://10.0.0.5", 7077, {"deploy-mode": "cluster"}, {"result_location": "hdfs://nn/r"},
         "cannot run Python applications in cluster deploy mode"),
        ("yarn", None, {"deploy-mode": "cluster"}, {}, "set result_location"),
        ("yarn", None, {"deploy-mode": "clustre"}, {}, "'clustre' .*must be 'client' or 'cluster'"),
        ("yarn", None, {}, {"spark_conf": {"spark.submit.deployMode": "cluster"}}, "cannot set spark.submit.deployMode"),
        ("k8s://https://10.0.0.9", 6443, {}, {}, "apache-airflow-providers-cncf-kubernetes"),
    ],
)
def test_what_spark_cannot_do_is_refused_before_spark_submit(monkeypatch, lake_hook, bad_input, host, port, extra,
                                                            hook_args, message):
    if host.startswith("k8s") and importlib.util.find_spec("airflow.providers.cncf") is not None:
        pytest.skip("the Kubernetes provider is installed here: SparkSubmitHook accepts k8s:// masters")
    _spark_connection(monkeypatch, "spark_refused", host, port, **extra)
    job = LakeSparkJobHook(lake_hook=lake_hook, settings=SparkSettings(spark_conn_id="spark_refused", **hook_args))
    with pytest.raises(LakeConfigError, match=message) as raised:
        job.run(SqlJobArgs(statements=["SELECT 1"]))
    assert job._submit_hook is None  # nothing was submitted: no JVM started
    bad_input("Spark connection / deploy mode", f"master {host}{':' + str(port) if port else ''}, extra {extra}, {hook_args}",
              raised.value)


def test_env_vars_reach_spark_submit_with_this_hooks_own_environment(tmp_path, lake_hook):
    job = LakeSparkJobHook(lake_hook=lake_hook, settings=SparkSettings(spark_conn_id="no_such_spark_connection", env_vars={"LAKE_TEAM": "data"}))
    submission, command = _prepare(job, tmp_path)
    env = submission.environment()
    assert env["LAKE_TEAM"] == "data" and env["SPARK_LOCAL_IP"] == "127.0.0.1" and "SPARK_SUBMIT_OPTS" in env
    assert not [c for c in _confs(command) if "Env." in c]


def test_env_vars_are_placed_where_spark_submit_hook_places_them():
    from airflow_lake_provider.hooks.spark_job import SparkTarget, place_env_vars

    own, user = {"PATH": "/here"}, {"LAKE_TEAM": "data"}
    yarn = place_env_vars(SparkTarget("yarn", "cluster"), user, own)
    assert yarn.conf == {"spark.yarn.appMasterEnv.LAKE_TEAM": "data"} and yarn.submit_hook_env_vars is None
    assert yarn.process_env == {"PATH": "/here", "LAKE_TEAM": "data"}
    k8s = place_env_vars(SparkTarget("k8s://https://10.0.0.9:6443", "cluster"), user, own)
    assert k8s.conf == {} and k8s.submit_hook_env_vars == user and k8s.process_env == own  # the driver's, not ours
    standalone = place_env_vars(SparkTarget("spark://10.0.0.5:7077", "client"), user, own)
    assert standalone.conf == {} and standalone.submit_hook_env_vars is None and standalone.process_env["LAKE_TEAM"] == "data"
    assert place_env_vars(SparkTarget("local[*]", "client"), {}, own).process_env == own


def test_a_driver_in_the_task_maps_the_class_archive_and_a_cluster_driver_does_not(monkeypatch, tmp_path, lake_hook):
    from airflow_lake_provider import class_archive

    archive = tmp_path / "classes.jsa"
    archive.write_bytes(b"")
    monkeypatch.setattr(class_archive, "archive_path", lambda: archive)
    local, _ = _prepare(LakeSparkJobHook(lake_hook=lake_hook, settings=SparkSettings(spark_conn_id="no_such_spark_connection")), tmp_path)
    assert f"-XX:SharedArchiveFile={archive}" in local.environment()["SPARK_SUBMIT_OPTS"].split()
    _spark_connection(monkeypatch, "spark_yarn", "yarn", **{"deploy-mode": "cluster"})
    cluster, _ = _prepare(LakeSparkJobHook(lake_hook=lake_hook, settings=SparkSettings(spark_conn_id="spark_yarn",
                                           result_location="hdfs://nn/tmp/r")), tmp_path / "cluster")
    assert "SharedArchiveFile" not in cluster.environment()["SPARK_SUBMIT_OPTS"]
    # None built for this Spark and Java: nothing is added, the job starts as it would without the feature.
    archive.unlink()
    bare, _ = _prepare(LakeSparkJobHook(lake_hook=lake_hook, settings=SparkSettings(spark_conn_id="no_such_spark_connection")), tmp_path / "bare")
    assert "SharedArchiveFile" not in bare.environment()["SPARK_SUBMIT_OPTS"]


def test_launch_hints_come_from_the_job_registry_and_never_slow_a_rewrite_that_may_run_spark(
        tmp_path, lake_hook, monkeypatch):
    import dataclasses

    from airflow_lake_provider.core import job_registry
    from airflow_lake_provider.core.contracts import RewriteJobArgs
    from airflow_lake_provider.hooks.spark_job import SparkTarget

    job = LakeSparkJobHook(lake_hook=lake_hook, settings=SparkSettings(spark_conn_id="no_such_spark_connection"))
    first_tier = "-XX:TieredStopAtLevel=1"

    def prepared(args, name: str, target: SparkTarget | None = None) -> tuple[list[str], bool]:
        (tmp_path / name).mkdir()
        submission = job.prepare(args, target or job.resolve_target(), tmp_path / name)
        spec = json.loads(submission.spec_path.read_text())
        return submission.environment()["SPARK_SUBMIT_OPTS"].split(), spec["defer_spark_session"]

    # The worker expects Arrow: Spark starts only if the job uses it, but the JVM keeps both JIT tiers,
    # since the job may still hand the work to Iceberg's Spark action in it.
    arrow = RewriteJobArgs(table="db.t", arrow_expected=True)
    options, deferred = prepared(arrow, "arrow")
    assert deferred and first_tier not in options
    for args, name in ((RewriteJobArgs(table="db.t"), "iceberg"), (SqlJobArgs(statements=["SELECT 1"]), "sql")):
        options, deferred = prepared(args, name)
        assert first_tier not in options and not deferred, name
    # A driver on the cluster starts Spark at once: YARN fails an application that starts no SparkContext.
    options, deferred = prepared(arrow, "yarn-cluster", SparkTarget(master="yarn", deploy_mode="cluster"))
    assert not deferred
    # A job's own Java options (from its registry entry) reach a driver started here, never a cluster's.
    hinted = job_registry.LaunchHints(java_options=("-Dlake.hint=1",))
    monkeypatch.setitem(job_registry._BY_ARGS, SqlJobArgs,
                        dataclasses.replace(job_registry.JOBS["sql"], launch=lambda args: hinted))
    options, _ = prepared(SqlJobArgs(statements=["SELECT 1"]), "sql-hinted")
    assert "-Dlake.hint=1" in options
    options, _ = prepared(SqlJobArgs(statements=["SELECT 1"]), "sql-cluster",
                          SparkTarget(master="yarn", deploy_mode="cluster"))
    assert "-Dlake.hint=1" not in options


def test_the_class_archive_is_named_by_the_spark_installation_and_the_java(monkeypatch, tmp_path):
    from airflow_lake_provider import class_archive

    def fake_spark(name: str, jars: list[str]) -> Path:
        home = tmp_path / name
        (home / "jars").mkdir(parents=True)
        for jar in jars:
            (home / "jars" / jar).write_bytes(b"")
        return home

    monkeypatch.setenv("SPARK_HOME", str(fake_spark("spark-a", ["spark-core_2.13-4.1.3.jar"])))
    first = class_archive.archive_path()
    assert first is not None and first.parent.name == "class-archives" and class_archive.archive_for_driver() is None
    monkeypatch.setenv("SPARK_HOME", str(fake_spark("spark-b", ["spark-core_2.13-4.1.2.jar"])))
    assert class_archive.archive_path() != first
    # The same Spark installed again at the same path (a venv made anew): the JVM would refuse the old
    # archive (its jars changed), so the name changes, and a build's cleanup drops the old one.
    reinstalled = Path(os.environ["SPARK_HOME"]) / "jars" / "spark-core_2.13-4.1.2.jar"
    before = class_archive.archive_path()
    reinstalled.write_bytes(b"another build")
    after = class_archive.archive_path()
    assert after not in (before, None)
    directory = tmp_path / "class-archives"
    directory.mkdir()
    stale, current, gone = (directory / f"{name}.jsa" for name in ("stale", "current", "gone"))
    for archive, home in ((stale, os.environ["SPARK_HOME"]), (current, os.environ["SPARK_HOME"]),
                          (gone, str(tmp_path / "deleted-venv"))):
        archive.write_bytes(b"")
        archive.with_suffix(".home").write_text(home)
    class_archive._remove_orphaned_archives(current, Path(os.environ["SPARK_HOME"]))
    assert sorted(path.name for path in directory.iterdir()) == ["current.home", "current.jsa"]
    java = tmp_path / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text("#!/bin/sh\n")
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk"))
    other_java = class_archive.archive_path()
    assert other_java not in (first, None)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk"))
    assert class_archive.archive_path() is None  # no java: no archive to name


def test_the_log_names_only_the_coordinates_the_provider_left_to_spark(monkeypatch, tmp_path, capfd):
    """Coordinates the connection names are the user's own; the log line about resolution at submit time
    lists what the provider added and found no cached jar for."""
    monkeypatch.setenv("LAKE_JAR_CACHE", str(tmp_path / "empty-cache"))
    hook = _lake_connection(monkeypatch, tmp_path, spark_packages=["org.example:own-udfs:1.0"])
    capfd.readouterr()
    submission, command = _prepare(LakeSparkJobHook(lake_hook=hook, settings=SparkSettings(spark_conn_id="no_such_spark_connection")), tmp_path)
    assert "org.example:own-udfs:1.0" in _flag(command, "--packages")  # still resolved by Spark, as named
    captured = capfd.readouterr()
    [line] = [text for text in (captured.out + captured.err).splitlines() if "at submit time" in text]
    assert "iceberg-spark-runtime" in line and "own-udfs" not in line
