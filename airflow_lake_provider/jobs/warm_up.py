"""The warm-up application the class archive is recorded from: ``warm_up.py SPEC_PATH``.

It does, on a throwaway embedded lake, what the maintenance jobs do on a real one (small files
written, rows deleted as position deletes and as deletion vectors, then data files and delete
files rewritten (by Iceberg's Spark action and by the Arrow rewriter), manifests rewritten,
snapshots expired, orphans listed, metadata tables read), so the JVM has loaded the classes a job
needs by the time it exits and writes the archive (:mod:`airflow_lake_provider.class_archive`). The
spec names the Spark configuration of a throwaway embedded lake; it never touches a lake of the user's.
"""

from __future__ import annotations

import json
import sys


def main(argv: list[str]) -> int:
    from airflow_lake_provider.jobs.session import build_session

    with open(argv[1], encoding="utf-8") as handle:
        spec = json.load(handle)
    catalog = spec["catalog"]
    spark = build_session(spec)
    try:
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {catalog}.warm")
        for version in (2, 3):
            table = f"{catalog}.warm.t{version}"
            spark.sql(f"CREATE TABLE {table} (id BIGINT, day DATE, name STRING, tags MAP<STRING, STRING>) "
                      "USING iceberg "
                      f"PARTITIONED BY (day) TBLPROPERTIES ('format-version'='{version}', "
                      "'write.delete.mode'='merge-on-read', 'write.update.mode'='merge-on-read')")
            for batch in range(4):
                spark.sql(f"INSERT INTO {table} SELECT id, date_add(DATE'2026-01-01', CAST(id % 2 AS INT)), "
                          f"CAST(id AS STRING), map('k', CAST(id AS STRING)) "
                          f"FROM range({batch * 50}, {batch * 50 + 50})")
            spark.sql(f"DELETE FROM {table} WHERE id % 7 = 0")
            spark.sql(f"UPDATE {table} SET name = 'x' WHERE id % 11 = 0")
            name = f"warm.t{version}"
            spark.sql(f"CALL {catalog}.system.rewrite_data_files(table => '{name}', "
                      "options => map('min-input-files', '2', 'delete-file-threshold', '1', "
                      "'partial-progress.enabled', 'true', 'remove-dangling-deletes', 'true'))").collect()
            spark.sql(f"CALL {catalog}.system.rewrite_position_delete_files(table => '{name}', "
                      "options => map('rewrite-all', 'true'))").collect()
            spark.sql(f"CALL {catalog}.system.rewrite_manifests(table => '{name}')").collect()
            spark.sql(f"CALL {catalog}.system.expire_snapshots(table => '{name}', retain_last => 1)").collect()
            spark.sql(f"CALL {catalog}.system.remove_orphan_files(table => '{name}', dry_run => true)").collect()
            for metadata_table in ("snapshots", "refs", "files", "all_files", "manifests", "history"):
                spark.table(f"{table}.{metadata_table}").collect()
            spark.table(table).groupBy("day").count().collect()
        # The Arrow rewriter's Iceberg classes: its planner, the scan tasks' JSON, footer metrics, the commit.
        from airflow_lake_provider.jobs import iceberg
        from airflow_lake_provider.jobs.rewriters import ArrowRewriter, RewriteScope

        spark.sql(f"CREATE TABLE {catalog}.warm.appended (id BIGINT, day DATE, name STRING) USING iceberg "
                  "PARTITIONED BY (day)")
        for batch in range(3):
            spark.sql(f"INSERT INTO {catalog}.warm.appended SELECT id, "
                      f"date_add(DATE'2026-01-01', CAST(id % 2 AS INT)), CAST(id AS STRING) "
                      f"FROM range({batch * 50}, {batch * 50 + 50})")
        ArrowRewriter().rewrite(RewriteScope(spark, iceberg.load_table(spark, catalog, "warm.appended"), None,
                                             {"min-input-files": "2"}, {}))
        return 0
    finally:
        spark.stop()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
