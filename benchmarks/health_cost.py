"""What ``table_health`` costs on tables of 1k, 10k and 30k data files: time and peak memory.

Builds one table in a temporary embedded lake (``$LAKE_HOME`` is set to a temp dir) by
PyIceberg appends of 1,000 small files each (one row in each of 1,000 identity partitions, so
each append is one commit, one manifest and one tiny file per partition), and at 1k, 10k and
30k files measures, each in a fresh process so memory figures are not mixed up:

* ``table_health`` (reads every manifest; what every sensor poke costs),
* for comparison, PyIceberg's ``inspect.files()`` and ``scan().plan_files()``.

Peak RSS is the process's high-water mark; "extra" is that minus the RSS just before the call
(imports and the loaded table). Run: ``.venv/bin/python benchmarks/health_cost.py`` (about 2 min).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

SIZES = (1_000, 10_000, 30_000)
FILES_PER_APPEND = 1_000
TABLE = "bench.health"

MEASURE = r"""
import json, resource, sys, time
from airflow_lake_provider.lake import embedded_catalog_config
from pyiceberg.catalog import load_catalog

what = sys.argv[1]
config = embedded_catalog_config()
table = load_catalog(config.name, **config.pyiceberg_catalog_properties()).load_table(sys.argv[2])

def rss_kb():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))

before = rss_kb()
started = time.perf_counter()
if what == "table_health":
    from airflow_lake_provider.core.health import table_health
    result = table_health(table).data_files
elif what == "inspect.files":
    result = table.inspect.files().num_rows
else:
    result = sum(1 for _ in table.scan().plan_files())
seconds = time.perf_counter() - started
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"seconds": seconds, "peak_mb": peak / 1024, "extra_mb": (peak - before) / 1024, "files": result}))
"""


def measure(what: str) -> dict:
    out = subprocess.run([sys.executable, "-c", MEASURE, what, TABLE], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    home = tempfile.mkdtemp(prefix="lake-bench-")
    os.environ["LAKE_HOME"] = home
    try:
        run()
    finally:
        shutil.rmtree(home, ignore_errors=True)


def run() -> None:
    import pyarrow as pa
    from pyiceberg.catalog import load_catalog
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import IdentityTransform
    from pyiceberg.types import IntegerType, LongType, NestedField, StringType

    from airflow_lake_provider.lake import embedded_catalog_config

    config = embedded_catalog_config()
    catalog = load_catalog(config.name, **config.pyiceberg_catalog_properties())
    catalog.create_namespace("bench")
    schema = Schema(
        NestedField(1, "id", LongType(), required=False),
        NestedField(2, "part", IntegerType(), required=False),
        NestedField(3, "payload", StringType(), required=False),
    )
    spec = PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "part"))
    table = catalog.create_table(TABLE, schema=schema, partition_spec=spec)
    arrow_schema = schema.as_arrow()

    print(f"health cost on {TABLE} (LAKE_HOME={os.environ['LAKE_HOME']})")
    print(f"{'files':>7} {'build s':>8}  {'call':<14} {'seconds':>8} {'peak RSS MB':>12} {'extra MB':>9}")
    files = 0
    for size in SIZES:
        started = time.perf_counter()
        while files < size:
            ids = list(range(files, files + FILES_PER_APPEND))
            batch = pa.table({"id": ids, "part": [i % FILES_PER_APPEND for i in ids],
                              "payload": ["x" * 32] * len(ids)}, schema=arrow_schema)
            table.append(batch)
            files += FILES_PER_APPEND
        build = time.perf_counter() - started
        for what in ("table_health", "inspect.files", "plan_files"):
            m = measure(what)
            assert m["files"] == files, m
            print(f"{files:>7} {build:>8.1f}  {what:<14} {m['seconds']:>8.2f} {m['peak_mb']:>12.0f} "
                  f"{m['extra_mb']:>9.0f}", flush=True)
            build = 0.0


if __name__ == "__main__":
    main()
