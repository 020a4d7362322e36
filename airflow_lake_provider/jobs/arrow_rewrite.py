"""A bin-pack rewrite whose Parquet reading and writing is Arrow's; planning and commit stay Iceberg's.

Why: on tables of many small files a warm ``rewrite_data_files`` spends most of its time on work
a plain copy does not do (``docs/benchmarks.md``, the profile): Iceberg copies the whole Hadoop
``Configuration`` for every file it opens through ``HadoopFileIO``, and Spark turns the
vectorised reader's column batches into rows for Iceberg's row writer. Here Iceberg's own
``BinPackRewriteFilePlanner`` makes the file groups (the same groups the Spark action makes from
the same options), Arrow reads each group's files by Iceberg field ID (a column a file leaves out
holds its identity partition value, as Iceberg's readers fill it in), applies the position and
equality deletes and deletion vectors Iceberg's planner attached to each file (``jobs/arrow_deletes.py``), on
format v3 carries each row's lineage as Iceberg's rewrite writes it (``core/arrow_rewrite.ROW_LINEAGE``), and
writes the new files in the table's codec (gzip where the table names none, as Iceberg's writer) with the field
IDs; each file's metrics are built from the values written, under the table's metrics modes
(``core/file_metrics.py``: not read back from Arrow's footer statistics, which leave long values
out); and Iceberg's ``RewriteDataFilesCommitManager`` commits (``jobs/rewriters.py``), the commit the
Spark action makes: validated from the starting snapshot, with the job's snapshot properties and
sequence-number choice.

Only where the result is provably the same (``core/arrow_rewrite.py`` decides; the rest goes to
the Spark action): format v1 to v3, files of the current spec, no sort order, flat columns of
common types, a local file system or S3. A file without field IDs (or a delete file this path cannot
apply, or a v3 file whose rows have no row IDs yet), found while reading, turns the whole attempt back
to the Spark action with every file this attempt wrote deleted.

The Parquet work (:class:`GroupWork`, plain values) runs on the driver's threads on a local master
(Arrow releases the GIL), and on a cluster as one Spark task per new file on the executors, where the
job's cores are (``core/arrow_rewrite.on_executors``). Either way a group's files are read ahead in
parallel and written into row groups of the table's ``write.parquet.row-group-size-bytes``, so memory
stays near one row group per file being written.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import uuid
from dataclasses import dataclass
from typing import Any

from airflow_lake_provider.core.arrow_rewrite import (
    ROW_LINEAGE,
    arrow_ineligibility,
    decimal_type,
    dictionary_columns,
    parquet_codec,
    row_group_bytes,
    split_into_outputs,
    statistics_columns,
)
from airflow_lake_provider.core.file_metrics import (
    FLOATING_TYPES,
    ColumnStats,
    FileMetrics,
    MetricsMode,
    file_metrics,
    unscaled,
)
from airflow_lake_provider.core.partitions import identity_constants
from airflow_lake_provider.jobs import iceberg
from airflow_lake_provider.jobs.arrow_deletes import GroupDeletes, UnreadableDeletes
from airflow_lake_provider.jobs.arrow_storage import Storage, UnreachableStorage, table_storage

#: Files of a group read ahead of the writer: enough to keep both cores decoding, few enough that a
#: group of thousands of files never sits in memory at once.
READ_AHEAD = 16


class NotArrowRewritable(Exception):
    """A file the rewrite would read is one Arrow cannot rewrite: without Iceberg's field IDs, with
    deletes this path cannot apply exactly, or of an older partition spec."""


def ineligibility(spark, jtable, strategy: str, options: dict[str, str]) -> str | None:
    """Why Arrow cannot rewrite this table with these options (``None``: it can)."""
    try:
        import pyarrow.parquet  # noqa: F401 - the driver's Python must have it
    except ImportError:
        return "pyarrow is not installed in the Spark driver's Python"
    try:
        table_storage(jtable)
    except UnreachableStorage as unreachable:
        return str(unreachable)
    return arrow_ineligibility(
        strategy=strategy,
        schema=_schema_json(jtable),
        properties=iceberg.string_map(jtable.properties()),
        format_version=int(jtable.operations().current().formatVersion()),
        current_spec_id=int(jtable.spec().specId()),
        sort_order_fields=int(jtable.sortOrder().fields().size()),
        location=str(jtable.location()),
        options=options,
        planner_options=iceberg.strings(
            iceberg.java_class(jtable, "org.apache.iceberg.actions.BinPackRewriteFilePlanner")(jtable).validOptions()),
    )


def _schema_json(jtable) -> dict[str, Any]:
    return json.loads(str(iceberg.java_class(jtable, "org.apache.iceberg.SchemaParser").toJson(jtable.schema())))


def _arrow_schema(schema_json: dict[str, Any], lineage: bool):
    """The table's current schema as Arrow's, each field carrying its Iceberg field ID; with ``lineage``
    (format v3) followed by the row lineage fields, as Iceberg's rewrite writes them."""
    import pyarrow as pa

    simple = {"boolean": pa.bool_(), "int": pa.int32(), "long": pa.int64(), "float": pa.float32(),
              "double": pa.float64(), "date": pa.date32(), "string": pa.string(), "binary": pa.binary(),
              "timestamp": pa.timestamp("us"), "timestamptz": pa.timestamp("us", tz="UTC")}
    fields = []
    for field in schema_json["fields"]:
        kind = field["type"]
        if kind in simple:
            arrow_type = simple[kind]
        else:
            decimal = decimal_type(kind)
            assert decimal is not None, kind  # arrow_ineligibility refused every other type
            arrow_type = pa.decimal128(*decimal)
        fields.append(pa.field(field["name"], arrow_type, nullable=not field["required"],
                               metadata={b"PARQUET:field_id": str(field["id"]).encode()}))
    if lineage:
        fields += [pa.field(name, pa.int64(), metadata={b"PARQUET:field_id": str(field_id).encode()})
                   for field_id, name in ROW_LINEAGE]
    return pa.schema(fields)


