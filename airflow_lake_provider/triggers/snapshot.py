"""Wait, in the triggerer, for a new snapshot on a branch of a table."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_lake_provider.core.coercion import is_none, mapping, whole_number
from airflow_lake_provider.core.snapshots import ancestry
from airflow_lake_provider.exceptions import LakeConfigError, LakeSnapshotError
from airflow_lake_provider.triggers import (
    DEFAULT_POLL_INTERVAL,
    LakePollingTrigger,
    Probe,
)

if TYPE_CHECKING:
    from pyiceberg.table import Table
    from pyiceberg.table.snapshots import Snapshot


def parse_snapshot_id(value: Any) -> int | None:
    """A snapshot ID from a literal or a rendered template (``None``, ``""`` and ``"None"``: none)."""
    if is_none(value):
        return None
    if isinstance(value, (int, str)) and not isinstance(value, bool):
        try:
            return whole_number(value, "after_snapshot_id")
        except LakeConfigError:
            pass
    raise LakeConfigError(
        f"after_snapshot_id must be a snapshot ID (a 64-bit integer); got {value!r}. From a step's result, "
        "pass the ID itself, e.g. group.rewrite.output['snapshot_id_after'] (an XComArg of the rewrite in "
        "a lake_maintenance_group), or "
        "\"{{ ti.xcom_pull(task_ids='lake_maintenance.rewrite')['snapshot_id_after'] }}\" with the rewrite's "
        "full task id."
    )


def parse_summary_properties(value: Any) -> dict[str, str]:
    """Summary properties to match, as strings (snapshot summaries hold strings only)."""
    if is_none(value):
        return {}
    try:
        properties = mapping(value, "summary_properties")
    except LakeConfigError:
        raise LakeConfigError(
            f"summary_properties must be a dict of snapshot summary properties, e.g. "
            f"{{'airflow.run-id': '...'}}; got {type(value).__name__}."
        ) from None
    return {str(k): str(v) for k, v in properties.items()}


def snapshot_record(snapshot: Snapshot, *, table_name: str, branch: str) -> dict[str, Any]:
    """The XCom value for a snapshot: its ID, parent, time and summary."""
    return {
        "table": table_name,
        "branch": branch,
        "snapshot_id": snapshot.snapshot_id,
        "parent_snapshot_id": snapshot.parent_snapshot_id,
        "timestamp_ms": snapshot.timestamp_ms,
        "summary": snapshot.summary.model_dump() if snapshot.summary is not None else {},
    }


def snapshot_probe(
    table: Any,
    *,
    table_name: str,
    branch: str = "main",
    after_snapshot_id: int | None = None,
    summary_properties: dict[str, str] | None = None,
) -> Probe:
    """Find the newest snapshot of ``branch`` newer than ``after_snapshot_id`` matching ``summary_properties``.

    "Newer" means on the branch's lineage and a descendant of ``after_snapshot_id``: the branch
    head moved past it. With no ``after_snapshot_id``, every snapshot of the branch's lineage
    counts. An ``after_snapshot_id`` the table does not know raises :class:`LakeSnapshotError`
    (expired, or from another table): waiting could never end.
    """
    wanted = summary_properties or {}
    head = table.snapshot_by_name(branch)
    if head is None:
        return Probe(False, f"{table_name} has no snapshot on branch {branch!r} yet.")
    if after_snapshot_id is not None and table.snapshot_by_id(after_snapshot_id) is None:
        raise LakeSnapshotError(
            f"Snapshot {after_snapshot_id} is not in the history of {table_name} (branch {branch!r} is at "
            f"{head.snapshot_id}): it was expired, or it belongs to another table."
        )
    newer, reached = [], after_snapshot_id is None
    for snapshot in ancestry(table, head):
        if snapshot.snapshot_id == after_snapshot_id:
            reached = True
            break
        newer.append(snapshot)
    operation = head.summary.operation.value if head.summary else "?"
    at = f"branch {branch!r} of {table_name} is at snapshot {head.snapshot_id} ({operation}, {head.timestamp_ms} ms)"
    if not reached:
        return Probe(False, f"{at}, which does not descend from snapshot {after_snapshot_id} (rolled back, or "
                            "that snapshot is on another branch).")
    matches = [s for s in newer if all(s.summary is not None and s.summary.get(k) == v for k, v in wanted.items())]
    if matches:
        found = matches[0]
        return Probe(True, f"{at}; snapshot {found.snapshot_id} matches.",
                     snapshot_record(found, table_name=table_name, branch=branch))
    since = f" since snapshot {after_snapshot_id}" if after_snapshot_id is not None else ""
    if not newer:
        return Probe(False, f"{at}: no newer snapshot{since} yet.")
    return Probe(False, f"{at}: {len(newer)} snapshots{since}, none whose summary has {wanted}.")


class IcebergSnapshotTrigger(LakePollingTrigger):
    """Poll a table until its branch has a snapshot newer than ``after_snapshot_id`` and/or
    whose summary holds ``summary_properties``; the event carries that snapshot.

    :param branch: the branch whose lineage is searched (default ``main``).
    :param after_snapshot_id: the snapshot the branch head must move past.
    :param summary_properties: snapshot summary properties the snapshot must hold.
    """

    def __init__(
        self,
        *,
        table: str,
        branch: str = "main",
        after_snapshot_id: int | None = None,
        summary_properties: dict[str, str] | None = None,
        lake_conn_id: str = "lake_default",
        poll_interval: float = DEFAULT_POLL_INTERVAL,
        timeout_at: float | None = None,
    ) -> None:
        super().__init__(table=table, lake_conn_id=lake_conn_id, poll_interval=poll_interval, timeout_at=timeout_at)
        self.branch = branch
        self.after_snapshot_id = parse_snapshot_id(after_snapshot_id)
        self.summary_properties = parse_summary_properties(summary_properties)

    def check_kwargs(self) -> dict[str, Any]:
        return {
            "branch": self.branch,
            "after_snapshot_id": self.after_snapshot_id,
            "summary_properties": dict(self.summary_properties),
        }

    def check_table(self, table: Table) -> Probe:
        return snapshot_probe(
            table,
            table_name=self.table_name,
            branch=self.branch,
            after_snapshot_id=self.after_snapshot_id,
            summary_properties=self.summary_properties,
        )
