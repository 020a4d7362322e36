"""The Airflow task try that ran a step, one identity wherever it is written down.

A step's job arguments carry it, the quarantine manifest names it, a commit's snapshot summary
properties spell it (``RUN_PROPERTY_PREFIX``), a lease names its holder by it. Pure Python: it
ships to the Spark driver with the jobs.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from airflow_lake_provider.core.contract_base import Contract

#: The prefix of the snapshot summary properties that name the Airflow run behind a commit.
RUN_PROPERTY_PREFIX = "airflow."


@dataclasses.dataclass(frozen=True, kw_only=True)
class AirflowRun(Contract):
    """The Airflow task try that ran a step: one identity, in every shape it is written down
    (a quarantine manifest, snapshot summary properties, a lease's holder)."""

    what = "Airflow run"

    dag_id: str
    run_id: str
    task_id: str
    try_number: int | None = None
    map_index: int = -1

    @classmethod
    def of_task_instance(cls, ti: Any) -> AirflowRun:
        """The run of an Airflow task instance (``context["ti"]``, read by its attributes)."""
        return cls(dag_id=ti.dag_id, run_id=ti.run_id, task_id=ti.task_id, try_number=getattr(ti, "try_number", None),
                   map_index=getattr(ti, "map_index", -1))

    def snapshot_properties(self) -> dict[str, str]:
        """The snapshot summary properties (``RUN_PROPERTY_PREFIX``) naming the run that made a commit: a
        retried task finds its own earlier commit by them, the event-driven trigger the last maintenance."""
        return {f"{RUN_PROPERTY_PREFIX}dag-id": self.dag_id, f"{RUN_PROPERTY_PREFIX}run-id": self.run_id,
                f"{RUN_PROPERTY_PREFIX}task-id": self.task_id, f"{RUN_PROPERTY_PREFIX}map-index": str(self.map_index)}

    def lease_holder(self, deployment: str) -> str:
        """Who holds a lease, readable in the table's metadata: ``deployment/dag_id/run_id[/map_index]``."""
        parts = [deployment, self.dag_id, self.run_id]
        if self.map_index not in (None, -1, "-1"):
            parts.append(str(self.map_index))
        return "/".join(str(p) for p in parts)