def _with_lineage(table, first_row_id: int | None, data_sequence_number: int | None):
    """A v3 data file's rows (every row, in the file's order) with their lineage as Iceberg's readers give it
    (``ParquetValueReaders.rowIds``, ``lastUpdated``): the file's value where it holds one, else the file's
    ``first_row_id`` + the row's position, and the file's data sequence number. The rewrite writes these,
    so each row keeps them in its new file."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if first_row_id is None or data_sequence_number is None:
        # Iceberg reads no lineage here and would write NULLs, to be assigned in its own row order.
        raise NotArrowRewritable("a format v3 data file has no first_row_id (rows without row IDs yet)"
                                 if first_row_id is None else "a format v3 data file has no data sequence number")
    row_ids, sequences = table.num_columns - 2, table.num_columns - 1
    positions = pc.subtract(pc.cumulative_sum(pa.repeat(pa.scalar(1, pa.int64()), table.num_rows)), 1)
    row_id = pc.coalesce(table.column(row_ids), pc.add(positions, pa.scalar(first_row_id, pa.int64())))
    sequence = pc.coalesce(table.column(sequences), pa.scalar(data_sequence_number, pa.int64()))
    return table.set_column(row_ids, table.field(row_ids), row_id).set_column(
        sequences, table.field(sequences), sequence)


def _read_by_field_id(storage: Storage, path: str, schema, constants: dict[int, Any]):
    """One data file as ``schema``: columns matched by field ID (renames), narrower types widened as
    Iceberg allows (int to long, float to double, decimal). A column the file lacks holds its identity
    partition value from ``constants`` (by field ID) where it has one, else NULL (added later)."""
    import pyarrow as pa

    table = storage.parquet_file(path).read(use_threads=False)
    by_id = {}
    for index, field in enumerate(table.schema):
        field_id = (field.metadata or {}).get(b"PARQUET:field_id")
        if field_id is None:
            raise NotArrowRewritable(f"{path} has a column ({field.name!r}) without an Iceberg field ID")
        by_id[int(field_id)] = index
    columns = []
    for field in schema:
        field_id = int(field.metadata[b"PARQUET:field_id"])
        position = by_id.get(field_id)
        if position is None:
            value = constants.get(field_id)
            columns.append(pa.nulls(table.num_rows, field.type) if value is None
                           else pa.repeat(pa.scalar(value, field.type), table.num_rows))
            continue
        column = table.column(position)
        columns.append(column if column.type == field.type else column.cast(field.type))
    return pa.Table.from_arrays(columns, schema=schema)


def _observe(stats: dict[int, ColumnStats], table, columns: list[_Column]) -> None:
    """Fold a chunk about to be written into each column's :class:`ColumnStats`: the counts, and the
    least and greatest values (NULL and NaN left out) in the bounds' order domain."""
    import pyarrow as pa
    import pyarrow.compute as pc

    for column, original in zip(columns, table.columns, strict=True):
        if not column.mode.counts:
            continue
        values, nans = original, 0
        if column.type in FLOATING_TYPES:
            is_nan = pc.is_nan(values)
            nans = int(pc.sum(is_nan).as_py() or 0)
            if nans:
                values = pc.filter(values, pc.invert(is_nan))  # a NULL's mask is NULL: dropped too
        lower = upper = None
        if column.mode.bounds and values.null_count < len(values):
            if column.type == "date":
                values = values.cast(pa.int32())
            elif column.type in ("timestamp", "timestamptz"):
                values = values.cast(pa.int64())
            least_greatest = pc.min_max(values)
            lower, upper = least_greatest["min"].as_py(), least_greatest["max"].as_py()
            if column.scale is not None:
                lower, upper = unscaled(lower, column.scale), unscaled(upper, column.scale)
        stats[column.field_id].add(values=len(original), nulls=original.null_count, nans=nans,
                                   lower=lower, upper=upper)


