"""A Hive metastore on 127.0.0.1 for the topology tests, from the Hive 2.3 jars pyspark ships.

No metastore installs from the reachable registries, but pyspark carries Hive's metastore, the
Derby database and DataNucleus (Spark's own Hive support uses them). This module, run as a
script, opens a JVM through pyspark's gateway, creates the metastore's schema in an embedded Derby
database (the transaction tables too: Iceberg and PyIceberg lock the table around each commit)
and serves the metastore's Thrift API on 127.0.0.1: Hive 2.3's own launcher binds every interface.

The metastore creates the directories of new namespaces and tables, so it reads the tables' store
too: the Hadoop settings for it (S3A endpoint and keys) and the jars reach the script through its
environment, never its command line. The ``hive_metastore`` fixture starts one for the session on
the SeaweedFS server, in its own process group, and stops it. (Not named ``hive_metastore``:
PyIceberg's Thrift client is a top-level package of that name.)
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from ports import free_port
from server_processes import stop_process_group, wait_until_serving

HADOOP_CONF_ENV = "LAKE_TEST_METASTORE_HADOOP_CONF"
JARS_ENV = "LAKE_TEST_METASTORE_JARS"


@dataclass
class HiveMetastore:
    root: Path
    port: int
    process: subprocess.Popen | None = None

    @property
    def uri(self) -> str:
        return f"thrift://127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.root / "metastore.log"

    @property
    def warehouse(self) -> str:
        """Where the metastore puts new namespaces (and PyIceberg and Iceberg their tables): on S3."""
        return f"s3://warehouse/hive-{self.port}"

    def start(self, settings: dict[str, str], jars: list[str], timeout: float = 180) -> None:
        """Start it with these Hive and Hadoop ``settings`` and ``jars``; return once it listens."""
        env = {**os.environ, HADOOP_CONF_ENV: json.dumps(settings), JARS_ENV: ",".join(jars)}
        for name in ("PYSPARK_SUBMIT_ARGS", "SPARK_CONF_DIR"):
            env.pop(name, None)
        with open(self.log, "w") as log:
            self.process = subprocess.Popen([sys.executable, __file__, str(self.port), str(self.root)], env=env,
                                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        wait_until_serving(self._listening, processes=[self.process], timeout=timeout, what="The Hive metastore",
                           log=lambda: self.log.read_text()[-3000:], stop=self.stop)

    def _listening(self) -> bool:
        with socket.create_connection(("127.0.0.1", self.port), timeout=1):
            return True

    def stop(self) -> None:
        stop_process_group(self.process, grace=20)


def serve(port: int, root: Path) -> None:
    """The metastore itself (this module run as a script): Derby under ``root``, Thrift on 127.0.0.1:``port``."""
    from pyspark import SparkConf
    from pyspark.java_gateway import launch_gateway

    conf = SparkConf().set("spark.driver.extraJavaOptions", f"-Dderby.system.home={root}")
    if os.environ.get(JARS_ENV):
        conf.set("spark.jars", os.environ[JARS_ENV])
    jvm = launch_gateway(conf).jvm
    hive_conf = jvm.org.apache.hadoop.hive.conf.HiveConf()
    settings = {
        "javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={root}/metastore_db;create=true",
        "javax.jdo.option.ConnectionDriverName": "org.apache.derby.jdbc.EmbeddedDriver",
        "datanucleus.schema.autoCreateAll": "true",
        # The default pool (BoneCP) is not among Spark 4's jars; commons-dbcp is on both tracks.
        "datanucleus.connectionPoolingType": "dbcp",
        "hive.metastore.schema.verification": "false",
        "hive.metastore.warehouse.dir": f"file://{root}/warehouse",
        **json.loads(os.environ.get(HADOOP_CONF_ENV) or "{}"),
    }
    for key, value in settings.items():
        hive_conf.set(key, value)
    metastore = jvm.org.apache.hadoop.hive.metastore
    metastore.txn.TxnDbUtil.setConfValues(hive_conf)  # the DbTxnManager: locks live in the database
    metastore.txn.TxnDbUtil.prepDb(hive_conf)  # the transaction and lock tables
    handler = metastore.RetryingHMSHandler.getProxy(
        hive_conf, metastore.HiveMetaStore.HMSHandler("lake-test-metastore", hive_conf, False), False)
    thrift = jvm.org.apache.thrift
    args = thrift.server.TThreadPoolServer.Args(
        thrift.transport.TServerSocket(jvm.java.net.InetSocketAddress("127.0.0.1", port)))
    args = (args.processor(metastore.api.ThriftHiveMetastore.Processor(handler))
            .protocolFactory(thrift.protocol.TBinaryProtocol.Factory()).minWorkerThreads(2).maxWorkerThreads(64))
    print(f"Hive metastore serving on 127.0.0.1:{port}", flush=True)
    thrift.server.TThreadPoolServer(args).serve()


@pytest.fixture(scope="session")
def hive_metastore(seaweedfs_server):
    """A metastore whose new namespaces and tables may live on the SeaweedFS server's S3."""
    from airflow_lake_provider.catalog_config import CatalogConfig
    from airflow_lake_provider.jars import cached_jars, spark_line

    jars = cached_jars(spark_line().s3a)
    server = HiveMetastore(Path(tempfile.mkdtemp(prefix="lake-metastore-")), free_port())
    # The S3A settings a Spark job of this store gets, for the metastore's own Hadoop file system.
    spark_conf = CatalogConfig(name="lake", kind="hive", uri=server.uri, warehouse=server.warehouse,
                               properties=seaweedfs_server.s3_properties()).spark_catalog_conf()
    settings = {key[len("spark.hadoop."):]: value for key, value in spark_conf.items()
                if key.startswith("spark.hadoop.")}
    server.start({**settings, "hive.metastore.warehouse.dir": server.warehouse}, jars)
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(server.root, ignore_errors=True)


if __name__ == "__main__":
    serve(int(sys.argv[1]), Path(sys.argv[2]))
