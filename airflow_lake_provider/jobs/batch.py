"""Several jobs in one Spark application: a fleet's heavy work for one JVM start.

Takes :class:`~airflow_lake_provider.core.contracts.BatchJobArgs` (``{"jobs": [{"job", "args"}]}``)
and runs each job's ``run`` in this session, one after another, returning
:class:`~airflow_lake_provider.core.contracts.BatchJobResult`. A job that fails is reported in
its place, with the same error class and message it would report alone, and the next job still
runs: one broken table does not hold up the others. Each job keeps all of its own guarantees
(commit checks, retries, its own snapshot properties): the batch only shares the session.
"""

from __future__ import annotations

import importlib
from typing import Any

from airflow_lake_provider.core.contracts import BatchItemOutcome, BatchJobArgs, BatchJobResult
from airflow_lake_provider.core.job_registry import job_named
from airflow_lake_provider.jobs.results import describe_failure


def run(spark, catalog: str, args: dict[str, Any]) -> dict[str, Any]:
    batch = BatchJobArgs.from_json(args).validate()
    outcomes = []
    for number, item in enumerate(batch.jobs, 1):
        print(f"batch: job {number}/{len(batch.jobs)}: {item.job} of {item.args.get('table')}", flush=True)
        try:
            result = importlib.import_module(job_named(item.job).module).run(spark, catalog, item.args)
            outcomes.append(BatchItemOutcome(status="success", result=result))
        except Exception as error:  # noqa: BLE001 - reported in its place; the next job still runs
            failure = describe_failure(error)
            print(f"batch: job {number} failed: {failure['error_class']}: {failure['message']}", flush=True)
            outcomes.append(BatchItemOutcome(status="failed", error_class=failure["error_class"],
                                             message=failure["message"]))
    return BatchJobResult(outcomes=outcomes).to_json()