def _bounded_map(pool, function, items, *, ahead: int):
    """``pool.map`` in order, with at most ``ahead`` results waiting (``Executor.map`` submits everything)."""
    pending: list[concurrent.futures.Future] = []
    for item in items:
        pending.append(pool.submit(function, item))
        if len(pending) > ahead:
            yield pending.pop(0).result()
    for future in pending:
        yield future.result()


def _split_offsets(metadata) -> list[int]:
    """Where each row group starts, as Iceberg records it (``split_offsets``)."""
    offsets = []
    for index in range(metadata.num_row_groups):
        column = metadata.row_group(index).column(0)
        start = column.dictionary_page_offset if column.has_dictionary_page else column.data_page_offset
        offsets.append(int(start))
    return offsets


@dataclass(frozen=True)
class _Column:
    """A column of the table's current schema as the writer records it: its metrics mode is the
    table's (``MetricsConfig``: defaults, per-column settings, sort-order promotion)."""

    field_id: int
    name: str
    type: str
    mode: MetricsMode
    scale: int | None  # decimals: the unscaled bounds' scale


@dataclass(frozen=True)
class _Layout:
    """What every group of one rewrite writes by, read from the table once: its schema, columns, partition
    spec and sort order, and its Parquet settings (codec and level, row-group size, which columns get a
    dictionary and footer statistics)."""

    arrow_schema: Any
    columns: list[_Column]
    spec_json: dict[str, Any]
    sort_order_id: int
    codec: str
    level: int | None
    row_group_bytes: int
    dictionary: list[str]
    statistics: list[str]
    lineage: bool  # format v3: the row lineage columns follow the table's (``ROW_LINEAGE``)

    @property
    def types(self) -> dict[int, str]:
        return {column.field_id: column.type for column in self.columns}


