"""`make demo`, the README's first command, as a newcomer runs it: the demo table in the embedded lake,
the shipped ``lake_maintenance`` DAG on it with its defaults, and what the demo prints.

Checked as the newcomer reads it: under 60 lines; each step's effect in its own sentences (the plan,
the rewrite's files, the table's own retention expiring the back-dated half of the history, the dead
writer's files quarantined); the table before and after. Then what they would open next: each task's
log, read by Airflow's own log reader (the UI's), holds the sentences the demo printed, and no record
of the green run is at error level.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark_submit, pytest.mark.slow]

DEMO = Path(__file__).resolve().parent.parent / "scripts" / "demo.py"


def test_make_demo_shows_every_step_working_and_its_logs_read_in_airflow(airflow_db):
    (airflow_db / ".lake-demo-db-ready").touch()  # the session's database is migrated already
    demo = subprocess.run([sys.executable, str(DEMO)], capture_output=True, text=True, timeout=600)
    assert demo.returncode == 0, demo.stdout + demo.stderr
    printed = demo.stdout
    lines = printed.splitlines()
    text = "\n".join(lines)
    assert len(lines) < 60, text
    assert "the run ended success" in text and "failed" not in text, text
    for effect in (r"Plan \(\w+\) for demo\.events at snapshot \d+: 4 groups, 160 files",
                   r"Summary for demo\.events: rewrote 160 data files .* into 4, removed 160 delete files",
                   r"81 snapshots removed: on branch main, .* older than max-snapshot-age-ms=432000000 \(5d, Iceberg default\)",
                   r"Summary for demo\.events: expired 81 snapshots",
                   r"3 orphan files moved to quarantine run \S+ .*IcebergRestoreQuarantineOperator",
                   r"after +data files +4 .* delete files +0"):
        assert re.search(effect, text), (effect, text)

    # What the UI would show for each task: its log, read by Airflow's own reader.
    from airflow.models import DagRun
    from airflow.utils.log.log_reader import TaskLogReader

    from airflow_lake_provider.plugins.lake_health import said_in_run

    run = sorted(DagRun.find(dag_id="lake_maintenance"), key=lambda r: r.start_date)[-1]
    said = said_in_run("lake_maintenance", run.run_id)
    assert set(said) == {"plan", "rewrite", "expire", "clean"}, said
    reader = TaskLogReader()
    for ti in run.get_task_instances():
        chunks, _ = reader.read_log_chunks(ti, ti.try_number, {})
        records = [record for record in chunks if getattr(record, "timestamp", None) is not None]
        assert records, ti.task_id  # not an empty log
        assert not [r.event for r in records if getattr(r, "level", "") in ("error", "critical")], ti.task_id
        events = "\n".join(r.event for r in records)
        for sentence in said.get(ti.task_id, ()):
            assert sentence in events, (ti.task_id, sentence)
            assert sentence.replace("\n", "\n  ") in text, (ti.task_id, sentence)  # printed indented
