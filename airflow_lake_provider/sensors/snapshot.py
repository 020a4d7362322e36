"""Wait for a new snapshot of a table: past a known snapshot, or with given summary properties."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow_lake_provider.exceptions import LakeConfigError
from airflow_lake_provider.sensors import LakeSensor
from airflow_lake_provider.triggers.snapshot import (
    IcebergSnapshotTrigger,
    parse_snapshot_id,
    parse_summary_properties,
)


class IcebergSnapshotSensor(LakeSensor):
    """Succeed when ``branch`` of a table has a snapshot newer than ``after_snapshot_id`` and/or
    one whose summary holds all of ``summary_properties``; return that snapshot.

    "Newer" means the branch head moved past ``after_snapshot_id``: the snapshot is on the
    branch's lineage and descends from it (a rollback to an older snapshot does not count).
    With both arguments, the snapshot must be newer *and* match. With ``after_snapshot_id``
    rendering to ``None`` (e.g. the table was empty when it was read) and no properties, any
    snapshot of the branch counts. Of several matches, the newest is returned.

    The XCom ``return_value`` is ``{table, branch, snapshot_id, parent_snapshot_id,
    timestamp_ms, summary}``. An ``after_snapshot_id`` the table does not know fails the task
    (expired, or another table's); a missing table is waited on. Modes ``poke`` and
    ``reschedule``; ``deferrable=True`` waits in the triggerer
    (:class:`~airflow_lake_provider.triggers.snapshot.IcebergSnapshotTrigger`).

    :param table: the table, ``namespace.table`` (templated).
    :param after_snapshot_id: the snapshot the branch must move past (templated, e.g. from XCom).
    :param summary_properties: snapshot summary properties to match, e.g. a writer's job id (templated).
    :param branch: the branch (templated, default ``main``).
    """

    template_fields: Sequence[str] = (*LakeSensor.template_fields, "after_snapshot_id", "summary_properties", "branch")

    def __init__(
        self,
        *,
        after_snapshot_id: int | None = None,
        summary_properties: dict[str, Any] | None = None,
        branch: str = "main",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if after_snapshot_id is None and not summary_properties:
            raise LakeConfigError(
                "IcebergSnapshotSensor needs after_snapshot_id (wait for the branch to move past it) and/or "
                "summary_properties (wait for a snapshot whose summary holds them)."
            )
        if not isinstance(after_snapshot_id, str):
            parse_snapshot_id(after_snapshot_id)
        if not isinstance(summary_properties, str):
            parse_summary_properties(summary_properties)
        self.after_snapshot_id = after_snapshot_id
        self.summary_properties = summary_properties
        self.branch = branch

    def make_trigger(self, *, timeout_at: float | None = None) -> IcebergSnapshotTrigger:
        return IcebergSnapshotTrigger(
            table=self.table,
            branch=self.branch or "main",
            after_snapshot_id=self.after_snapshot_id,
            summary_properties=self.summary_properties,
            lake_conn_id=self.lake_conn_id,
            poll_interval=self.poke_interval,
            timeout_at=timeout_at,
        )
