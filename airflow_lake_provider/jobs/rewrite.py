"""Rewrite data files (compaction) of exactly the planned partitions, and report honestly.

Args (JSON): ``table``, ``planned_snapshot_id``, ``partitions`` (``[{"spec_id", "partition":
{field: value}}]`` or null for the whole table), ``strategy`` (binpack / sort / zorder),
``sort_order`` ("col [ASC|DESC] [NULLS FIRST|LAST], ..."), ``zorder_columns``, ``options``
(Iceberg rewrite options), ``rewrite_position_deletes``, ``rewrite_manifests`` and
``snapshot_properties`` (put on every commit, so a retried task can find its own work).

Iceberg only logs a file group whose commit was dropped under partial progress; this job
checks every group against the files its own commits actually removed and reports the
shortfall in ``failed_groups``.
"""

from __future__ import annotations

import re
from typing import Any

from airflow_lake_provider.jobs import iceberg

_ORDER_TERM = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)(?:\s+(ASC|DESC))?(?:\s+NULLS\s+(FIRST|LAST))?\s*$", re.I)
_TRANSFORM = re.compile(r"^(bucket|truncate)\[(\d+)\]$")


class PlannedSnapshotGone(Exception):
    """The planned snapshot is no longer the current snapshot or one of its ancestors."""


def _partition_expression(spark, jtable, partitions: list[dict[str, Any]]):
    """OR over planned partitions of AND over their fields: ``term(field) == value``."""
    exprs = spark.sparkContext._jvm.org.apache.iceberg.expressions.Expressions
    schema = jtable.schema()
    any_partition = exprs.alwaysFalse()
    for item in partitions:
        spec = jtable.specs().get(int(item["spec_id"]))
        values = item.get("partition") or {}
        clause = exprs.alwaysTrue()
        for field in spec.fields():
            name = str(field.name())
            if name not in values:
                continue
            source = str(schema.findColumnName(field.sourceId()))
            transform = str(field.transform())
            if transform == "identity":
                term = exprs.ref(source)
            elif transform in ("year", "month", "day", "hour"):
                term = getattr(exprs, transform)(source)
            elif _TRANSFORM.match(transform):
                kind, width = _TRANSFORM.match(transform).groups()
                term = getattr(exprs, kind)(source, int(width))
            else:
                raise ValueError(f"Cannot filter on partition field {name!r} with transform {transform}")
            value = values[name]
            predicate = exprs.isNull(term) if value is None else exprs.equal(term, value)
            clause = getattr(exprs, "and")(clause, predicate)  # `and`/`or` are Python keywords
        any_partition = getattr(exprs, "or")(any_partition, clause)
    return any_partition


def _sort_order(spark, jtable, text: str | None):
    builder = spark.sparkContext._jvm.org.apache.iceberg.SortOrder.builderFor(jtable.schema())
    if not text:
        return None
    for part in text.split(","):
        match = _ORDER_TERM.match(part)
        if not match:
            raise ValueError(f"Cannot read sort order term {part.strip()!r}: write 'column [ASC|DESC] [NULLS FIRST|LAST]'")
        column, direction, nulls = match.group(1), (match.group(2) or "ASC").upper(), (match.group(3) or "").upper()
        null_order = spark.sparkContext._jvm.org.apache.iceberg.NullOrder
        if not nulls:
            nulls = "FIRST" if direction == "ASC" else "LAST"
        order = null_order.NULLS_FIRST if nulls == "FIRST" else null_order.NULLS_LAST
        builder = builder.asc(column, order) if direction == "ASC" else builder.desc(column, order)
    return builder.build()


def _removed_by_partition(spark, jtable, snapshots) -> dict[str, int]:
    counts: dict[str, int] = {}
    for snapshot in snapshots:
        for data_file in snapshot.removedDataFiles(jtable.io()):
            key = iceberg.partition_path(jtable, int(data_file.specId()), data_file.partition())
            counts[key] = counts.get(key, 0) + 1
    return counts


