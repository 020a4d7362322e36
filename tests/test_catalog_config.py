"""The catalog description and its two faces: pure logic, no engine started."""

from __future__ import annotations

import pytest

from airflow_lake_provider.catalog_config import CatalogConfig, config_from_iceberg_connection, is_secret_key
from airflow_lake_provider.exceptions import LakeConfigError
from airflow_lake_provider.core.identifiers import TableIdentifier
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


# -- S3 and REST defaults ------------------------------------------------------------------
_S3 = {"s3.endpoint": "http://127.0.0.1:8333", "s3.access-key-id": "AKIDTEST", "s3.secret-access-key": "s3-secret-x",
       "s3.region": "us-east-1"}


@pytest.mark.parametrize("warehouse", ["s3://bucket/wh", "s3a://bucket/wh"])
def test_s3_warehouse_gives_spark_hadoop_file_io_over_s3a(warehouse):
    config = CatalogConfig(name="c", kind="sql", uri="sqlite:////x/c.db", warehouse=warehouse, properties=_S3)
    spark = config.spark_catalog_conf()
    assert config.uses_s3 and config.spark_uses_s3a
    assert spark["spark.sql.catalog.c.io-impl"] == "org.apache.iceberg.hadoop.HadoopFileIO"
    assert spark["spark.sql.catalog.c.warehouse"] == warehouse
    s3a = "org.apache.hadoop.fs.s3a.S3AFileSystem"
    assert spark["spark.hadoop.fs.s3.impl"] == spark["spark.hadoop.fs.s3a.impl"] == s3a
    assert spark["spark.hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:8333"
    assert spark["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "false"  # from the endpoint's scheme
    assert spark["spark.hadoop.fs.s3a.path.style.access"] == "true"  # not AWS: no bucket.host names
    assert spark["spark.hadoop.fs.s3a.endpoint.region"] == "us-east-1"
    assert spark["spark.hadoop.fs.s3a.directory.marker.retention"] == "keep"
    assert spark["spark.hadoop.fs.s3a.aws.credentials.provider"].endswith("SimpleAWSCredentialsProvider")
    assert spark["spark.hadoop.fs.s3a.access.key"] == "AKIDTEST"
    assert spark["spark.hadoop.fs.s3a.secret.key"] == "s3-secret-x"
    # The keys are secrets by name, so the job runner puts them in the 0600 spec file, not argv.
    assert is_secret_key("spark.hadoop.fs.s3a.access.key") and is_secret_key("spark.hadoop.fs.s3a.secret.key")
    assert "s3-secret-x" in config.secret_values() and "AKIDTEST" in config.secret_values()
    # PyIceberg: path-style addressing for a store that is not AWS.
    py = config.pyiceberg_catalog_properties()
    assert py["s3.force-virtual-addressing"] == "false" and py["s3.endpoint"] == "http://127.0.0.1:8333"


def test_s3_defaults_yield_to_what_the_user_set():
    config = CatalogConfig(
        name="c", kind="sql", uri="sqlite:////x/c.db", warehouse="s3://b/wh",
        properties={**_S3, "s3.endpoint": "https://minio.internal:9000", "s3.path-style-access": "false"},
        pyiceberg_properties={"s3.force-virtual-addressing": "true"},
        spark_conf={"spark.hadoop.fs.s3a.endpoint.region": "eu-west-1"},
    )
    spark = config.spark_catalog_conf()
    assert spark["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "true"
    assert spark["spark.hadoop.fs.s3a.path.style.access"] == "false"
    assert spark["spark.hadoop.fs.s3a.endpoint.region"] == "eu-west-1"
    assert config.pyiceberg_catalog_properties()["s3.force-virtual-addressing"] == "true"
    # The user's own FileIO (with the AWS SDK v2 they ship) wins: no S3A settings, no S3A jars.
    own = CatalogConfig(name="c", kind="sql", uri="sqlite:////x/c.db", warehouse="s3://b/wh", properties=_S3,
                        spark_properties={"io-impl": "org.apache.iceberg.aws.s3.S3FileIO"})
    spark = own.spark_catalog_conf()
    assert spark["spark.sql.catalog.c.io-impl"].endswith("S3FileIO") and not own.spark_uses_s3a
    assert not [key for key in spark if key.startswith("spark.hadoop.fs.s3")]


def test_s3_on_aws_with_the_default_credential_chain():
    config = CatalogConfig(name="c", kind="hive", uri="thrift://ms:9083", warehouse="s3://b/wh",
                           properties={"s3.region": "eu-west-1"})
    spark = config.spark_catalog_conf()
    assert spark["spark.sql.catalog.c.io-impl"].endswith("HadoopFileIO")
    assert spark["spark.hadoop.fs.s3.impl"].endswith("S3AFileSystem")
    assert "spark.hadoop.fs.s3a.aws.credentials.provider" not in spark and "spark.hadoop.fs.s3a.access.key" not in spark
    assert "spark.hadoop.fs.s3a.path.style.access" not in spark and "spark.hadoop.fs.s3a.endpoint" not in spark
    assert "s3.force-virtual-addressing" not in config.pyiceberg_catalog_properties()
    temporary = CatalogConfig(name="c", kind="hive", uri="thrift://ms:9083", warehouse="s3://b/wh",
                              properties={**_S3, "s3.endpoint": "https://s3.eu-west-1.amazonaws.com",
                                          "s3.session-token": "sess-tok"})
    spark = temporary.spark_catalog_conf()
    assert spark["spark.hadoop.fs.s3a.aws.credentials.provider"].endswith("TemporaryAWSCredentialsProvider")
    assert spark["spark.hadoop.fs.s3a.session.token"] == "sess-tok"
    assert "spark.hadoop.fs.s3a.path.style.access" not in spark  # AWS: virtual hosts are fine
    assert "s3.force-virtual-addressing" not in temporary.pyiceberg_catalog_properties()


def test_file_warehouse_gets_no_s3_settings():
    config = CatalogConfig(name="c", kind="sql", uri="sqlite:////x/c.db", warehouse="file:///x/wh")
    assert not config.uses_s3 and not config.spark_uses_s3a
    assert not [key for key in config.spark_catalog_conf() if "s3" in key or key.endswith("io-impl")]


def test_rest_oauth2_names_its_token_endpoint_on_both_faces():
    config = CatalogConfig(name="r", kind="rest", uri="http://127.0.0.1:8181/", warehouse="tables",
                           user="client", password="secret99", properties={**_S3, "scope": "catalog"})
    py, spark = config.pyiceberg_catalog_properties(), config.spark_catalog_conf()
    assert py["credential"] == spark["spark.sql.catalog.r.credential"] == "client:secret99"
    assert py["oauth2-server-uri"] == spark["spark.sql.catalog.r.oauth2-server-uri"] == "http://127.0.0.1:8181/v1/oauth/tokens"
    assert py["scope"] == spark["spark.sql.catalog.r.scope"] == "catalog"
    assert spark["spark.sql.catalog.r.rest.auth.type"] == "oauth2"
    # Tables of a REST catalog on S3: the S3 properties alone say so (the warehouse is a name).
    assert config.spark_uses_s3a and spark["spark.sql.catalog.r.io-impl"].endswith("HadoopFileIO")
    assert spark["spark.hadoop.fs.s3a.secret.key"] == "s3-secret-x"
    # An identity provider elsewhere: the user's token endpoint wins, on both faces.
    idp = CatalogConfig(name="r", kind="rest", uri="http://127.0.0.1:8181", user="client", password="secret99",
                        properties={"oauth2-server-uri": "https://idp.example/token"})
    assert idp.pyiceberg_catalog_properties()["oauth2-server-uri"] == "https://idp.example/token"
    assert idp.spark_catalog_conf()["spark.sql.catalog.r.oauth2-server-uri"] == "https://idp.example/token"
    # A static token: the same endpoint (only used to refresh it), so Spark stops warning there too.
    token = CatalogConfig(name="r", kind="rest", uri="http://127.0.0.1:8181", password="tok123456")
    assert token.pyiceberg_catalog_properties()["token"] == "tok123456"
    assert token.pyiceberg_catalog_properties()["oauth2-server-uri"] == "http://127.0.0.1:8181/v1/oauth/tokens"
    assert token.spark_catalog_conf()["spark.sql.catalog.r.oauth2-server-uri"] == "http://127.0.0.1:8181/v1/oauth/tokens"
    assert "credential" not in token.pyiceberg_catalog_properties()
    # Without a secret there is nothing to name.
    anonymous = CatalogConfig(name="r", kind="rest", uri="http://127.0.0.1:8181")
    assert "oauth2-server-uri" not in anonymous.pyiceberg_catalog_properties()


def test_the_classpath_takes_each_coordinate_from_the_cache_or_leaves_it_to_spark(tmp_path, monkeypatch):
    from airflow_lake_provider.jars import ICEBERG_AWS_BUNDLE, SPARK_LINES, cached_jars, jar_file_name, resolve_classpath

    monkeypatch.setenv("LAKE_JAR_CACHE", str(tmp_path))
    line = SPARK_LINES["3.5"]
    assert line.iceberg_runtime == "org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:1.12.0"
    assert SPARK_LINES["4.1"].iceberg_runtime == "org.apache.iceberg:iceberg-spark-runtime-4.1_2.13:1.12.0"
    classpath = resolve_classpath(None, s3a=True, aws_bundle=True, spark_version="3.5.9")
    assert classpath.jars == [] and classpath.packages == [line.iceberg_runtime, *line.s3a, ICEBERG_AWS_BUNDLE]
    with pytest.raises(LakeConfigError, match="airflow_lake_provider.jars fetch"):
        cached_jars(line.s3a)
    (tmp_path / jar_file_name(line.s3a[0])).write_bytes(b"jar")
    classpath = resolve_classpath(None, s3a=True, spark_version="3.5.9")
    assert classpath.jars == [str(tmp_path / "hadoop-aws-3.3.4.jar")]
    assert classpath.packages == [line.iceberg_runtime, "com.amazonaws:aws-java-sdk-bundle:1.12.262"]
    assert "hadoop-aws" not in str(resolve_classpath(None, s3a=False, spark_version="3.5.9"))
    # An artifact the user gives (any version, jar or coordinate) is not added twice.
    own = resolve_classpath(None, s3a=True, spark_version="3.5.9", packages=["org.apache.hadoop:hadoop-aws:3.3.6"],
                            extra_jars=[str(tmp_path / "hadoop-aws-3.3.4.jar")])
    assert [item for item in [*own.jars, *own.packages] if "hadoop-aws" in item] == [
        str(tmp_path / "hadoop-aws-3.3.4.jar"), "org.apache.hadoop:hadoop-aws:3.3.6"]
    assert "iceberg-spark-runtime" not in str(resolve_classpath(None, iceberg_runtime_provided=True, spark_version="4.1.3"))


def test_s3fileio_and_sigv4_bring_the_aws_bundle():
    s3 = {"s3.endpoint": "http://127.0.0.1:9"}
    assert not CatalogConfig(name="c", kind="rest", uri="http://x", properties=s3).spark_uses_aws_bundle
    file_io = CatalogConfig(name="c", kind="rest", uri="http://x", properties=s3,
                            spark_properties={"io-impl": "org.apache.iceberg.aws.s3.S3FileIO"})
    assert file_io.spark_uses_aws_bundle and not file_io.spark_uses_s3a
    assert CatalogConfig(name="c", kind="rest", uri="http://x",
                         spark_properties={"rest.auth.type": "sigv4"}).spark_uses_aws_bundle


def test_the_official_iceberg_connection_describes_a_rest_catalog_for_both_engines():
    """host = Catalog URI, login/password = OAuth client id/secret, extra = catalog properties."""
    config = config_from_iceberg_connection(
        "iceberg_default", host="https://rest.example.com/ws/v1/", login="client", password="s3cret",
        extra={"warehouse": "s3://wh/", "s3.region": "eu-west-1", "s3.secret-access-key": "k3y"})
    assert (config.kind, config.uri, config.warehouse, config.name) == ("rest", "https://rest.example.com/ws/v1",
                                                                       "s3://wh/", "lake")
    props = config.pyiceberg_catalog_properties()
    assert props["credential"] == "client:s3cret" and props["s3.region"] == "eu-west-1"
    spark = config.spark_catalog_conf()
    assert spark["spark.sql.catalog.lake.uri"] == "https://rest.example.com/ws/v1"
    assert set(config.secret_values()) == {"s3cret", "k3y"}
    # PyIceberg's own spelling in the extra, and a token.
    spelt = config_from_iceberg_connection("c", host="http://r:8181", login=None, password=None,
                                           extra={"credential": "id:pw", "catalog_name": "prod"})
    assert (spelt.user, spelt.password, spelt.name) == ("id", "pw", "prod")
    token = config_from_iceberg_connection("c", host="http://r:8181", login=None, password=None, extra={"token": "t0k"})
    assert token.password == "t0k" and "credential" not in token.pyiceberg_catalog_properties()


def test_an_official_iceberg_connection_may_name_a_sql_catalog():
    config = config_from_iceberg_connection("c", host=None, login=None, password=None,
                                            extra={"type": "sql", "uri": "sqlite:////data/catalog.db",
                                                   "warehouse": "file:///data/wh"})
    assert config.kind == "sql" and config.jdbc_driver == "sqlite" and config.properties == {}


@pytest.mark.parametrize(("extra", "message"), [
    ({"type": "glue"}, "describes a 'glue' catalog"),
    ({"type": "rest", "uri": "ftp://nope"}, "must start with http"),
])
def test_an_official_iceberg_connection_this_package_cannot_open_is_refused(bad_input, extra, message):
    with pytest.raises(LakeConfigError, match=message) as refused:
        config_from_iceberg_connection("iceberg_default", host=None, login=None, password=None, extra=extra)
    bad_input("connection (type iceberg)", extra, refused.value)


def test_s3fileio_gets_its_region_and_path_style_from_the_s3_properties():
    """S3FileIO reads the ``s3.*`` names PyIceberg reads, but takes its region from ``client.region``
    only and addresses buckets as virtual hosts by default: both are derived on the Spark face, only
    for S3FileIO, and what the user gives wins. No S3A setting is derived, no key is invented."""
    s3 = {"s3.endpoint": "http://127.0.0.1:8333", "s3.region": "eu-west-1"}
    file_io = {"io-impl": "org.apache.iceberg.aws.s3.S3FileIO"}
    spark = CatalogConfig(name="c", kind="rest", uri="http://x", properties=s3,
                          spark_properties=file_io).spark_catalog_conf()
    assert spark["spark.sql.catalog.c.io-impl"] == "org.apache.iceberg.aws.s3.S3FileIO"
    assert spark["spark.sql.catalog.c.client.region"] == "eu-west-1"
    assert spark["spark.sql.catalog.c.s3.path-style-access"] == "true"
    assert not [key for key in spark if "fs.s3a" in key or "access-key" in key or "secret" in key]
    # Given values win; an AWS endpoint keeps virtual-host addressing; without a region none is made up.
    given = CatalogConfig(name="c", kind="rest", uri="http://x", properties=s3,
                          spark_properties={**file_io, "client.region": "us-east-2", "s3.path-style-access": "false"})
    assert given.spark_catalog_conf()["spark.sql.catalog.c.client.region"] == "us-east-2"
    assert given.spark_catalog_conf()["spark.sql.catalog.c.s3.path-style-access"] == "false"
    aws = CatalogConfig(name="c", kind="rest", uri="http://x", spark_properties=file_io,
                        properties={"s3.endpoint": "https://s3.eu-west-1.amazonaws.com"}).spark_catalog_conf()
    assert "spark.sql.catalog.c.s3.path-style-access" not in aws and "spark.sql.catalog.c.client.region" not in aws
    # HadoopFileIO (the default on S3) gets S3A settings instead, and neither derived S3FileIO property.
    s3a = CatalogConfig(name="c", kind="rest", uri="http://x", properties=s3).spark_catalog_conf()
    assert s3a["spark.hadoop.fs.s3a.endpoint.region"] == "eu-west-1"
    assert "spark.sql.catalog.c.client.region" not in s3a and "spark.sql.catalog.c.s3.path-style-access" not in s3a
    # PyIceberg's face is untouched.
    pyiceberg = CatalogConfig(name="c", kind="rest", uri="http://x", properties=s3,
                              spark_properties=file_io).pyiceberg_catalog_properties()
    assert "client.region" not in pyiceberg and "s3.path-style-access" not in pyiceberg


# -- ADLS ----------------------------------------------------------------------------------
_ADLS = {"adls.connection-string.lake.dfs.core.windows.net": "http://127.0.0.1:10000/lake",
         "adls.auth.shared-key.account.name": "lake", "adls.auth.shared-key.account.key": "a2V5LXNlY3JldA==",
         "adls.account-name": "lake", "adls.account-key": "a2V5LXNlY3JldA=="}


@pytest.mark.parametrize("kind,uri", [("sql", "sqlite:////x/c.db"), ("hive", "thrift://ms:9083")])
def test_an_adls_warehouse_gives_spark_adlsfileio_and_the_azure_bundle(kind, uri):
    config = CatalogConfig(name="c", kind=kind, uri=uri, warehouse="abfss://wh@lake.dfs.core.windows.net/x",
                           properties=_ADLS)
    spark = config.spark_catalog_conf()
    assert spark["spark.sql.catalog.c.io-impl"] == "org.apache.iceberg.azure.adlsv2.ADLSFileIO"
    assert spark["spark.sql.catalog.c.warehouse"] == "abfss://wh@lake.dfs.core.windows.net/x"
    assert config.spark_uses_adls and not config.spark_uses_gcs and not config.spark_uses_s3a
    # Both shared keys (Iceberg Java's and PyIceberg's names) are secrets: out of argv and logs.
    assert is_secret_key("adls.auth.shared-key.account.key") and is_secret_key("adls.account-key")
    assert "a2V5LXNlY3JldA==" in config.secret_values()
    local = CatalogConfig(name="c", kind="sql", uri="sqlite:////x/c.db", warehouse="file:///wh")
    assert not local.spark_uses_adls
