"""Extra links on the maintenance tasks' page in the Airflow UI."""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseOperatorLink


class SparkHistoryLink(BaseOperatorLink):
    """The task's Spark application in the Spark history server.

    Shown when the Spark connection names its history server (extra ``history_server_url``,
    e.g. ``http://spark-history:18080``). When the task ends, Airflow asks this link for its URL
    in the worker and stores it in XCom under ``xcom_key``, so the UI shows it without the
    worker: the operator keeps the URL of the application it ran in ``spark_application_url``.
    """

    name = "Spark application"

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        return getattr(operator, "spark_application_url", None) or ""