def _layout(jtable, properties: dict[str, str]) -> _Layout:
    schema_json = _schema_json(jtable)
    config = iceberg.java_class(jtable, "org.apache.iceberg.MetricsConfig").forTable(jtable)
    columns = []
    for field in schema_json["fields"]:
        decimal = decimal_type(field["type"])
        columns.append(_Column(int(field["id"]), field["name"], field["type"],
                               MetricsMode.parse(str(config.columnMode(field["name"]))),
                               decimal[1] if decimal else None))
    lineage = iceberg.format_version(jtable) >= 3
    if lineage:  # metrics as Iceberg's writer keeps them for every column it writes, by the column's name
        columns += [_Column(field_id, name, "long", MetricsMode.parse(str(config.columnMode(name))), None)
                    for field_id, name in ROW_LINEAGE]
    spec_json = json.loads(str(iceberg.java_class(jtable, "org.apache.iceberg.PartitionSpecParser")
                               .toJson(jtable.spec())))
    codec, level = parquet_codec(properties) or ("gzip", 6)
    named = [(column.name, column.type) for column in columns]
    return _Layout(_arrow_schema(schema_json, lineage), columns, spec_json, int(jtable.sortOrder().orderId()), codec,
                   level, row_group_bytes(properties), dictionary_columns(properties, named),
                   statistics_columns(named), lineage)


@dataclass
class _Output:
    """One new file: where it is, and what its rows add up to (its metrics before modes apply)."""

    location: str
    stats: dict[int, ColumnStats]
    records: int = 0
    footer: Any = None  # the written file's Parquet metadata, from its writer


@dataclass
class GroupWork:
    """One file group's Parquet work as plain values, done wherever it is sent (a thread of the driver,
    or a Spark executor: it pickles): the group's data files (Iceberg's JSON, each with the indexes of its
    delete files in ``deletes`` and, on v3, its data sequence number), the output each file goes into,
    each output's location (chosen by the driver, as Iceberg's ``OutputFileFactory`` asks the table's
    location provider), how to write (``layout``) and where (``storage``)."""

    files: list[dict[str, Any]]
    deletes: list[dict[str, Any]]
    outputs: list[int]
    locations: dict[int, str]
    layout: _Layout
    storage: Storage

    def per_output(self) -> list[GroupWork]:
        """This work as one piece per new file, each with only the delete files its data files need:
        a Spark task each, as Iceberg's action spreads a group's output files over its tasks."""
        pieces = []
        for output in sorted(set(self.outputs)):
            files = [f for f, o in zip(self.files, self.outputs, strict=True) if o == output]
            used = sorted({index for f in files for index in f["delete-file-references"]})
            renumbered = {old: new for new, old in enumerate(used)}
            files = [{**f, "delete-file-references": [renumbered[i] for i in f["delete-file-references"]]}
                     for f in files]
            pieces.append(GroupWork(files, [self.deletes[i] for i in used], [output] * len(files),
                                    {output: self.locations[output]}, self.layout, self.storage))
        return pieces


def _read(work: GroupWork, deletes: GroupDeletes, data_file: dict[str, Any]):
    """One data file's rows as a reader gets them: by field ID, identity-partition values filled in, v3
    lineage carried, deletes applied."""
    layout = work.layout
    try:
        constants = identity_constants(layout.spec_json, data_file.get("partition", []), layout.types)
    except ValueError as error:  # a value Python's types do not hold (a date past the year 9999)
        raise NotArrowRewritable(f"{data_file['file-path']} has a partition value Arrow cannot carry: "
                                 f"{error}") from error
    rows = _read_by_field_id(work.storage, data_file["file-path"], layout.arrow_schema, constants)
    if layout.lineage:
        rows = _with_lineage(rows, data_file.get("first-row-id"), data_file["data-sequence-number"])
    try:
        return deletes.apply(rows, data_file["file-path"], data_file["delete-file-references"])
    except UnreadableDeletes as unreadable:
        raise NotArrowRewritable(str(unreadable)) from unreadable


