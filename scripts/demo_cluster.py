"""`make demo-cluster`: the demo of `make demo` where production lakes live, on 127.0.0.1.

Starts the servers the suite's topology tests start: SeaweedFS (`weed mini`: S3 and its Iceberg
REST catalog, OAuth2 client credentials) and a Spark standalone Master and Worker. The demo
table is written to S3 through the REST catalog, and every Spark job (the demo's DELETE, then
the DAG's plan/rewrite/expire/clean) runs as an application of the standalone cluster in client
mode. The servers and their data are removed at the end: safe to run twice.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))  # the servers the tests start
sys.path.insert(0, str(REPO / "scripts"))

from demo import run_demo  # noqa: E402
from seaweedfs_server import SeaweedFS  # noqa: E402
from spark_cluster import SparkStandaloneCluster  # noqa: E402


def main() -> int:
    root = Path(tempfile.mkdtemp(prefix="lake-demo-cluster-"))
    store: SeaweedFS | None = None
    cluster = SparkStandaloneCluster(root / "spark", worker_cores=1, worker_memory="1g")
    try:
        print("demo-cluster: starting SeaweedFS (S3 and its Iceberg REST catalog)...")
        try:
            store = SeaweedFS.launch(root / "weed")
        except FileNotFoundError as missing:
            raise SystemExit(f"demo-cluster: {missing}") from None
        print(f"demo-cluster: S3 at {store.endpoint}, REST catalog at {store.rest_uri}")
        print("demo-cluster: starting a Spark standalone Master and Worker...")
        cluster.start()
        print(f"demo-cluster: Spark master {cluster.master_url} (web UI {cluster.web_ui_url})")
        os.environ["AIRFLOW_CONN_SPARK_DEFAULT"] = json.dumps({
            "conn_type": "spark", "host": "spark://127.0.0.1", "port": cluster.master_port,
            "extra": {"deploy-mode": "client"}})
        os.environ["AIRFLOW_CONN_LAKE_DEFAULT"] = json.dumps(store.rest_connection(spark_conf={
            "spark.pyspark.python": sys.executable,  # the executors' Python (same host here)
            "spark.executor.memory": "1g", "spark.cores.max": "1", "spark.sql.shuffle.partitions": "4",
            "spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"}))
        from airflow_lake_provider.hooks.lake import IcebergLakeHook

        code = run_demo(IcebergLakeHook(), f"S3 + REST catalog at {store.rest_uri}, Spark on {cluster.master_url}")
        apps = cluster.applications()
        print(f"applications the standalone cluster ran: {len(apps)}")
        for app in apps:
            print(f"  {app['id']}  {app['name']:<28} {app['state']}")
        return code
    finally:
        cluster.stop()
        if store is not None:
            store.stop()
        import shutil

        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
