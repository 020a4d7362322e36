"""Test DAGs: each lake sensor in deferrable mode and in reschedule mode (run with dag.test).

``sensor_health_<mode>`` waits for ``min_small_files`` small files; ``sensor_snapshot_<mode>``
waits for a commit past ``after_snapshot_id`` whose summary has ``writer.job-id = job_id``.
Table and thresholds come from the run's conf.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from airflow_lake_provider.sensors.health import IcebergTableHealthSensor
from airflow_lake_provider.sensors.snapshot import IcebergSnapshotSensor

SENSORS = {
    "health": lambda **kw: IcebergTableHealthSensor(
        task_id="wait_for_small_files", min_small_files="{{ dag_run.conf['min_small_files'] }}", **kw),
    "snapshot": lambda **kw: IcebergSnapshotSensor(
        task_id="wait_for_commit", after_snapshot_id="{{ dag_run.conf['after_snapshot_id'] }}",
        summary_properties={"writer.job-id": "{{ dag_run.conf['job_id'] }}"}, **kw),
}
MODES = {"deferrable": {"deferrable": True}, "reschedule": {"deferrable": False, "mode": "reschedule"}}

for kind, make_sensor in SENSORS.items():
    for mode, mode_args in MODES.items():
        with DAG(f"sensor_{kind}_{mode}", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
                 catchup=False, render_template_as_native_obj=True) as dag:
            make_sensor(table="{{ dag_run.conf['table'] }}", poll_interval=0.5, timeout=90, **mode_args)
        globals()[dag.dag_id] = dag
