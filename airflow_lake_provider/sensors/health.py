"""Wait until a table needs maintenance: small files, deletes, snapshots or a low health score."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow_lake_provider.core.health import HealthThresholds, parse_thresholds
from airflow_lake_provider.sensors import LakeSensor
from airflow_lake_provider.triggers.health import (
    DEFAULT_MAX_PARTITIONS,
    IcebergTableHealthTrigger,
)


class IcebergTableHealthSensor(LakeSensor):
    """Succeed when a table crosses ANY of the given health thresholds; return its health report.

    Give at least one threshold; the sensor fires as soon as any one of them is crossed:

    * ``min_small_files``: small data files (below 75% of the table's target size) >= n;
    * ``min_delete_ratio``: delete records per data record >= r (0 < r <= 1);
    * ``min_snapshots``: snapshots kept >= k;
    * ``max_score``: health score (0-100, docs/health-score.md) <= s.

    The XCom ``return_value`` is the health report: table and per-partition figures (the
    ``max_partitions`` worst partitions), ``score`` and ``score_parts``, plus ``crossed`` (which
    thresholds fired) and ``thresholds``. Literal thresholds are checked when the DAG is parsed;
    templated ones (strings) once rendered. A missing table is waited on, not an error.
    Modes ``poke`` and ``reschedule``; ``deferrable=True`` waits in the triggerer
    (:class:`~airflow_lake_provider.triggers.health.IcebergTableHealthTrigger`).

    :param table: the table, ``namespace.table`` (templated).
    :param min_small_files: fire at this many small data files (templated).
    :param min_delete_ratio: fire at this delete ratio (templated).
    :param min_snapshots: fire at this many snapshots (templated).
    :param max_score: fire at this health score or lower (templated).
    :param max_partitions: how many of the worst partitions the report lists (default 20).
    """

    template_fields: Sequence[str] = (
        *LakeSensor.template_fields, "min_small_files", "min_delete_ratio", "min_snapshots", "max_score",
    )

    def __init__(
        self,
        *,
        min_small_files: int | None = None,
        min_delete_ratio: float | None = None,
        min_snapshots: int | None = None,
        max_score: float | None = None,
        max_partitions: int = DEFAULT_MAX_PARTITIONS,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.min_small_files = min_small_files
        self.min_delete_ratio = min_delete_ratio
        self.min_snapshots = min_snapshots
        self.max_score = max_score
        self.max_partitions = max_partitions
        parse_thresholds(self._threshold_values(), keep_strings=True)  # literal ones fail at parse time

    def _threshold_values(self) -> dict[str, Any]:
        return {
            "min_small_files": self.min_small_files,
            "min_delete_ratio": self.min_delete_ratio,
            "min_snapshots": self.min_snapshots,
            "max_score": self.max_score,
        }

    def make_trigger(self, *, timeout_at: float | None = None) -> IcebergTableHealthTrigger:
        return IcebergTableHealthTrigger(
            table=self.table,
            thresholds=HealthThresholds.parse(**self._threshold_values()).to_dict(),
            max_partitions=self.max_partitions,
            lake_conn_id=self.lake_conn_id,
            poll_interval=self.poke_interval,
            timeout_at=timeout_at,
        )
