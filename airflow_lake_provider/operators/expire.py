"""Expire snapshots (and the files only they held) in Spark, by the table's own retention or an explicit override."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from airflow_lake_provider.operators.base import LakeMaintenanceOperator, flag_from, snapshot_ids_from
from airflow_lake_provider.core.retention import history_from_table, parse_older_than, resolve_expiry
from airflow_lake_provider.core.snapshots import table_state


class IcebergExpireSnapshotsOperator(LakeMaintenanceOperator):
    """Expire snapshots of a table; Iceberg deletes the files that only expired snapshots held.

    Which snapshots go is decided from metadata in the Airflow worker, before any JVM. By default
    the table's own retention decides, exactly as Iceberg's ``expire_snapshots`` would: its
    ``history.expire.min-snapshots-to-keep`` / ``max-snapshot-age-ms`` / ``max-ref-age-ms``
    properties and every branch's and tag's own settings (tags and branches past their
    ``max-ref-age-ms`` are removed, ``main`` never). ``older_than`` / ``retain_last`` replace the
    table's rules for main only with ``override_table_retention=True``; given without it they are
    refused, so a DAG default can never silently shorten the time travel a table's owner asked for.
    Explicit ``snapshot_ids`` are expired as well. Never expired: the current snapshot, the head
    of a tag or branch that stays, and ``protected_snapshot_ids`` (e.g. the rewrite's output, pulled
    from XCom). Spark then expires exactly those IDs, re-checking them first. When nothing is to
    expire and no ref to remove, no Spark application is started.

    Returns ``{table, snapshot_id, expired_snapshot_ids, removed_refs, deleted_files: {data_files,
    position_delete_files, equality_delete_files, manifests, manifest_lists, statistics_files},
    snapshot_id_after, retention_source, kept: {id: rule}, removed: {id: rule}, removed_ref_reasons:
    {ref: rule}}``. The log lists the rule that kept or removed every snapshot.

    :param override_table_retention: apply ``older_than`` / ``retain_last`` instead of the table's
        own retention for main (templated; default false).
    :param older_than: with the override, a duration (``"7d"``, ``"36h"``, ``"P3D"``) or a timestamp
        (templated); empty: the table's ``max-snapshot-age-ms``.
    :param retain_last: with the override, keep at least this many snapshots of main (>= 1,
        templated); empty: the table's ``min-snapshots-to-keep``.
    :param snapshot_ids: explicit snapshot IDs to expire (templated).
    :param protected_snapshot_ids: IDs, lists, or upstream step results whose snapshots must stay.
    :param dry_run: decide and report, change nothing.
    """

    template_fields: Sequence[str] = (
        *LakeMaintenanceOperator.template_fields,
        "override_table_retention", "older_than", "retain_last", "snapshot_ids", "protected_snapshot_ids", "dry_run",
    )

    def __init__(
        self,
        *,
        override_table_retention: bool = False,
        older_than: Any = None,
        retain_last: int | None = None,
        snapshot_ids: Any = None,
        protected_snapshot_ids: Any = None,
        dry_run: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.override_table_retention = override_table_retention
        self.older_than = older_than
        self.retain_last = retain_last
        self.snapshot_ids = snapshot_ids
        self.protected_snapshot_ids = protected_snapshot_ids
        self.dry_run = dry_run

    def execute(self, context: Any) -> dict[str, Any]:
        now_ms = int(time.time() * 1000)
        override = flag_from(self.override_table_retention, "override_table_retention")
        cutoff = parse_older_than(self.older_than, now_ms=now_ms)
        retain_last = None if self.retain_last in (None, "", "None") else self.retain_last
        explicit = snapshot_ids_from(self.snapshot_ids)
        protected = snapshot_ids_from(self.protected_snapshot_ids)
        table = self.load_table()
        name = self.table_identifier.dotted
        history = history_from_table(table)
        decision = resolve_expiry(
            history, now_ms=now_ms, override_table_retention=override, older_than_ms=cutoff, retain_last=retain_last,
            snapshot_ids=explicit, protected_ids=protected,
        )
        source = "override" if override else "table"
        self.log.info("Retention of %s (%s):\n%s", name,
                      "override_table_retention: the values given replace the table's rules for main" if override
                      else "the table's own settings", decision.explain())
        current = table.current_snapshot()
        before = table_state(table)
        explained = decision.to_dict()
        base = {"table": name, "snapshot_id": current.snapshot_id if current else None, "retention_source": source,
                "kept": explained["kept"], "removed": explained["removed"],
                "removed_ref_reasons": explained["removed_refs"], "dry_run": bool(self.dry_run)}
        removed_refs = sorted(decision.removed_refs)
        if self.dry_run or not (decision.expire_ids or removed_refs):
            self.log.info("%s %d snapshots of %s: %s; refs: %s", "Would expire" if self.dry_run else "Nothing to expire;",
                          len(decision.expire_ids), name, list(decision.expire_ids), removed_refs)
            self.log_summary(before, f"dry run, would expire {len(decision.expire_ids)} snapshots" if self.dry_run
                             else "nothing to expire", changed=False)
            return {**base, "expired_snapshot_ids": [], "removed_refs": [],
                    "would_expire_snapshot_ids": list(decision.expire_ids), "would_remove_refs": removed_refs,
                    "deleted_files": {}, "snapshot_id_after": base["snapshot_id"]}
        result = self.run_job(
            "expire",
            {"table": name, "snapshot_ids": list(decision.expire_ids), "protected_ids": protected,
             "refs": {ref.name: ref.snapshot_id for ref in history.refs}, "removed_refs": removed_refs},
        )
        self.log.info("Expired %d snapshots of %s, removed refs %s; deleted files: %s.",
                      len(result["expired_snapshot_ids"]), name, result["removed_refs"], result["deleted_files"])
        self.log_summary(before, f"expired {len(result['expired_snapshot_ids'])} snapshots, deleted "
                         f"{_count_files(result['deleted_files'])} files no live snapshot needs")
        return {**base, **result}


def _count_files(deleted: dict[str, Any]) -> int:
    return sum(int(v) for v in (deleted or {}).values() if isinstance(v, (int, float)))
