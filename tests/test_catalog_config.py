"""The catalog description and its two faces: pure logic, no engine started."""

from __future__ import annotations

import pytest

from airflow_lake_provider.catalog_config import CatalogConfig, is_secret_key
from airflow_lake_provider.exceptions import LakeConfigError
from airflow_lake_provider.identifiers import TableIdentifier
from airflow_lake_provider.lake import embedded_catalog_config


def test_embedded_lake_layout_and_sqlite_settings(tmp_path):
    config = embedded_catalog_config(tmp_path)
    assert config.name == "lake"
    assert (tmp_path / "warehouse").is_dir()
    py = config.pyiceberg_catalog_properties()
    assert py == {"type": "sql", "uri": f"sqlite:///{tmp_path}/catalog.db", "warehouse": f"file://{tmp_path}/warehouse"}
    spark = config.spark_catalog_conf()
    assert spark["spark.sql.catalog.lake"] == "org.apache.iceberg.spark.SparkCatalog"
    assert spark["spark.sql.catalog.lake.type"] == "jdbc"
    assert spark["spark.sql.catalog.lake.uri"] == f"jdbc:sqlite:{tmp_path}/catalog.db"
    assert spark["spark.sql.catalog.lake.warehouse"] == f"file:{tmp_path}/warehouse"
    # The settings the design notes found necessary on SQLite.
    assert spark["spark.sql.catalog.lake.jdbc.init-catalog-tables"] == "false"
    assert spark["spark.sql.catalog.lake.jdbc.schema-version"] == "V1"
    assert spark["spark.sql.catalog.lake.cache-enabled"] == "false"
    assert spark["spark.sql.extensions"].endswith("IcebergSparkSessionExtensions")


def test_lake_home_env(monkeypatch, tmp_path):
    monkeypatch.setenv("LAKE_HOME", str(tmp_path / "elsewhere"))
    config = embedded_catalog_config()
    assert config.uri == f"sqlite:///{tmp_path}/elsewhere/catalog.db"


def test_postgres_catalog_both_faces_keep_password_out_of_uri():
    config = CatalogConfig(
        name="prod", kind="sql", uri="postgresql://db.internal:5433/iceberg",
        warehouse="s3://bucket/wh", user="maint", password="p@ss/word",
    )
    assert config.pyiceberg_catalog_properties()["uri"] == "postgresql+psycopg2://maint:p%40ss%2Fword@db.internal:5433/iceberg"
    spark = config.spark_catalog_conf()
    assert spark["spark.sql.catalog.prod.uri"] == "jdbc:postgresql://db.internal:5433/iceberg"
    assert spark["spark.sql.catalog.prod.jdbc.user"] == "maint"
    assert spark["spark.sql.catalog.prod.jdbc.password"] == "p@ss/word"
    assert "spark.sql.catalog.prod.jdbc.init-catalog-tables" not in spark
    assert config.jdbc_driver == "postgresql"
    assert "p@ss/word" not in repr(config) and "p@ss/word" not in str(config.describe())


def test_jdbc_uris_are_accepted_as_input():
    config = CatalogConfig(name="c", kind="sql", uri="jdbc:sqlite:/data/c.db", warehouse="file:///data/wh")
    assert config.pyiceberg_catalog_properties()["uri"] == "sqlite:////data/c.db"


def test_rest_and_hive_faces():
    rest = CatalogConfig(name="r", kind="rest", uri="https://cat.example:8181", password="tok123456")
    assert rest.pyiceberg_catalog_properties()["token"] == "tok123456"
    assert rest.spark_catalog_conf()["spark.sql.catalog.r.token"] == "tok123456"
    oauth = CatalogConfig(name="r", kind="rest", uri="https://cat.example", user="client", password="secret99")
    assert oauth.spark_catalog_conf()["spark.sql.catalog.r.credential"] == "client:secret99"
    hive = CatalogConfig(name="h", kind="hive", uri="thrift://ms:9083", warehouse="s3://b/wh")
    assert hive.spark_catalog_conf()["spark.sql.catalog.h.type"] == "hive"


def test_extra_properties_reach_the_right_faces():
    config = CatalogConfig(
        name="c", kind="sql", uri="sqlite:////x/c.db", warehouse="file:///x/wh",
        properties={"s3.endpoint": "http://127.0.0.1:9000"},
        spark_properties={"io-impl": "org.apache.iceberg.aws.s3.S3FileIO"},
        pyiceberg_properties={"py-io-impl": "pyiceberg.io.fsspec.FsspecFileIO"},
        spark_conf={"spark.executor.memory": "2g"},
    )
    py, spark = config.pyiceberg_catalog_properties(), config.spark_catalog_conf()
    assert py["s3.endpoint"] == spark["spark.sql.catalog.c.s3.endpoint"] == "http://127.0.0.1:9000"
    assert spark["spark.sql.catalog.c.io-impl"].endswith("S3FileIO") and "io-impl" not in py
    assert py["py-io-impl"].endswith("FsspecFileIO") and "spark.sql.catalog.c.py-io-impl" not in spark
    assert spark["spark.executor.memory"] == "2g"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"kind": "nessie", "uri": "http://x"}, "Unknown catalog kind 'nessie'"),
        ({"kind": "sql", "uri": "sqlite:////x/c.db"}, "needs a warehouse"),
        ({"kind": "sql", "uri": "mysql://h/db", "warehouse": "file:///w"}, "is not supported"),
        ({"kind": "sql", "uri": "sqlite:relative.db", "warehouse": "file:///w"}, "absolute file path"),
        ({"kind": "sql", "uri": "postgresql://u:p@h/db", "warehouse": "file:///w"}, "Login and Password"),
        ({"kind": "sql", "uri": "postgresql://h", "warehouse": "file:///w"}, "postgresql://HOST:PORT/DATABASE"),
        ({"kind": "rest", "uri": "thrift://x"}, "http:// or https://"),
        ({"kind": "hive", "uri": "http://x", "warehouse": "s3://b"}, "thrift://"),
        ({"kind": "sql", "uri": ""}, "needs a URI"),
        ({"kind": "sql", "uri": "sqlite:////x.db", "warehouse": "file:///w", "spark_conf": {"executor": "1"}}, "must start with 'spark.'"),
    ],
)
def test_bad_catalog_descriptions_are_refused(kwargs, message):
    with pytest.raises(LakeConfigError, match=message):
        CatalogConfig(name="c", **kwargs)


def test_bad_catalog_name():
    with pytest.raises(LakeConfigError, match="Catalog name"):
        CatalogConfig(name="my-lake; drop", kind="rest", uri="http://x")


def test_secret_keys():
    assert is_secret_key("jdbc.password") and is_secret_key("s3.secret-access-key") and is_secret_key("token")
    assert is_secret_key("s3.access-key-id") and not is_secret_key("s3.endpoint")


@pytest.mark.parametrize("value", ["events", "", "db.ev'ents", "db.t;DROP TABLE x", "db.`t`", "1db.t", None, 42])
def test_table_identifiers_refuse_injection_and_malformed_names(bad_input, value):
    with pytest.raises(LakeConfigError) as raised:
        TableIdentifier.parse(value)
    bad_input("table name", repr(value), raised.value)


def test_table_identifier_forms():
    ident = TableIdentifier.parse("db.events")
    assert ident.dotted == "db.events"
    assert ident.spark_name("lake") == "`lake`.`db`.`events`"
    assert TableIdentifier.parse("a.b.c").namespace == ("a", "b")
