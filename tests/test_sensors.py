"""The lake sensors against a real catalog: real writes, real metadata, real Airflow runs.

No mocks: tables are written with PyIceberg (in this process or in another one), the sensors
read them through the catalog hook, and the DAG tests run through ``dag.test()``, which runs
deferred triggers inline and re-runs rescheduled sensors.
"""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pyarrow as pa
import pytest

from demo_data import EVENTS_SCHEMA, create_events_table
from airflow_lake_provider.exceptions import LakeConfigError, LakeSnapshotError
from conftest import load_dag

TARGET = 32 * 1024  # target file size of the test tables: 2,000 rows (~55 kB) are big, 5 rows (~2 kB) small


def small_batch(rows: int = 5, start: int = 10**6, day: dt.date = dt.date(2026, 1, 1)) -> pa.Table:
    ids = list(range(start, start + rows))
    return pa.table({"event_id": ids, "day": [day] * rows, "category": ["a"] * rows,
                     "amount": [1.0] * rows, "payload": ["x" * 40] * rows}, schema=EVENTS_SCHEMA)


def append_small_files(table, *, count: int, day: dt.date = dt.date(2026, 1, 1), properties: dict | None = None):
    """``count`` commits, each adding one small data file to ``day``'s partition."""
    for i in range(count):
        table.append(small_batch(start=10**6 + 10 * i, day=day), snapshot_properties=properties or {})
    return table


def healthy_table(catalog, name: str, *, days: int = 2):
    """One big file per day, target size TARGET: nothing to compact.

    The target is set after the writes: PyIceberg's writer itself splits output at the target size.
    """
    table = create_events_table(catalog, name, days=days, commits_per_day=1, rows_per_commit=2000)
    with table.transaction() as transaction:
        transaction.set_properties({"write.target-file-size-bytes": str(TARGET)})
    return catalog.load_table(name)


WRITER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from pyiceberg.catalog import load_catalog
    from airflow_lake_provider.lake import embedded_catalog_config

    table_name, gate, job_id, commits = sys.argv[1], Path(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    while not gate.exists():
        time.sleep(0.05)
    config = embedded_catalog_config()  # the same $LAKE_HOME catalog as the tests
    table = load_catalog(config.name, **config.pyiceberg_catalog_properties()).load_table(table_name)
    rows = table.scan(limit=5).to_arrow()
    for _ in range(commits):  # each commit adds one small data file
        table.append(rows, snapshot_properties={"writer.job-id": job_id})
    print(table.current_snapshot().snapshot_id, flush=True)
    """
)


class Writer:
    """Another process that appends to a table once its gate file exists, then prints the new snapshot ID."""

    def __init__(self, table: str, gate: Path, *, job_id: str = "job-1", commits: int = 1):
        self.gate = gate
        self.process = subprocess.Popen(
            [sys.executable, "-c", WRITER, table, str(gate), job_id, str(commits)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )

    def open(self) -> None:
        self.gate.touch()

    def snapshot_id(self, timeout: float = 60) -> int:
        out, err = self.process.communicate(timeout=timeout)
        assert self.process.returncode == 0, err
        return int(out.strip().splitlines()[-1])


def open_gate_when_waiting(dag_id: str, writer: Writer) -> threading.Thread:
    """Open the writer's gate once the sensor has checked and is waiting: deferred or up for reschedule."""

    def watch() -> None:
        from airflow.models.taskinstance import TaskInstance
        from airflow.utils.session import create_session

        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with create_session() as session:
                waiting = session.query(TaskInstance).filter(
                    TaskInstance.dag_id == dag_id,
                    (TaskInstance.next_method.isnot(None)) | (TaskInstance.state == "up_for_reschedule"),
                ).count()
            if waiting:
                break
            time.sleep(0.05)
        writer.open()

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


# -- parse-time validation --------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"min_delete_ratio": 1.5}, "min_delete_ratio must be a ratio above 0 and at most 1"),
        ({"min_small_files": -1}, "min_small_files must be 1 or more; got -1"),
        ({}, "Give at least one threshold"),
    ],
)
def test_health_sensor_refuses_bad_thresholds_when_constructed(bad_input, kwargs, message):
    from airflow_lake_provider.sensors.health import IcebergTableHealthSensor

    with pytest.raises(LakeConfigError, match=message) as raised:
        IcebergTableHealthSensor(task_id="health", table="db.t", **kwargs)
    bad_input("IcebergTableHealthSensor", repr(kwargs) if kwargs else "(no threshold)", raised.value)