def run(spark, catalog: str, args: dict[str, Any]) -> dict[str, Any]:
    table_name = args["table"]
    props = {str(k): str(v) for k, v in (args.get("snapshot_properties") or {}).items()}
    jtable = iceberg.load_table(spark, catalog, table_name)
    before = iceberg.current_snapshot_id(jtable)
    planned = args.get("planned_snapshot_id")
    if planned is not None and not iceberg.is_ancestor(spark, jtable, int(planned)):
        raise PlannedSnapshotGone(
            f"Planned snapshot {planned} of {table_name} is no longer the current snapshot ({before}) "
            "or one of its ancestors: the table was rolled back or the snapshot expired. Plan again."
        )

    action = iceberg.with_properties(iceberg.actions(spark).rewriteDataFiles(jtable), props)
    for key, value in (args.get("options") or {}).items():
        action = action.option(str(key), str(value))
    strategy = args.get("strategy") or "binpack"
    if strategy == "sort":
        order = _sort_order(spark, jtable, args.get("sort_order"))
        action = action.sort(order) if order is not None else action.sort()
    elif strategy == "zorder":
        action = action.zOrder(iceberg.java_string_array(spark, list(args["zorder_columns"])))
    partitions = args.get("partitions")
    if partitions is not None:
        action = action.filter(_partition_expression(spark, jtable, partitions))

    result = action.execute()
    groups = []
    for group in result.rewriteResults():
        info = group.info()
        groups.append(
            {
                "partition": iceberg.partition_path(jtable, int(jtable.spec().specId()), info.partition()),
                "global_index": int(info.globalIndex()),
                "rewritten_data_files": int(group.rewrittenDataFilesCount()),
                "added_data_files": int(group.addedDataFilesCount()),
                "rewritten_bytes": int(group.rewrittenBytesCount()),
            }
        )
    failed_groups = [
        {"partition": iceberg.partition_path(jtable, int(jtable.spec().specId()), f.info().partition()),
         "global_index": int(f.info().globalIndex()), "data_files": int(f.dataFilesCount()),
         "reason": "rewrite failed"}
        for f in result.rewriteFailures()
    ]

    ours = [s for s in iceberg.snapshots_after(jtable, before) if all(iceberg.summary(s).get(k) == v for k, v in props.items())]
    data_commits = [s for s in ours if str(s.operation()) == "replace"]
    removed = _removed_by_partition(spark, jtable, data_commits)
    confirmed: list[dict[str, Any]] = []
    for group in sorted(groups, key=lambda g: g["global_index"]):
        available = removed.get(group["partition"], 0)
        if available >= group["rewritten_data_files"]:
            removed[group["partition"]] = available - group["rewritten_data_files"]
            confirmed.append(group)
        else:
            failed_groups.append({**group, "reason": "commit dropped (conflict with a concurrent commit)"})

    removed_delete_files = int(result.removedDeleteFilesCount())
    position_deletes: dict[str, int] | None = None
    if args.get("rewrite_position_deletes"):
        pd_action = iceberg.with_properties(iceberg.actions(spark).rewritePositionDeletes(jtable), props)
        for key, value in (args.get("position_delete_options") or {"rewrite-all": "true"}).items():
            pd_action = pd_action.option(str(key), str(value))
        pd = pd_action.execute()
        position_deletes = {
            "rewritten_delete_files": int(pd.rewrittenDeleteFilesCount()),
            "added_delete_files": int(pd.addedDeleteFilesCount()),
        }
        removed_delete_files += position_deletes["rewritten_delete_files"] - position_deletes["added_delete_files"]
    manifests: dict[str, int] | None = None
    if args.get("rewrite_manifests"):
        rm = iceberg.with_properties(iceberg.actions(spark).rewriteManifests(jtable), props).execute()
        manifests = {
            "rewritten_manifests": len(list(rm.rewrittenManifests())),
            "added_manifests": len(list(rm.addedManifests())),
        }

    after = iceberg.current_snapshot_id(jtable)
    ours = [s for s in iceberg.snapshots_after(jtable, before) if all(iceberg.summary(s).get(k) == v for k, v in props.items())]
    return {
        "table": table_name,
        "snapshot_id_before": before,
        "committed_snapshot_ids": [int(s.snapshotId()) for s in ours],
        "snapshot_id_after": after,
        "rewritten_data_files": sum(g["rewritten_data_files"] for g in confirmed),
        "added_data_files": sum(g["added_data_files"] for g in confirmed),
        "rewritten_bytes": sum(g["rewritten_bytes"] for g in confirmed),
        "removed_delete_files": removed_delete_files,
        "groups": confirmed,
        "failed_groups": failed_groups,
        "position_deletes": position_deletes,
        "manifests": manifests,
        "strategy": strategy,
    }
