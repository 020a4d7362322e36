"""The ``batch`` job (several tables' jobs in one Spark application), in the shared Spark session:
each job does what it does alone, and one that fails leaves the next to run."""

from __future__ import annotations

import pytest

from airflow_lake_provider.core.contracts import BatchJobArgs, BatchJobResult
from airflow_lake_provider.exceptions import LakeConfigError
from airflow_lake_provider.hooks.spark_job import LakeSparkJobHook
from airflow_lake_provider.jobs import batch as batch_job
from demo_data import create_events_table
from lake_checks import live_files, table_fingerprint


def _rewrite(table: str) -> dict:
    return {"job": "rewrite", "args": {"table": table, "options": {"min-input-files": "2"},
                                      "snapshot_properties": {"airflow.task-id": "fleet-rewrite"}}}


def test_a_failing_table_does_not_stop_the_others(spark, lake_hook, namespace):
    first, second, missing = f"{namespace}.first", f"{namespace}.second", f"{namespace}.missing"
    for name in (first, second):
        create_events_table(lake_hook.catalog, name, days=2, commits_per_day=6, rows_per_commit=10)
    before = {name: table_fingerprint(lake_hook.load_table(name)) for name in (first, second)}

    result = BatchJobResult.from_json(batch_job.run(spark, "lake", {"jobs": [
        _rewrite(first), _rewrite(missing), _rewrite(second)]}))

    assert [o.status for o in result.outcomes] == ["success", "failed", "success"]
    assert missing.split(".")[1] in result.outcomes[1].message and result.outcomes[1].result is None
    for name, outcome in ((first, result.outcomes[0]), (second, result.outcomes[2])):
        table = lake_hook.load_table(name)
        assert live_files(table)["DATA"] == 2  # 12 small files -> one per day
        assert table_fingerprint(table) == before[name]  # same rows
        assert outcome.result["table"] == name
        assert outcome.result["snapshot_id_after"] == table.current_snapshot().snapshot_id
        assert outcome.result["rewritten_data_files"] == 12


@pytest.mark.parametrize("jobs, message", [
    ([], "needs at least one job"),
    ([{"job": "batch", "args": {}}], "cannot hold another batch"),
    ([{"job": "drop_table", "args": {}}], "Unknown jobs in the batch: 'drop_table'"),
])
def test_a_bad_batch_is_refused_before_a_jvm(lake_hook, jobs, message):
    with pytest.raises(LakeConfigError, match=message):
        LakeSparkJobHook(lake_hook=lake_hook).run(BatchJobArgs.from_json({"jobs": jobs}))