def test_bad_threshold_is_a_dag_import_error(tmp_path):
    from airflow.dag_processing.dagbag import DagBag

    (tmp_path / "bad_sensor.py").write_text(textwrap.dedent(
        """
        import pendulum
        from airflow.sdk import DAG
        from airflow_lake_provider.sensors.health import IcebergTableHealthSensor

        with DAG("bad_sensor", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")):
            IcebergTableHealthSensor(task_id="health", table="db.t", min_delete_ratio=1.5)
        """
    ))
    bag = DagBag(dag_folder=str(tmp_path))
    assert "bad_sensor" not in bag.dag_ids
    [error] = bag.import_errors.values()
    assert "min_delete_ratio must be a ratio above 0 and at most 1" in error and "got 1.5" in error


def test_templated_thresholds_are_checked_once_rendered():
    from airflow_lake_provider.sensors.health import IcebergTableHealthSensor

    sensor = IcebergTableHealthSensor(task_id="health", table="db.t", min_small_files="{{ params.n }}")
    sensor.min_small_files = "-2"  # what rendering produced
    with pytest.raises(LakeConfigError, match="min_small_files must be 1 or more; got '-2'"):
        sensor.make_trigger()
    sensor.min_small_files = "12"
    assert sensor.make_trigger().thresholds == {"min_small_files": 12}


def test_snapshot_sensor_needs_something_to_wait_for():
    from airflow_lake_provider.sensors.snapshot import IcebergSnapshotSensor

    with pytest.raises(LakeConfigError, match="needs after_snapshot_id .* and/or summary_properties"):
        IcebergSnapshotSensor(task_id="snap", table="db.t")
    with pytest.raises(LakeConfigError, match="must be a snapshot ID"):
        IcebergSnapshotSensor(task_id="snap", table="db.t", after_snapshot_id=1.5)
    with pytest.raises(LakeConfigError, match="summary_properties must be a dict"):
        IcebergSnapshotSensor(task_id="snap", table="db.t", summary_properties=["job"])
    IcebergSnapshotSensor(task_id="snap", table="db.t", after_snapshot_id="{{ ti.xcom_pull('plan') }}")


# -- poke ------------------------------------------------------------------------------------------
def test_health_sensor_stays_false_on_a_healthy_table_and_fires_after_small_appends(lake_hook, namespace):
    from airflow_lake_provider.sensors.health import IcebergTableHealthSensor

    name = f"{namespace}.events"
    healthy_table(lake_hook.catalog, name)
    sensor = IcebergTableHealthSensor(task_id="health", table=name, min_small_files=3, max_score=50)
    first = sensor.poke({})
    assert not first.is_done and first.xcom_value is None

    append_small_files(lake_hook.load_table(name), count=3)
    result = IcebergTableHealthSensor(task_id="health", table=name, min_small_files=3, max_score=50).poke({})
    assert result.is_done
    report = result.xcom_value
    assert report["crossed"] == ["small_files 3 >= 3 (min_small_files)"]
    assert report["thresholds"] == {"min_small_files": 3, "max_score": 50}

    files = lake_hook.load_table(name).inspect.files().to_pylist()
    data = [f for f in files if f["content"] == 0]
    assert report["data_files"] == len(data) == 5
    assert report["small_files"] == sum(f["file_size_in_bytes"] < TARGET * 0.75 for f in data) == 3
    assert report["records"] == sum(f["record_count"] for f in data)
    assert report["data_bytes"] == sum(f["file_size_in_bytes"] for f in data)
    assert report["delete_files"] == sum(f["content"] != 0 for f in files) == 0
    assert report["snapshot_id"] == lake_hook.load_table(name).current_snapshot().snapshot_id


