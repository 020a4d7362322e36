"""Plan a compaction from metadata: in the Airflow worker (PyIceberg, no JVM) or, for very large
tables, in a Spark application that never holds every file in one place."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, cast

from airflow_lake_provider.exceptions import LakePlanRefused
from airflow_lake_provider.operators.base import LakeMaintenanceOperator
from airflow_lake_provider.steps.plan import PlanStep

if TYPE_CHECKING:
    from airflow.sdk import Context

#: XCom key under which a refused plan leaves its message, for alerts and people reading the run.
#: Every plan that runs pushes it: ``""`` when not refused (a stored ``None`` reads as never pushed).
REFUSED_XCOM_KEY = "refused"
NOT_REFUSED = ""


class IcebergRewritePlanOperator(LakeMaintenanceOperator):
    """Returns the plan as the XCom ``return_value`` (with no file groups when there is nothing to
    do: the rewrite then skips itself). A refused plan leaves its message in the XCom key
    ``refused`` (for alerts and people; in the maintenance group the steps after it do not run and
    the run fails)."""

    step_class = PlanStep
    emits_table_events = False  # it only reads the table

    def step(self, context: Context) -> PlanStep:
        start, end = context.get("data_interval_start"), context.get("data_interval_end")
        return dataclasses.replace(cast("PlanStep", super().step(context)), data_interval=(start, end))

    def execute(self, context: Context) -> dict[str, Any]:
        self.coerce_rendered_fields()
        context["ti"].xcom_push(key=REFUSED_XCOM_KEY, value=NOT_REFUSED)
        try:
            plan = self.run_step(self.step(context), context)
        except LakePlanRefused as refusal:
            context["ti"].xcom_push(key=REFUSED_XCOM_KEY, value=str(refusal))
            raise
        return plan
