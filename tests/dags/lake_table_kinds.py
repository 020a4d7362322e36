"""lake_table_kinds: every kind of table the steps maintain, one maintenance group each, with its defaults.

The group as a user writes it, nothing but the table (and the strategy for the sorted table; the
Spark planner for the awkward partitions, which the test also plans with PyIceberg): the lease on, the table's own
retention, orphan removal at its 72 h floor. Tables come from the run's conf.
tests/test_table_kinds.py writes the tables, runs this DAG through the real scheduler and checks
every table afterwards. ``$LAKE_TABLE_KINDS`` (comma-separated) narrows the kinds: the other Spark
track's run (scripts/run_tests.sh) takes v2, v3 and equality deletes.
"""

from __future__ import annotations

import os

from airflow.sdk import DAG

from airflow_lake_provider.dag_factory import AIRFLOW_START_DATE
from airflow_lake_provider.task_group import lake_maintenance_group

#: group id -> the group's options beyond the table.
KINDS = {
    "v2_position_deletes": {},
    "v3_deletion_vectors": {},
    "equality_deletes": {},
    "evolved_specs": {},
    "pyiceberg_written": {},
    "nested_sorted": {"rewrite": {"strategy": "sort"}},
    "awkward_partitions": {"plan": {"engine": "spark"}},
}
#: What the other Spark track's run of tests/test_table_kinds.py takes (scripts/run_tests.sh).
OTHER_TRACK_KINDS = ("v2_position_deletes", "v3_deletion_vectors", "equality_deletes")
if os.environ.get("LAKE_TABLE_KINDS"):
    KINDS = {kind: KINDS[kind] for kind in os.environ["LAKE_TABLE_KINDS"].split(",")}

with DAG("lake_table_kinds", schedule=None, start_date=AIRFLOW_START_DATE, catchup=False,
         render_template_as_native_obj=True, tags=["test"]) as dag:
    for kind, options in KINDS.items():
        lake_maintenance_group(table=f"{{{{ dag_run.conf['{kind}'] }}}}", group_id=kind, **options)