def test_snapshot_sensor_fires_on_a_commit_by_another_process_and_not_before(lake_hook, namespace, tmp_path):
    from airflow_lake_provider.sensors.snapshot import IcebergSnapshotSensor

    name = f"{namespace}.events"
    before = healthy_table(lake_hook.catalog, name).current_snapshot().snapshot_id
    writer = Writer(name, tmp_path / "go")
    sensor = IcebergSnapshotSensor(task_id="snap", table=name, after_snapshot_id=str(before))
    # Same answer however often it is asked while the writer has not committed.
    assert [sensor.poke({}).is_done for _ in range(3)] == [False, False, False]
    assert "no newer snapshot since snapshot" in sensor._last_seen

    writer.open()
    deadline = time.monotonic() + 60
    while not (result := sensor.poke({})).is_done:
        assert time.monotonic() < deadline and writer.process.poll() in (None, 0), sensor._last_seen
        time.sleep(0.1)
    committed = writer.snapshot_id()
    assert result.xcom_value["snapshot_id"] == committed
    assert result.xcom_value["parent_snapshot_id"] == before
    assert result.xcom_value["summary"]["writer.job-id"] == "job-1"
    assert result.xcom_value["summary"]["operation"] == "append"
    assert result.xcom_value["timestamp_ms"] == lake_hook.load_table(name).snapshot_by_id(committed).timestamp_ms


def test_snapshot_sensor_matches_summary_properties_on_a_branch(lake_hook, namespace):
    from airflow_lake_provider.sensors.snapshot import IcebergSnapshotSensor

    name = f"{namespace}.events"
    table = healthy_table(lake_hook.catalog, name)
    base = table.current_snapshot().snapshot_id
    table.manage_snapshots().create_branch(base, "audit").commit()

    def sensor(branch: str, job: str, after: int | None = None):
        return IcebergSnapshotSensor(task_id="snap", table=name, branch=branch, after_snapshot_id=after,
                                     summary_properties={"writer.job-id": job})

    append_small_files(lake_hook.load_table(name), count=1, properties={"writer.job-id": "other"})
    on_main = sensor("main", "job-7")
    assert not on_main.poke({}).is_done
    assert "none whose summary has {'writer.job-id': 'job-7'}" in on_main._last_seen

    lake_hook.load_table(name).append(small_batch(), snapshot_properties={"writer.job-id": "job-7"}, branch="audit")
    audit_head = lake_hook.load_table(name).snapshot_by_name("audit").snapshot_id
    assert not sensor("main", "job-7").poke({}).is_done  # the commit went to the branch only
    found = sensor("audit", "job-7", after=base).poke({})
    assert found.is_done and found.xcom_value["snapshot_id"] == audit_head and found.xcom_value["branch"] == "audit"
    # main's head moved past `base` too, but not with job-7.
    assert not sensor("main", "job-7", after=base).poke({}).is_done


def test_snapshot_sensor_refuses_an_unknown_snapshot_id(lake_hook, namespace, bad_input):
    from airflow_lake_provider.sensors.snapshot import IcebergSnapshotSensor

    name = f"{namespace}.events"
    healthy_table(lake_hook.catalog, name)
    with pytest.raises(LakeSnapshotError, match="Snapshot 12345 is not in the history of .*expired, or it belongs") as raised:
        IcebergSnapshotSensor(task_id="snap", table=name, after_snapshot_id=12345).poke({})
    bad_input("IcebergSnapshotSensor", "after_snapshot_id=12345 (not in the table)", raised.value)


def test_missing_table_is_waited_on_and_the_timeout_says_what_was_seen(lake_hook, namespace):
    from airflow.sdk.exceptions import AirflowSensorTimeout

    from airflow_lake_provider.sensors.health import IcebergTableHealthSensor

    sensor = IcebergTableHealthSensor(task_id="health", table=f"{namespace}.nowhere", min_small_files=1,
                                      poll_interval=0.1, timeout=0.5, deferrable=False)
    assert not sensor.poke({}).is_done
    with pytest.raises(AirflowSensorTimeout, match=r"Last seen: Table '.*\.nowhere' does not exist .*Waiting for it"):
        sensor.execute({})


