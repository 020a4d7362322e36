"""Whether a table needs maintenance now, and why: the test an event-driven trigger polls.

A table needs work as soon as ANY given threshold is crossed: its health (score, small files,
delete ratio, snapshots: :class:`~airflow_lake_provider.core.health.HealthThresholds`) or the
number of commits since its last maintenance. "The last maintenance" is read from the table's own
history: every commit this package makes carries ``airflow.*`` snapshot summary properties naming
the Airflow run (``core.contracts.AirflowRun.snapshot_properties``), so no state is kept anywhere else.
Pure logic over PyIceberg metadata: no Airflow, no Spark.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_lake_provider.core.airflow_run import RUN_PROPERTY_PREFIX
from airflow_lake_provider.core.coercion import is_none, whole_number
from airflow_lake_provider.core.health import HealthThresholds, TableHealth, parse_thresholds, table_health
from airflow_lake_provider.core.snapshots import ancestry
from airflow_lake_provider.exceptions import LakeConfigError

if TYPE_CHECKING:
    from pyiceberg.table import Table
    from pyiceberg.table.snapshots import Snapshot


def is_maintenance_commit(snapshot: Snapshot) -> bool:
    summary = snapshot.summary
    return summary is not None and any(
        str(key).startswith(RUN_PROPERTY_PREFIX) for key in summary.additional_properties)


def commits_since_maintenance(table: Table) -> tuple[int, int | None]:
    """Commits on main after the last maintenance commit, and that commit's snapshot ID.

    With no maintenance commit in the (unexpired) history every commit counts, and the ID is ``None``.
    """
    count = 0
    for snapshot in ancestry(table) if table.current_snapshot() is not None else ():
        if is_maintenance_commit(snapshot):
            return count, snapshot.snapshot_id
        count += 1
    return count, None


@dataclass(frozen=True)
class MaintenanceNeed:
    """The thresholds of "needs work now"; any one crossed suffices.

    :param max_score: health score at or under this (0-100).
    :param min_small_files: at least this many small data files.
    :param min_delete_ratio: delete records per data record at least this (0 < r <= 1).
    :param min_snapshots: at least this many snapshots.
    :param min_commits: at least this many commits since the last maintenance commit.
    """

    health: HealthThresholds | None = None
    min_commits: int | None = None

    @classmethod
    def parse(cls, *, max_score: Any = None, min_small_files: Any = None, min_delete_ratio: Any = None,
              min_snapshots: Any = None, min_commits: Any = None) -> MaintenanceNeed:
        health_values = {"max_score": max_score, "min_small_files": min_small_files,
                         "min_delete_ratio": min_delete_ratio, "min_snapshots": min_snapshots}
        commits = None if is_none(min_commits) else whole_number(min_commits, "min_commits", minimum=1)
        given = {k: v for k, v in health_values.items() if not is_none(v)}
        if not given and commits is None:
            raise LakeConfigError(
                "Say when a table needs maintenance: give at least one of max_score, min_small_files, "
                "min_delete_ratio, min_snapshots or min_commits (any one crossed starts a run).")
        return cls(HealthThresholds(**parse_thresholds(given)) if given else None, commits)

    def to_dict(self) -> dict[str, Any]:
        return {**(self.health.to_dict() if self.health else {}),
                **({"min_commits": self.min_commits} if self.min_commits is not None else {})}

    def reasons(self, health: TableHealth, commits: int) -> list[str]:
        """The thresholds crossed, each a sentence (empty: the table needs nothing now)."""
        found = self.health.crossed(health) if self.health else []
        if self.min_commits is not None and commits >= self.min_commits:
            found.append(f"{commits} commits since the last maintenance >= {self.min_commits} (min_commits)")
        return found


def assess(table: Table, need: MaintenanceNeed, *, table_name: str) -> dict[str, Any]:
    """The table's need now: ``{snapshot_id, reasons, score, commits_since_maintenance,
    last_maintenance_snapshot_id}``."""
    health = table_health(table, table_name=table_name)
    commits, last = commits_since_maintenance(table)
    return {"table": table_name, "snapshot_id": health.snapshot_id, "reasons": need.reasons(health, commits),
            "score": health.score, "small_files": health.small_files, "commits_since_maintenance": commits,
            "last_maintenance_snapshot_id": last}
