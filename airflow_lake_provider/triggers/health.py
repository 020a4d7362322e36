"""Wait, in the triggerer, until a table crosses health thresholds."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_lake_provider.core.health import HealthThresholds, table_health
from airflow_lake_provider.triggers import (
    DEFAULT_POLL_INTERVAL,
    LakePollingTrigger,
    Probe,
)

if TYPE_CHECKING:
    from pyiceberg.table import Table

DEFAULT_MAX_PARTITIONS = 20


def health_probe(table: Table, thresholds: HealthThresholds, *, table_name: str, max_partitions: int) -> Probe:
    """Measure ``table`` and compare with ``thresholds``: done when any threshold is crossed.

    The value is the health report (``TableHealth.to_dict``) plus ``crossed`` (sentences naming
    the thresholds crossed) and ``thresholds``.
    """
    health = table_health(table, table_name=table_name)
    crossed = thresholds.crossed(health)
    figures = (
        f"{table_name} at snapshot {health.snapshot_id}: score {health.score}, {health.small_files} small of "
        f"{health.data_files} data files, delete ratio {health.delete_ratio:.2%}, {health.snapshots} snapshots"
    )
    if not crossed:
        return Probe(False, f"{figures}; no threshold crossed ({thresholds.to_dict()}).")
    report = {**health.to_dict(max_partitions=max_partitions), "crossed": crossed, "thresholds": thresholds.to_dict()}
    return Probe(True, f"{figures}; crossed: {'; '.join(crossed)}.", report)


class IcebergTableHealthTrigger(LakePollingTrigger):
    """Poll a table's health until any of ``thresholds`` is crossed; the event carries the report.

    :param thresholds: validated thresholds as a dict (``HealthThresholds.to_dict()``): any of
        ``min_small_files``, ``min_delete_ratio``, ``min_snapshots``, ``max_score``.
    :param max_partitions: how many of the worst partitions the report lists.
    """

    def __init__(
        self,
        *,
        table: str,
        thresholds: dict[str, Any],
        max_partitions: int = DEFAULT_MAX_PARTITIONS,
        lake_conn_id: str = "lake_default",
        poll_interval: float = DEFAULT_POLL_INTERVAL,
        timeout_at: float | None = None,
    ) -> None:
        super().__init__(table=table, lake_conn_id=lake_conn_id, poll_interval=poll_interval, timeout_at=timeout_at)
        self.thresholds = HealthThresholds.parse(**thresholds).to_dict()
        self.max_partitions = int(max_partitions)

    def check_kwargs(self) -> dict[str, Any]:
        return {"thresholds": dict(self.thresholds), "max_partitions": self.max_partitions}

    def check_table(self, table: Table) -> Probe:
        return health_probe(
            table, HealthThresholds(**self.thresholds), table_name=self.table_name, max_partitions=self.max_partitions
        )