def write_files(work: GroupWork, pool) -> list[dict[str, Any]]:
    """Write ``work``'s new files, reading its data files ahead on ``pool``; return each written file as
    Iceberg's content-file JSON, with the metrics of the values written (``core/file_metrics.py``). An
    output whose rows were all deleted gets no file (Iceberg's writer writes none). Memory stays near
    one row group of the table's ``write.parquet.row-group-size-bytes``, plus the files read ahead."""
    import pyarrow as pa

    layout, storage = work.layout, work.storage
    deletes = GroupDeletes(work.deletes, layout.arrow_schema, storage)
    try:
        deletes.load(pool)
    except UnreadableDeletes as unreadable:
        raise NotArrowRewritable(str(unreadable)) from unreadable
    tables = _bounded_map(pool, lambda data_file: _read(work, deletes, data_file), work.files, ahead=READ_AHEAD)
    written: list[_Output] = []
    writer: Any = None
    buffered: list[Any] = []
    current, size = -1, 0

    def close():
        writer.close()
        written[-1].footer = writer.writer.metadata

    def flush():
        nonlocal buffered, size
        if buffered:
            merged = pa.concat_tables(buffered)
            _observe(written[-1].stats, merged, layout.columns)
            written[-1].records += merged.num_rows
            writer.write_table(merged, row_group_size=max(1, merged.num_rows))
        buffered, size = [], 0

    try:
        for output, table in zip(work.outputs, tables, strict=True):
            if table.num_rows == 0:
                continue
            if output != current:
                if writer is not None:
                    flush()
                    close()
                current = output
                written.append(_Output(work.locations[output], {c.field_id: ColumnStats() for c in layout.columns}))
                # Footer statistics serve readers' row-group filters (Arrow leaves out what it
                # cannot bound; none for floats, nor a dictionary: core/arrow_rewrite.py says why);
                # the manifests' metrics are built from the values (_observe).
                writer = storage.parquet_writer(
                    written[-1].location, layout.arrow_schema, compression=layout.codec,
                    compression_level=layout.level, store_schema=False, write_statistics=layout.statistics,
                    use_dictionary=layout.dictionary)
            buffered.append(table)
            size += table.nbytes
            if size >= layout.row_group_bytes:
                flush()
        if writer is not None:
            flush()
            close()
    except BaseException:
        if writer is not None:
            writer.close()
        raise
    partition = work.files[0].get("partition", []) if work.files else []
    return [_content_file_json(output.location, int(layout.spec_json["spec-id"]), partition,
                               storage.size(output.location), _metrics(output, layout.columns),
                               _split_offsets(output.footer), layout.sort_order_id)
            for output in written]


def _metrics(output: _Output, columns: list[_Column]) -> FileMetrics:
    return file_metrics(output.records, ((c.field_id, c.type, c.mode) for c in columns), output.stats,
                        _column_sizes(output.footer))


def write_on_executor(work: GroupWork) -> dict[str, Any]:
    """:func:`write_files` in a Spark task: ``{"files": [...]}``, or ``{"unrewritable": reason}`` for what
    turns the attempt over to Iceberg's action (any other error fails the task, which Spark retries: the
    file's location is the same on every try, so a retry overwrites what a failed one left)."""
    try:
        import pyarrow.parquet  # noqa: F401 - the executors' Python must have it
    except ImportError:
        return {"unrewritable": "pyarrow is not installed in the Spark executors' Python"}
    with concurrent.futures.ThreadPoolExecutor(max_workers=_reading_threads(work.storage, cores=1)) as pool:
        try:
            return {"files": write_files(work, pool)}
        except NotArrowRewritable as unrewritable:
            return {"unrewritable": str(unrewritable)}


