"""The catalog hook: connections in, a working PyIceberg catalog out; bad connections fail early."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from airflow_lake_provider.exceptions import LakeConfigError, LakeTableNotFound
from airflow_lake_provider.hooks.lake import IcebergLakeHook
from airflow_lake_provider.hooks.spark_job import LakeSparkJobHook
from airflow_lake_provider.core.contracts import SqlJobArgs


def _set_connection(monkeypatch, conn_id: str, **fields) -> None:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps({"conn_type": "iceberg_lake", **fields}))


def test_default_connection_is_the_embedded_lake(lake_home):
    hook = IcebergLakeHook()
    assert hook.config.uri == f"sqlite:///{lake_home}/catalog.db"
    ok, message = hook.test_connection()
    assert ok, message
    assert message.startswith("Connected to sql catalog 'lake'")
    assert (lake_home / "catalog.db").is_file()


def test_connection_json_format(monkeypatch, tmp_path):
    _set_connection(
        monkeypatch, "my_lake",
        host=f"sqlite:///{tmp_path}/cat.db",
        extra={"catalog_name": "analytics", "catalog_kind": "sql", "warehouse": f"file://{tmp_path}/wh",
               "properties": {"write.format.default": "parquet"}},
    )
    hook = IcebergLakeHook("my_lake")
    assert hook.config.name == "analytics"
    catalog = hook.get_catalog()
    catalog.create_namespace("sales")
    ok, message = hook.test_connection()
    assert ok and "Found 1 namespaces and 0 tables" in message


def test_missing_named_connection(monkeypatch, bad_input):
    with pytest.raises(LakeConfigError, match="Connection 'nope' does not exist") as raised:
        IcebergLakeHook("nope").config
    bad_input("connection", "lake_conn_id='nope' (no such connection)", raised.value)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"host": "http://x", "extra": {"catalog_kind": "glue"}}, "unknown catalog kind 'glue'"),
        ({"host": "sqlite:////tmp/x.db", "extra": {"catalog_kind": "sql"}}, "needs a warehouse"),
        ({"host": "sqlite:////tmp/x.db", "extra": {"warehouse": "file:///tmp/w", "properties": "{not json"}}, "not valid JSON"),
    ],
)
def test_bad_connections_fail_before_spark(monkeypatch, bad_input, fields, message):
    _set_connection(monkeypatch, "bad_lake", **fields)
    job_hook = LakeSparkJobHook(lake_hook=IcebergLakeHook("bad_lake"))
    with pytest.raises(LakeConfigError, match=message) as raised:
        job_hook.run(SqlJobArgs(statements=["SELECT 1"]))
    assert job_hook._submit_hook is None  # nothing was submitted: no JVM started
    bad_input("connection", repr(fields), raised.value)


def test_unreachable_catalog_database_fails_before_spark(monkeypatch, bad_input):
    # Port 9 (discard) on loopback: nothing listens, the connection is refused at once.
    _set_connection(
        monkeypatch, "down_lake", host="postgresql://127.0.0.1:9/lake", login="u", password="pw-unreachable",
        extra={"warehouse": "file:///tmp/wh"},
    )
    hook = IcebergLakeHook("down_lake")
    ok, message = hook.test_connection()
    assert not ok and "127.0.0.1" in message
    job_hook = LakeSparkJobHook(lake_hook=hook)
    with pytest.raises(LakeConfigError, match="Cannot open catalog 'lake'") as raised:
        job_hook.run(SqlJobArgs(statements=["SELECT 1"]))
    assert job_hook._submit_hook is None
    assert "pw-unreachable" not in str(raised.value)
    bad_input("connection", "host='postgresql://127.0.0.1:9/lake' (nothing listens)", raised.value)


def test_unreachable_sqlite_path(monkeypatch):
    _set_connection(monkeypatch, "gone_lake", host="sqlite:////nonexistent/dir/c.db", extra={"warehouse": "file:///tmp/w"})
    with pytest.raises(LakeConfigError, match="Cannot open catalog"):
        IcebergLakeHook("gone_lake").get_catalog()


def test_missing_table_is_named(lake_hook, namespace, bad_input):
    with pytest.raises(LakeTableNotFound, match=f"'{namespace}.ghost' does not exist in catalog 'lake'"):
        lake_hook.load_table(f"{namespace}.ghost")
    with pytest.raises(LakeTableNotFound, match="nowhere") as raised:
        lake_hook.load_table("nowhere.events")
    bad_input("table", "'nowhere.events' (no such namespace)", raised.value)


def test_a_missing_table_on_the_embedded_stand_in_says_the_connection_was_not_found(monkeypatch, tmp_path, lake_home,
                                                                                   bad_input):
    """No connection lake_default where the task runs: the embedded lake stands in (one info line in
    the log), and a table missing from it says so, with how to define the connection."""
    monkeypatch.delenv("AIRFLOW_CONN_LAKE_DEFAULT", raising=False)
    with pytest.raises(LakeTableNotFound) as raised:
        IcebergLakeHook().load_table("sales.orders_missing")
    message = str(raised.value)
    assert message.startswith(
        f"Table 'sales.orders_missing' does not exist in catalog 'lake' (sqlite:///{lake_home}/catalog.db). "
        "No connection 'lake_default' was found, so the embedded lake ($LAKE_HOME) was used instead")
    assert "AIRFLOW_CONN_LAKE_DEFAULT" in message and "Airflow UI" in message and "\n" not in message
    bad_input("table", "'sales.orders_missing' with no connection lake_default (the embedded lake stood in)", raised.value)

    # The connection exists and the table is missing: the sentence as before, nothing about a stand-in.
    _set_connection(monkeypatch, "lake_default", host=f"sqlite:///{tmp_path}/c.db",
                    extra={"warehouse": f"file://{tmp_path}/w"})
    with pytest.raises(LakeTableNotFound) as raised:
        IcebergLakeHook().load_table("sales.orders_missing")
    assert str(raised.value) == f"Table 'sales.orders_missing' does not exist in catalog 'lake' (sqlite:///{tmp_path}/c.db)."


def test_a_glue_catalog_is_refused_with_a_way_out_the_hook_accepts(monkeypatch, bad_input):
    """The refusal of a Glue catalog (the official connection's type, or catalog_kind) describes Glue's
    Iceberg REST endpoint; the connection built from the sentence itself is one the hook opens."""
    import re

    from airflow_lake_provider.catalog_config import config_from_iceberg_connection

    with pytest.raises(LakeConfigError) as official:
        config_from_iceberg_connection("iceberg_default", host=None, login=None, password=None, extra={"type": "glue"})
    _set_connection(monkeypatch, "glue_kind", host="https://glue.eu-west-1.amazonaws.com",
                    extra={"catalog_kind": "glue", "warehouse": "123456789012"})
    with pytest.raises(LakeConfigError) as own:
        IcebergLakeHook("glue_kind").config
    bad_input("connection", "catalog_kind 'glue'", own.value)
    for refused in (official, own):
        message = str(refused.value)
        assert "catalog_kind 'rest'" in message and "catalog_kind plus spark_properties" not in message, message

        said = message.replace("REGION", "eu-west-1")
        fields = {
            "host": re.search(r"Host (https://\S+?),", said).group(1),
            "extra": {"catalog_kind": re.search(r"catalog_kind '(\w+)'", said).group(1), "warehouse": "123456789012",
                      "pyiceberg_properties": json.loads(re.search(r"pyiceberg_properties (\{.*?\})", said).group(1)),
                      "spark_properties": json.loads(re.search(r" spark_properties (\{.*?\})", said).group(1))},
        }
        _set_connection(monkeypatch, "glue_rest", **fields)
        hook = IcebergLakeHook("glue_rest")
        config = hook.config  # accepted
        assert (config.kind, config.uri) == ("rest", "https://glue.eu-west-1.amazonaws.com/iceberg")
        props = config.pyiceberg_catalog_properties()
        assert (props["rest.sigv4-enabled"], props["rest.signing-name"], props["rest.signing-region"]) == (
            "true", "glue", "eu-west-1")
        spark = config.spark_catalog_conf()
        assert spark["spark.sql.catalog.lake.rest.auth.type"] == "sigv4"
        assert spark["spark.sql.catalog.lake.warehouse"] == "123456789012" and "oauth2-server-uri" not in str(spark)
        # PyIceberg signs with boto3; without it the hook names the extra that brings it (nothing is sent).
        monkeypatch.setitem(sys.modules, "boto3", None)
        with pytest.raises(LakeConfigError, match=r"pip install 'pyiceberg\[rest-sigv4\]'"):
            hook.get_catalog()


def test_user_jars_and_packages_replace_the_runtime_of_the_spark_line(monkeypatch, tmp_path):
    jar = tmp_path / "iceberg-spark-runtime-4.1_2.13-9.9.9.jar"
    jar.write_bytes(b"")
    _set_connection(monkeypatch, "own_jars", host=f"sqlite:///{tmp_path}/c.db",
                    extra={"warehouse": f"file://{tmp_path}/w", "spark_jars": str(jar)})
    classpath = IcebergLakeHook("own_jars").spark_classpath()
    assert classpath.jars == [str(jar), "/usr/share/java/sqlite-jdbc.jar"] and classpath.packages == []
    _set_connection(monkeypatch, "maven", host=f"sqlite:///{tmp_path}/c.db",
                    extra={"warehouse": f"file://{tmp_path}/w",
                           "spark_packages": "org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:1.12.0",
                           "spark_version": "3.5"})
    hook = IcebergLakeHook("maven")
    assert hook.spark_packages() == ["org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:1.12.0"]
    assert hook.spark_classpath().jars == ["/usr/share/java/sqlite-jdbc.jar"]
    assert hook.spark_classpath().packages == ["org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:1.12.0"]


def test_provider_is_registered_with_airflow():
    env = os.environ.copy()
    listed = subprocess.run([sys.executable, "-m", "airflow", "providers", "list"], capture_output=True, text=True, env=env)
    assert "airflow-lake-provider" in listed.stdout
    hooks = subprocess.run([sys.executable, "-m", "airflow", "providers", "hooks"], capture_output=True, text=True, env=env)
    assert "iceberg_lake" in hooks.stdout and "IcebergLakeHook" in hooks.stdout
    triggers = subprocess.run([sys.executable, "-m", "airflow", "providers", "triggers"], capture_output=True, text=True, env=env)
    assert "airflow_lake_provider.triggers.health" in triggers.stdout
    assert "airflow_lake_provider.triggers.snapshot" in triggers.stdout


def test_connection_form_is_declared_in_provider_info():
    from airflow_lake_provider.get_provider_info import get_provider_info

    info = get_provider_info()
    conn = info["connection-types"][0]
    assert conn["connection-type"] == "iceberg_lake"
    assert conn["ui-field-behaviour"]["relabeling"]["host"] == "Catalog URI"
    assert set(conn["conn-fields"]) >= {"catalog_name", "catalog_kind", "warehouse", "properties"}
    assert conn["conn-fields"]["catalog_kind"]["schema"]["enum"] == ["sql", "rest", "hive"]


def test_the_connection_form_hides_schema_and_port_as_airflow_reads_it():
    """Airflow 3 reads ``hidden-fields`` (kebab case) from the provider info; snake case was silently ignored."""
    probe = ("import json; from airflow.providers_manager import ProvidersManager; "
             "print(json.dumps(ProvidersManager().field_behaviours))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=os.environ.copy())
    assert done.returncode == 0, done.stderr[-2000:]
    behaviours = json.loads(done.stdout.strip().splitlines()[-1])
    assert behaviours["iceberg_lake"]["hidden_fields"] == ["schema", "port"]
    assert behaviours["iceberg_lake"]["relabeling"]["host"] == "Catalog URI"
    # The hook's own method (older Airflow reads it) gives the same form in snake case.
    from airflow_lake_provider.hooks.lake import IcebergLakeHook

    assert IcebergLakeHook.get_ui_field_behaviour()["hidden_fields"] == ["schema", "port"]
