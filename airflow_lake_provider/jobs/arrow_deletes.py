"""Deletes applied while the Arrow rewriter reads: a data file's rows as a reader of the table gets them.

Iceberg's planner attaches to each file scan task the delete files that apply to it (sequence
numbers and partition scope already decided: ``FetchScanTasksResponse``'s ``delete-file-references``).
Here they are applied as Iceberg's readers apply them (``DeleteFilter``):

* position deletes: the rows at the positions a delete file lists for this data file's exact path;
* deletion vectors (format v3): the rows at the positions of the DV naming this data file, its blob read
  by a byte-range read of the Puffin file (``content_offset``, ``content_size_in_bytes``) and decoded as
  Iceberg decodes it (``core/deletion_vectors.deleted_positions``: length, magic, CRC and cardinality
  checked; a DV that fails a check is :class:`UnreadableDeletes`, never a guess);
* equality deletes: the rows whose values of the delete file's equality fields equal one of its rows,
  compared as Iceberg compares them (``StructLikeSet``): NULL equals NULL, and floating-point values by
  Java's ``Double.compare`` (every NaN one value, ``-0.0`` apart from ``0.0``), not as SQL does.

Each delete file is read once per file group, however many of the group's data files it applies to.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from airflow_lake_provider.core.deletion_vectors import CorruptDeletionVector, deleted_positions

#: Iceberg's reserved field IDs of a position delete file's columns.
FILE_PATH_FIELD_ID, POS_FIELD_ID = 2147483546, 2147483545


class UnreadableDeletes(Exception):
    """A delete file this path cannot apply exactly as Iceberg would (the rewrite goes to Iceberg's action)."""


@dataclass(frozen=True)
class _EqualityDeletes:
    field_ids: tuple[int, ...]
    keys: Any  # pyarrow.Table of the key columns as _key_table makes them


def _columns_by_field_id(storage, path: str, field_ids: list[int]) -> dict[int, Any]:
    table = storage.parquet_file(path).read(use_threads=False)
    found = {}
    for index, field in enumerate(table.schema):
        field_id = (field.metadata or {}).get(b"PARQUET:field_id")
        if field_id is not None and int(field_id) in field_ids:
            found[int(field_id)] = table.column(index)
    missing = sorted(set(field_ids) - set(found))
    if missing:
        raise UnreadableDeletes(f"delete file {path} has no column with field IDs {missing}")
    return found


def _key_column(column, arrow_type):
    """One equality column as two join keys (is it NULL, its value with NULL filled) compared as Iceberg
    compares: floating-point values by their bits, NaN made one value first (Java's ``Double.compare``)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if column.type != arrow_type:
        column = column.cast(arrow_type)
    is_null = column.is_null()
    if pa.types.is_floating(arrow_type):
        width = pa.int32() if arrow_type == pa.float32() else pa.int64()
        column = pc.if_else(pc.is_nan(column), pa.scalar(float("nan"), arrow_type), column).view(width)
    elif pa.types.is_date32(arrow_type):
        column = column.view(pa.int32())
    elif pa.types.is_timestamp(arrow_type):
        column = column.view(pa.int64())
    if pa.types.is_boolean(column.type):
        filler: Any = False
    elif pa.types.is_integer(column.type):
        filler = 0
    elif pa.types.is_decimal(column.type):
        filler = Decimal(0)
    elif pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        filler = ""
    else:
        filler = b""
    return is_null, pc.fill_null(column, pa.scalar(filler, column.type))


def _key_table(columns: list[Any], arrow_types: list[Any]):
    import pyarrow as pa

    arrays, names = [], []
    for index, (column, arrow_type) in enumerate(zip(columns, arrow_types, strict=True)):
        is_null, value = _key_column(column, arrow_type)
        arrays += [is_null, value]
        names += [f"null_{index}", f"value_{index}"]
    return pa.Table.from_arrays(arrays, names=names)


def _row_numbers(count: int):
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.subtract(pc.cumulative_sum(pa.repeat(pa.scalar(1, pa.int64()), count)), 1)


class GroupDeletes:
    """The delete files of one file group, read once (``load``), applied to each data file (``apply``).

    ``documents``: the group's ``delete-files`` (Iceberg's content-file JSON); ``arrow_schema``: the
    table's current schema, each field with its field ID (equality values are compared in its types);
    ``storage``: where the files are (``jobs/arrow_storage.py``).
    """

    def __init__(self, documents: list[dict[str, Any]], arrow_schema, storage) -> None:
        self.documents, self.storage = documents, storage
        self.types = {int(f.metadata[b"PARQUET:field_id"]): f.type for f in arrow_schema}
        self.positions: list[dict[str, Any]] = [{} for _ in documents]
        self.dv_targets: list[str | None] = [None] * len(documents)  # the one data file each DV names
        self.equality: list[_EqualityDeletes | None] = [None] * len(documents)

    def load(self, pool) -> None:
        """Read every delete file of the group, on ``pool``."""
        for _ in pool.map(self._load, range(len(self.documents))):
            pass

    def _load(self, index: int) -> None:
        document = self.documents[index]
        path, content = document["file-path"], document["content"]
        file_format = document.get("file-format", "parquet").lower()
        if content == "position-deletes" and file_format == "puffin":
            target, positions = self._deletion_vector(document)
            self.dv_targets[index], self.positions[index] = target, {target: positions}
            return
        if file_format != "parquet":
            raise UnreadableDeletes(f"delete file {path} is not Parquet")
        if content == "position-deletes":
            if document.get("content-offset") is not None:
                raise UnreadableDeletes(f"{path} holds a blob at an offset, but is not a Puffin file")
            self.positions[index] = self._positions(path)
        elif content == "equality-deletes":
            field_ids = tuple(int(i) for i in document["equality-ids"])
            unknown = [i for i in field_ids if i not in self.types]
            if unknown:
                raise UnreadableDeletes(f"equality delete file {path} compares fields {unknown}, which the "
                                        "table's current schema no longer has")
            columns = _columns_by_field_id(self.storage, path, list(field_ids))
            self.equality[index] = _EqualityDeletes(
                field_ids, _key_table([columns[i] for i in field_ids], [self.types[i] for i in field_ids]))
        else:
            raise UnreadableDeletes(f"delete file {path} has content {content!r}")

    def _deletion_vector(self, document: dict[str, Any]) -> tuple[str, Any]:
        """The data file a DV names, and the positions it deletes (read from its blob alone)."""
        import pyarrow as pa

        path, target = document["file-path"], document.get("referenced-data-file")
        offset, size = document.get("content-offset"), document.get("content-size-in-bytes")
        if target is None or offset is None or size is None:
            raise UnreadableDeletes(f"deletion vector in {path} names no data file or no blob")
        try:
            blob = self.storage.read_range(path, int(offset), int(size))
            positions = deleted_positions(blob, cardinality=int(document["record-count"]))
        except (CorruptDeletionVector, OSError) as error:
            raise UnreadableDeletes(f"the deletion vector of {target} in {path} at offset {offset} cannot be read "
                                    f"as Iceberg reads it: {error}") from error
        return target, pa.array(positions, pa.int64())

    def _positions(self, path: str) -> dict[str, Any]:
        """The positions a position delete file lists, by the data file path they are for."""
        import pyarrow as pa

        columns = _columns_by_field_id(self.storage, path, [FILE_PATH_FIELD_ID, POS_FIELD_ID])
        table = pa.table({"file": columns[FILE_PATH_FIELD_ID], "pos": columns[POS_FIELD_ID].cast(pa.int64())})
        grouped = table.group_by("file").aggregate([("pos", "list")])
        lists = grouped.column("pos_list").combine_chunks()
        return {file: lists[index].values for index, file in enumerate(grouped.column("file").to_pylist())}

    def apply(self, table, data_path: str, references: list[int]):
        """``table`` (every row of the data file at ``data_path``, in the file's order, in the current
        schema) without the rows the delete files at ``references`` delete."""
        import pyarrow as pa
        import pyarrow.compute as pc

        if not references or table.num_rows == 0:
            return table
        strangers = [self.dv_targets[i] for i in references if self.dv_targets[i] not in (None, data_path)]
        if strangers:  # Iceberg's planner attaches a DV only to the file it names: never expected
            raise UnreadableDeletes(f"deletion vectors of {strangers} were attached to {data_path}")
        deleted = [self.positions[i][data_path] for i in references if data_path in self.positions[i]]
        by_fields: dict[tuple[int, ...], list[Any]] = {}
        for index in references:
            equality = self.equality[index]
            if equality is not None:
                by_fields.setdefault(equality.field_ids, []).append(equality.keys)
        rows = _row_numbers(table.num_rows)
        ids = {int(f.metadata[b"PARQUET:field_id"]): position for position, f in enumerate(table.schema)}
        for field_ids, key_tables in by_fields.items():
            keys = pa.concat_tables(key_tables)
            data_keys = _key_table([table.column(ids[i]) for i in field_ids], [self.types[i] for i in field_ids])
            data_keys = data_keys.append_column("row", rows)
            matched = data_keys.join(keys, keys=keys.column_names, join_type="left semi")
            deleted.append(matched.column("row").combine_chunks())
        if not deleted:
            return table
        gone = pa.concat_arrays([d.cast(pa.int64()) for d in deleted])
        return table.filter(pc.invert(pc.is_in(rows, value_set=gone)))