# -- through Airflow: deferrable (a real trigger, run inline by dag.test) and reschedule ------------
def _reschedules(dag_id: str) -> int:
    from airflow.models.taskreschedule import TaskReschedule
    from airflow.utils.session import create_session

    with create_session() as session:
        return session.query(TaskReschedule).join(TaskReschedule.task_instance).filter_by(dag_id=dag_id).count()


@pytest.mark.parametrize("mode", ["deferrable", "reschedule"])
def test_health_sensor_in_a_dag(mode, airflow_db, lake_hook, namespace, tmp_path, caplog):
    name = f"{namespace}.events"
    healthy_table(lake_hook.catalog, name)
    dag_id = f"sensor_health_{mode}"
    writer = Writer(name, tmp_path / "go", commits=3)
    watcher = open_gate_when_waiting(dag_id, writer)

    run = load_dag("sensor_dags.py", dag_id).test(run_conf={"table": name, "min_small_files": 3})
    watcher.join()
    writer.snapshot_id()
    assert run.state == "success"
    report = run.get_task_instance("wait_for_small_files").xcom_pull(task_ids="wait_for_small_files")
    assert report["small_files"] == 3 and report["crossed"] == ["small_files 3 >= 3 (min_small_files)"]
    assert report["snapshot_id"] == lake_hook.load_table(name).current_snapshot().snapshot_id
    _assert_waited(mode, dag_id, caplog)


@pytest.mark.parametrize("mode", ["deferrable", "reschedule"])
def test_snapshot_sensor_in_a_dag(mode, airflow_db, lake_hook, namespace, tmp_path, caplog):
    name = f"{namespace}.events"
    before = healthy_table(lake_hook.catalog, name).current_snapshot().snapshot_id
    dag_id = f"sensor_snapshot_{mode}"
    writer = Writer(name, tmp_path / "go", job_id="job-42")
    watcher = open_gate_when_waiting(dag_id, writer)

    run = load_dag("sensor_dags.py", dag_id).test(
        run_conf={"table": name, "after_snapshot_id": before, "job_id": "job-42"}
    )
    watcher.join()
    committed = writer.snapshot_id()
    assert run.state == "success"
    found = run.get_task_instance("wait_for_commit").xcom_pull(task_ids="wait_for_commit")
    assert found["snapshot_id"] == committed and found["summary"]["writer.job-id"] == "job-42"
    _assert_waited(mode, dag_id, caplog)


def _assert_waited(mode: str, dag_id: str, caplog) -> None:
    """The sensor really waited the way its mode says (it did not just succeed on its first check)."""
    if mode == "deferrable":
        assert "running trigger in line" in caplog.text and "Trigger completed" in caplog.text
    else:
        assert _reschedules(dag_id) >= 1


def test_health_maintenance_dag_starts_the_chain_when_the_table_needs_it(airflow_db, lake_hook, namespace):
    name = f"{namespace}.events"
    append_small_files(healthy_table(lake_hook.catalog, name), count=6)
    snapshot = lake_hook.load_table(name).current_snapshot().snapshot_id

    dag = load_dag("lake_health_maintenance.py", "lake_health_maintenance")
    assert dag.get_task("wait_for_health").downstream_task_ids == {"acquire_lease", "expire", "clean"}
    # The Spark steps are marked done without running: this checks the wiring, test_maintenance_dag the steps.
    run = dag.test(run_conf={"table": name, "min_small_files": 5, "max_score": None, "min_input_files": 2},
                   mark_success_pattern="rewrite|expire|clean")
    assert run.state == "success"
    assert {ti.task_id: ti.state for ti in run.get_task_instances()} == {
        **dict.fromkeys(["wait_for_health", "acquire_lease", "plan", "rewrite", "expire", "clean", "release_lease"],
                        "success")}
    report = run.get_task_instance("wait_for_health").xcom_pull(task_ids="wait_for_health")
    plan = run.get_task_instance("plan").xcom_pull(task_ids="plan")
    assert report["crossed"] == ["small_files 6 >= 5 (min_small_files)"]
    assert report["thresholds"] == {"min_small_files": 5, "min_delete_ratio": 0.05}
    assert plan["snapshot_id"] == report["snapshot_id"] == snapshot
    assert plan["totals"]["files"] == 6
