"""The application spark-submit starts: ``main.py SPEC_PATH``.

Reads the JSON spec, opens a Spark session with the catalog, runs the named job and writes
``{"status": "success", "result": {...}}`` or ``{"status": "failed", "error_class", "message"}``
to the spec's ``result_location``. A failure is also printed as one ``LAKE_JOB_ERROR`` line so
it stands out in the Airflow task log, and the process exits non-zero.
"""

from __future__ import annotations

import importlib
import json
import sys


def _load_spec(path: str) -> dict:
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def _spark_application(spark) -> dict:
    """The application's id (the task links to it in Spark's history server) and the OpenLineage parent
    the driver was given (Spark's OpenLineage listener links its run to it, the task's log shows the
    link); none when the job never started Spark (``DeferredSparkSession``)."""
    if not getattr(spark, "started", True):
        return {"application_id": None, "lineage_parent": {}}
    return {"application_id": spark.sparkContext.applicationId,
            "lineage_parent": {key: value for key, value in spark.sparkContext.getConf().getAll()
                               if key.startswith("spark.openlineage.parent")}}


def main(argv: list[str]) -> int:
    # Imported here so a missing package is reported through the result file like any failure.
    from airflow_lake_provider.core.job_registry import job_named
    from airflow_lake_provider.jobs.results import (
        RESULT_MARKER,
        describe_failure,
        write_result,
    )
    from airflow_lake_provider.jobs.session import DeferredSparkSession, build_session

    spec = _load_spec(argv[1])
    location = spec["result_location"]
    spark = None
    try:
        job = importlib.import_module(job_named(spec["job"]).module)
        spark = DeferredSparkSession(spec) if spec.get("defer_spark_session") else build_session(spec)
        result = job.run(spark, spec["catalog"], spec.get("args") or {})
        write_result(location, {"status": "success", "result": result, **_spark_application(spark)}, spark)
        return 0
    except BaseException as error:  # noqa: BLE001 - every failure must reach the caller
        failure = describe_failure(error)
        print(f"{RESULT_MARKER}: {failure['error_class']}: {failure['message']}", file=sys.stderr, flush=True)
        try:
            write_result(location, failure, spark)
        except Exception as write_error:  # noqa: BLE001
            print(f"{RESULT_MARKER}: could not write the result: {write_error}", file=sys.stderr, flush=True)
        return 1
    finally:
        if spark is not None:
            spark.stop()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