class _Group:
    """One planned file group in the driver: its :class:`GroupWork` (made from Iceberg's scan tasks in one
    round trip) and, once written, its new files set as the group's output (Iceberg's runner contract,
    ``rewrite(group) -> Set<DataFile>``)."""

    def __init__(self, jtable, group, layout: _Layout, storage: Storage) -> None:
        self.jtable, self.group, self.spec = jtable, group, jtable.spec()
        files, deletes = self._files(layout)
        outputs = split_into_outputs([int(f["file-size-in-bytes"]) for f in files],
                                     max(1, int(group.expectedOutputFiles())))
        prefix = f"{uuid.uuid4()}"
        locations = {output: self._new_location(f"{prefix}-{output:05d}.parquet") for output in sorted(set(outputs))}
        self.work = GroupWork(files, deletes, outputs, locations, layout, storage)
        self.written: list[str] = []

    def _files(self, layout: _Layout) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The group's data files and delete files in one round trip (Iceberg's own JSON of its scan tasks),
        each data file with the indexes of its delete files (``delete-file-references``), and only the
        fields the work reads; refused when one belongs to an older partition spec (its rows may belong to
        several partitions of the current one: Iceberg's writer splits them, this one does not)."""
        tasks = self.group.fileScanTasks()
        document = iceberg.scan_tasks_document(self.jtable, tasks)
        files = [{"file-path": task["data-file"]["file-path"], "spec-id": task["data-file"]["spec-id"],
                  "partition": task["data-file"].get("partition", []),
                  "file-size-in-bytes": task["data-file"]["file-size-in-bytes"],
                  "first-row-id": task["data-file"].get("first-row-id"),
                  "delete-file-references": task.get("delete-file-references") or []}
                 for task in document["file-scan-tasks"]]
        current = int(self.spec.specId())
        if any(int(f["spec-id"]) != current for f in files):
            raise NotArrowRewritable("files of an older partition spec are to be rewritten onto the current one")
        if layout.lineage:  # each file's data sequence number (not in Iceberg's JSON of a content file)
            for data_file, task in zip(files, tasks, strict=True):
                java_file = task.file()
                if str(java_file.location()) != data_file["file-path"]:
                    raise NotArrowRewritable("Iceberg's scan tasks and their JSON list files in different orders")
                sequence = java_file.dataSequenceNumber()
                data_file["data-sequence-number"] = int(sequence) if sequence is not None else None
        return files, document.get("delete-files") or []

    def _new_location(self, name: str) -> str:
        """Where a new file goes, as Iceberg's ``OutputFileFactory`` asks the table's location provider (an
        unpartitioned spec has no partition path: ``data/NAME``, never ``data//NAME``)."""
        locations = self.jtable.locationProvider()
        if self.spec.isUnpartitioned():
            return str(locations.newDataLocation(name))
        return str(locations.newDataLocation(self.spec, self.group.info().partition(), name))

    def set_output(self, documents: list[dict[str, Any]]) -> None:
        """The written files as Iceberg ``DataFile``s, parsed by Iceberg from its own content-file JSON, set
        as the group's output."""
        parser = iceberg.java_class(self.jtable, "org.apache.iceberg.ContentFileParser")
        mapper = iceberg.java_class(self.jtable, "org.apache.iceberg.util.JsonUtil").mapper()
        files = iceberg.java_class(self.jtable, "java.util.HashSet")()
        for document in documents:
            files.add(parser.fromJson(mapper.readTree(json.dumps(document)), self.spec))
        self.group.setOutputFiles(files)
        self.written = [document["file-path"] for document in documents]


def _column_sizes(footer) -> dict[int, int]:
    """Each column's compressed bytes over the file's row groups, by field ID (flat columns: one leaf each)."""
    sizes: dict[int, int] = {}
    schema = footer.schema.to_arrow_schema()
    ids = [int(field.metadata[b"PARQUET:field_id"]) for field in schema]
    for index in range(footer.num_row_groups):
        row_group = footer.row_group(index)
        for position, field_id in enumerate(ids):
            sizes[field_id] = sizes.get(field_id, 0) + row_group.column(position).total_compressed_size
    return sizes


def _content_file_json(location: str, spec_id: int, partition: list[Any], size: int, metrics: FileMetrics,
                       split_offsets: list[int], sort_order_id: int) -> dict[str, Any]:
    """A data file as Iceberg's ``ContentFileParser`` reads it."""
    def counts(values: dict[int, int]) -> dict[str, list[int]]:
        return {"keys": list(values), "values": list(values.values())}

    def bounds(values: dict[int, bytes]) -> dict[str, list[Any]]:
        return {"keys": list(values), "values": [value.hex().upper() for value in values.values()]}

    return {"spec-id": spec_id, "content": "data", "file-path": location, "file-format": "parquet",
            "partition": partition, "file-size-in-bytes": size, "record-count": metrics.record_count,
            "column-sizes": counts(metrics.column_sizes), "value-counts": counts(metrics.value_counts),
            "null-value-counts": counts(metrics.null_value_counts),
            "nan-value-counts": counts(metrics.nan_value_counts),
            "lower-bounds": bounds(metrics.lower_bounds), "upper-bounds": bounds(metrics.upper_bounds),
            "split-offsets": split_offsets, "sort-order-id": sort_order_id}


def write_groups(spark, jtable, groups: list[Any], options: dict[str, str], *,
                 executors: bool = False) -> list[_Group]:
    """The Arrow runner of one attempt: each planned group's new files written and set as the group's
    output. Every group's files are known (and checked: :class:`NotArrowRewritable`) before the first
    file is written. ``executors``: each new file is a task of one Spark job on the executors
    (``core/arrow_rewrite.on_executors``); else the groups are written on the driver's threads,
    ``max-concurrent-file-group-rewrites`` at a time (at most one per core). When any write fails,
    every location of this attempt is deleted through the table's FileIO and the error raised.
    """
    layout = _layout(jtable, iceberg.string_map(jtable.properties()))
    storage = table_storage(jtable)
    cores = os.cpu_count() or 2
    concurrency = max(1, min(len(groups), int(options.get("max-concurrent-file-group-rewrites", cores)), cores))
    with concurrent.futures.ThreadPoolExecutor(max_workers=concurrency) as pool:
        planned = list(pool.map(lambda group: _Group(jtable, group, layout, storage), groups))
    try:
        written = _on_executors(spark, planned) if executors else _in_driver(planned, storage, concurrency)
        for group, documents in zip(planned, written, strict=True):
            group.set_output(documents)
    except BaseException:
        _delete(jtable, [location for group in planned for location in group.work.locations.values()])
        raise
    return planned


def _reading_threads(storage: Storage, cores: int) -> int:
    """Threads reading files for ``cores`` cores: reads wait on the disk (or the network, more) as well as the
    CPU, so more threads than cores keep both busy."""
    return (2 if storage.filesystem is None else 8) * cores


def _in_driver(planned: list[_Group], storage: Storage, concurrency: int) -> list[list[dict[str, Any]]]:
    """Each group written on a thread of the driver; every group finishes before the first error is raised."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=_reading_threads(storage, os.cpu_count() or 2)) as reads, \
            concurrent.futures.ThreadPoolExecutor(max_workers=concurrency) as groups_pool:
        futures = [groups_pool.submit(write_files, group.work, reads) for group in planned]
        concurrent.futures.wait(futures)
    return [future.result() for future in futures]


def _on_executors(spark, planned: list[_Group]) -> list[list[dict[str, Any]]]:
    """Each new file written by a task of one Spark job (:func:`write_on_executor`), its result collected."""
    pieces = [(index, piece) for index, group in enumerate(planned) for piece in group.work.per_output()]
    context = spark.sparkContext
    context.setJobDescription(f"Arrow rewrite: {len(pieces)} new files of {len(planned)} file groups")
    try:
        results = context.parallelize([piece for _, piece in pieces], max(1, len(pieces))) \
            .map(write_on_executor).collect()
    finally:
        context.setJobDescription(None)
    unrewritable = next((result["unrewritable"] for result in results if "unrewritable" in result), None)
    if unrewritable is not None:
        raise NotArrowRewritable(unrewritable)
    written: list[list[dict[str, Any]]] = [[] for _ in planned]
    for (index, _), result in zip(pieces, results, strict=True):
        written[index].extend(result["files"])
    return written


def _delete(jtable, locations: list[str]) -> None:
    """Delete what this attempt may have written, through the table's FileIO (gone already is fine)."""
    io = jtable.io()
    for location in locations:
        try:
            io.deleteFile(location)
        except Exception:  # noqa: BLE001 - a file left behind is an orphan for clean, never a lost row
            pass
