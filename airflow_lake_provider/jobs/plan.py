"""Plan a binpack compaction in Spark: the plan PyIceberg's planner makes, from distributed metadata.

For tables too large for one Airflow worker's memory (hundreds of thousands of files and
more). Takes :class:`~airflow_lake_provider.core.contracts.SparkPlanJobArgs` and returns
:class:`~airflow_lake_provider.core.contracts.SparkPlanJobResult` (the plan, or a count of
``unaligned_files``).

How it stays equal to :func:`planning.plan_table` (PyIceberg ``plan_files()``):

* **Files**: live entries (status not DELETED) of the snapshot's ``entries`` metadata table,
  without empty files (PyIceberg's metrics evaluator drops ``record_count == 0``).
* **Position delete files** (PyIceberg's and Iceberg's ``DeleteFileIndex``): one whose
  ``file_path`` bounds are one path applies to that data file; any other applies to data files of
  the same spec and partition, when its ``file_path`` bounds (if it has both) cover the data
  file's path. Either way only when its data sequence number is >= the data file's.
* **Equality delete files** (Iceberg 1.10's ``DeleteFileIndex``; PyIceberg refuses them): one
  applies to a data file when its data sequence number is strictly greater than the data file's,
  and it is *global* (its spec is unpartitioned: every data file of every spec) or of the same
  spec and partition, and the column metrics of its equality fields do not rule the file out
  (``canContainEqDeletesForFile``: null counts, then overlapping lower/upper bounds, compared on
  the ``readable_metrics`` of top-level primitive columns; other fields are assumed to match, as
  Iceberg does where it has no metrics). They count towards ``delete-file-threshold``, not towards
  ``delete-ratio-threshold`` (not file-scoped), as in ``BinPackRewriteFilePlanner``.
* **Order** (bin packing is order-sensitive): PyIceberg yields files in manifest-list order,
  then entry order within a manifest. Each entry's manifest is ``input_file_name()`` (Iceberg
  reads one manifest per task, whole and in order); its index in the manifest list plus a
  row id increasing within the task reproduce that order.
* **Planning**: files are grouped by partition in Spark SQL (all files of older specs in one
  group), and the pure :func:`planning.plan_rewrite` plans each group on an executor; only
  group summaries come back to the driver, which applies the budget as plan_rewrite does
  and builds the document with :func:`planning.plan_document`.
* **Filter**: applied to partition values (the inclusive projection). When a file sits in a
  partition the filter only partly selects, the result says ``unaligned_files`` instead of a
  plan, and the caller plans with PyIceberg, which can consult column metrics.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import Any

from airflow_lake_provider.core.contracts import SparkPlanJobArgs, SparkPlanJobResult
from airflow_lake_provider.core.partitions import partition_values
from airflow_lake_provider.core.planning import (
    DataFileInfo,
    RewriteOptions,
    apply_budget,
    budget_measure,
    partition_order,
    plan_document,
    plan_rewrite,
)
from airflow_lake_provider.core.snapshots import counts_no_delete_files
from airflow_lake_provider.jobs import iceberg

# Field id of the ``file_path`` column of position delete files (MetadataColumns.DELETE_FILE_PATH).
DELETE_FILE_PATH_FIELD_ID = 2147483546
_DATA, _POSITION_DELETES, _EQUALITY_DELETES = 0, 1, 2


def _normalised_partition(entries) -> str:
    """SQL for the partition struct with dates as epoch days and timestamps as epoch micros.

    Those are Iceberg's internal values, which PyIceberg hands out and the planner keeps in JSON.
    """
    from pyspark.sql.types import DateType, TimestampNTZType, TimestampType

    data_file = entries.schema["data_file"].dataType
    if "partition" not in data_file.fieldNames():
        return "named_struct('_unpartitioned', CAST(NULL AS INT))"
    parts = []
    for field in data_file["partition"].dataType.fields:
        column = f"data_file.partition.`{field.name}`"
        if isinstance(field.dataType, DateType):
            column = f"unix_date({column})"
        elif isinstance(field.dataType, TimestampType):
            column = f"unix_micros({column})"
        elif isinstance(field.dataType, TimestampNTZType):
            # Wall-clock micros since the epoch, as Iceberg stores a timestamp without zone; the
            # difference of two NTZ values does not depend on the session's time zone.
            column = f"timestampdiff(MICROSECOND, TIMESTAMP_NTZ'1970-01-01 00:00:00', {column})"
        parts.append(f"'{field.name}', {column}")
    return f"named_struct({', '.join(parts)})"


def _metric_column(field_id: int) -> str:
    return f"metrics_{field_id}"


def _file_rows(spark, catalog: str, table: str, snapshot_id: int, manifests: list[str] | None, inclusive: str | None,
               metric_fields: dict[int, tuple[str, bool]]):
    """Live, non-empty entries of the snapshot with what planning needs, each with its scan order.

    ``metric_fields`` (field id -> (column name, required)) adds each column's readable metrics,
    which matching equality deletes needs; empty when the snapshot has none. ``manifests`` (the
    snapshot's manifest list, in order) adds ``manifest_index``; ``None`` leaves the order out.
    """
    entries = spark.read.option("versionAsOf", snapshot_id).table(f"{catalog}.{table}.entries")
    metrics = [f"readable_metrics.`{name}` AS {_metric_column(field_id)}"
               for field_id, (name, _) in metric_fields.items()]
    rows = entries.where("status != 2 AND data_file.record_count != 0").selectExpr(
        "data_file.content AS content",
        "data_file.file_path AS path",
        "data_file.spec_id AS spec_id",
        f"{_normalised_partition(entries)} AS part",
        "data_file.record_count AS record_count",
        "data_file.file_size_in_bytes AS size",
        "coalesce(sequence_number, 0) AS seq",
        f"CAST(data_file.lower_bounds[{DELETE_FILE_PATH_FIELD_ID}] AS STRING) AS lower",
        f"CAST(data_file.upper_bounds[{DELETE_FILE_PATH_FIELD_ID}] AS STRING) AS upper",
        "data_file.referenced_data_file AS referenced",
        "data_file.content_offset AS content_offset",  # a deletion vector's place in its Puffin file
        "data_file.equality_ids AS equality_ids",
        "(data_file.lower_bounds IS NOT NULL AND data_file.upper_bounds IS NOT NULL) AS has_bounds",
        *metrics,
        "input_file_name() AS manifest",
        "monotonically_increasing_id() AS row_id",  # increases within a manifest: one task reads it whole
    )
    if inclusive:
        rows = rows.where(inclusive)
    if manifests is None:
        return rows
    order = spark.createDataFrame(list(enumerate(manifests)), "manifest_index INT, manifest STRING")
    return rows.join(order.hint("broadcast"), "manifest")


def _equality_delete_may_apply(field_id: int, required: bool) -> str:
    """Iceberg's ``DeleteFileIndex.canContainEqDeletesForFile`` for one equality field, in Spark SQL.

    ``metrics_<id>`` is the data file's readable metrics of the column, ``d_metrics_<id>`` the
    delete file's; ``has_bounds``/``d_has_bounds`` whether each file has bound maps at all.
    True unless the null counts or the bounds prove the delete file cannot hold a key of the file.
    """
    data, delete = _metric_column(field_id), f"d_{_metric_column(field_id)}"

    def contains_null(m: str) -> str:
        return "false" if required else f"coalesce({m}.null_value_count > 0, true)"

    def all_null(m: str) -> str:
        return "false" if required else f"coalesce({m}.null_value_count = {m}.value_count, false)"

    def all_non_null(m: str) -> str:
        return "true" if required else f"coalesce({m}.null_value_count <= 0, false)"

    return (
        f"CASE WHEN ({contains_null(data)} AND {contains_null(delete)}) THEN true "
        f"WHEN ({all_null(data)} AND {all_non_null(delete)}) THEN false "
        f"WHEN ({all_null(delete)} AND {all_non_null(data)}) THEN false "
        "WHEN NOT (has_bounds AND d_has_bounds) THEN true "
        f"WHEN {data}.lower_bound IS NULL OR {data}.upper_bound IS NULL OR {delete}.lower_bound IS NULL "
        f"OR {delete}.upper_bound IS NULL THEN true "
        f"ELSE ({delete}.lower_bound <= {data}.upper_bound AND {data}.lower_bound <= {delete}.upper_bound) END"
    )


def _equality_matches(data, rows, metric_fields: dict[int, tuple[str, bool]], global_spec_ids: list[int]):
    """(data path, equality delete path) pairs by Iceberg's rules (see the module docstring)."""
    from pyspark.sql import functions as F

    metric_columns = [_metric_column(field_id) for field_id in metric_fields]
    deletes = rows.where(f"content = {_EQUALITY_DELETES}").selectExpr(
        "path AS d_path", "spec_id AS d_spec", "to_json(part) AS d_pkey", "seq AS d_seq",
        "equality_ids AS d_equality_ids", "has_bounds AS d_has_bounds",
        *[f"{column} AS d_{column}" for column in metric_columns],
        # Not `IN (NULL)` for a table partitioned from its creation: NULL, and `NOT is_global` would drop every delete.
        (f"spec_id IN ({', '.join(map(str, global_spec_ids))})" if global_spec_ids else "false") + " AS is_global",
    )
    # Every equality field of the delete file must leave the file possible (fields without
    # readable metrics, e.g. nested ones, are assumed to match, as Iceberg does without stats).
    metrics_allow = " AND ".join(
        f"(NOT array_contains(d_equality_ids, {field_id}) OR {_equality_delete_may_apply(field_id, required)})"
        for field_id, (_, required) in metric_fields.items()
    ) or "true"
    newer = F.col("d_seq") > F.col("seq")
    in_partition = data.join(
        deletes.where("NOT is_global"),
        (F.col("spec_id") == F.col("d_spec")) & (F.col("pkey") == F.col("d_pkey")) & newer,
    )
    global_ = data.join(F.broadcast(deletes.where("is_global")), newer)
    return in_partition.unionByName(global_).where(metrics_allow).selectExpr("path", "d_path", "0 AS d_rows")


def _deletes_per_data_file(rows, *, metric_fields: dict[int, tuple[str, bool]], global_spec_ids: list[int],
                           with_equality: bool):
    """Per data file path: the delete files that apply, and their file-scoped row count."""
    from pyspark.sql import functions as F

    data = rows.where(f"content = {_DATA}").selectExpr(
        "path", "spec_id", "to_json(part) AS pkey", "seq", "has_bounds",
        *[_metric_column(field_id) for field_id in metric_fields],
    )
    deletes = rows.where(f"content = {_POSITION_DELETES}").selectExpr(
        "path AS d_path", "spec_id AS d_spec", "to_json(part) AS d_pkey", "seq AS d_seq", "lower", "upper",
        # Counted towards delete-ratio-threshold only when scoped to one file (planning._is_file_scoped).
        "CASE WHEN referenced IS NOT NULL OR (lower IS NOT NULL AND lower = upper) THEN record_count ELSE 0 END"
        " AS d_rows",
        "(lower IS NOT NULL AND upper IS NOT NULL AND lower = upper AND length(lower) > 0) AS by_path",
    )
    by_path = data.join(deletes.where("by_path"), (F.col("path") == F.col("lower")) & (F.col("d_seq") >= F.col("seq")))
    in_partition = data.join(
        deletes.where("NOT by_path"),
        (F.col("spec_id") == F.col("d_spec"))
        & (F.col("pkey") == F.col("d_pkey"))
        & (F.col("d_seq") >= F.col("seq"))
        & (F.col("lower").isNull() | F.col("upper").isNull() | F.col("path").between(F.col("lower"), F.col("upper"))),
    )
    matches = by_path.unionByName(in_partition).select("path", "d_path", "d_rows")
    if with_equality:
        matches = matches.unionByName(_equality_matches(data, rows, metric_fields, global_spec_ids))
    return matches.groupBy("path").agg(
        F.sort_array(F.collect_list("d_path")).alias("delete_paths"), F.sum("d_rows").alias("delete_rows")
    )


def _equality_metric_fields(jtable) -> dict[int, tuple[str, bool]]:
    """Top-level primitive columns of the current schema: those ``readable_metrics`` has bounds for."""
    return {
        int(field.fieldId()): (str(field.name()), bool(field.isRequired()))
        for field in jtable.schema().columns()
        if field.type().isPrimitiveType()
    }


def _plan_group(row, *, spec_fields: dict[int, list[str]], options: RewriteOptions, include_files: bool,
                current_spec_id: int, current_fields: list[str]):
    """Plan the files of one distribution group (on an executor); only summaries leave it.

    A group holds whole planning partitions (one partition of the current spec, or every file
    of the other specs), its files in scan order; :func:`planning.plan_rewrite` does the exact
    grouping and bin packing inside it, with no budget (the driver applies it over all groups).
    """
    files, unaligned = [], 0
    for f in row["files"]:
        spec_id = int(f["spec_id"])
        files.append(DataFileInfo(
            path=f["path"],
            spec_id=spec_id,
            partition=partition_values(spec_fields[spec_id], (f["part"][name] for name in spec_fields[spec_id])),
            size_bytes=int(f["size"]),
            record_count=int(f["record_count"]),
            delete_file_paths=tuple(f["delete_paths"] or ()),
            delete_record_count=int(f["delete_rows"] or 0),
        ))
        unaligned += 0 if f["aligned"] else 1
    plan = plan_rewrite(files, options, current_spec_id=current_spec_id, current_partition_fields=current_fields)
    groups = [(partition_order(g.spec_id, g.partition), g if include_files else g.without_files(),
               sorted(g.delete_file_paths)) for g in plan.groups]
    return groups, unaligned


def run(spark, catalog: str, raw_args: dict[str, Any]) -> dict[str, Any]:
    from pyspark.sql import functions as F

    args = SparkPlanJobArgs.from_json(raw_args)
    table_name, snapshot_id, include_files = args.table, args.snapshot_id, args.include_files
    options = RewriteOptions.from_iceberg_options(args.options, max_files=args.max_files, max_bytes=args.max_bytes)
    options.validate()

    jtable = iceberg.load_table(spark, catalog, table_name)
    snapshot = jtable.snapshot(snapshot_id)
    if snapshot is None:
        raise ValueError(f"Snapshot {snapshot_id} is not part of the history of table {table_name}.")
    summary = iceberg.summary(snapshot)
    # Summary totals may be missing (writers that do not keep them): then assume there are deletes.
    with_equality = summary.get("total-equality-deletes", "1") != "0"
    metric_fields = _equality_metric_fields(jtable) if with_equality else {}
    global_spec_ids = sorted(int(k) for k, spec in dict(jtable.specs()).items() if spec.isUnpartitioned())
    manifests = [str(m.path()) for m in snapshot.allManifests(jtable.io())]
    spec_fields = {int(k): [str(f.name()) for f in spec.fields()] for k, spec in dict(jtable.specs()).items()}
    current_spec_id = int(jtable.spec().specId())

    inclusive, strict = (args.predicates.inclusive, args.predicates.strict) if args.predicates else (None, "true")
    rows = _file_rows(spark, catalog, table_name, snapshot_id, manifests, inclusive, metric_fields)
    data = rows.where(f"content = {_DATA}").selectExpr("*", f"({strict}) AS aligned")
    if not counts_no_delete_files(summary):  # the join costs a shuffle: skip it when there is nothing to join
        deletes = _deletes_per_data_file(rows, metric_fields=metric_fields, global_spec_ids=global_spec_ids,
                                         with_equality=with_equality)
        data = data.join(deletes, "path", "left")
    else:
        data = data.selectExpr("*", "CAST(NULL AS ARRAY<STRING>) AS delete_paths",
                               "CAST(NULL AS BIGINT) AS delete_rows")
    # Distribution key: a partition of the current spec, or NULL for all files of other specs
    # (Iceberg lumps those together). Sorting the structs by (manifest, row) restores scan order.
    grouped = data.groupBy(F.expr(f"IF(spec_id = {current_spec_id}, to_json(part), NULL)")).agg(
        F.sort_array(F.collect_list(F.struct(
            "manifest_index", "row_id", "path", "spec_id", "part", "size", "record_count", "delete_paths",
            "delete_rows", "aligned"))).alias("files"))
    planned = grouped.rdd.map(partial(
        _plan_group, spec_fields=spec_fields, options=replace(options, max_files=None, max_bytes=None),
        include_files=include_files, current_spec_id=current_spec_id, current_fields=spec_fields[current_spec_id],
    )).collect()
    unaligned = sum(count for _, count in planned)
    if unaligned:
        return SparkPlanJobResult(unaligned_files=unaligned).to_json()

    # Stable sort: bins of one partition keep their packing order, as in plan_rewrite.
    groups = sorted((group for partition_groups, _ in planned for group in partition_groups), key=lambda g: g[0])
    taken, skipped = apply_budget(groups, options.resolved(), lambda g: budget_measure(g[1]))
    delete_paths = {path for _, _, paths in taken for path in paths}
    return SparkPlanJobResult(plan=plan_document(
        table=table_name,
        snapshot_id=snapshot_id,
        options=options,
        groups=[group for _, group, _ in taken],
        delete_file_count=len(delete_paths),
        skipped_by_budget=skipped,
    )).to_json()
