"""When a bin-pack rewrite may run on Arrow, and how its Parquet is written: decisions only.

The Arrow rewriter (``jobs/arrow_rewrite.py``) keeps Iceberg's planner and Iceberg's commit and
replaces only the part between them: reading the small files and writing the new ones. It is
taken only where the files it writes are provably what Iceberg's Spark writer would have
committed: the same rows (position and equality deletes and deletion vectors applied as Iceberg's
readers apply them, ``jobs/arrow_deletes.py``), the same columns by field ID (on format v3 also each
row's lineage, :data:`ROW_LINEAGE`, as Iceberg's rewrite writes it), files of the current partition
spec only, no sort order, and a codec both writers share.
Everything else goes to Iceberg's own ``rewrite_data_files``; :func:`arrow_ineligibility` says
why, in words a user sees in the task's log and result.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from airflow_lake_provider.core.file_metrics import FLOATING_TYPES
from airflow_lake_provider.core.object_storage import adls_location, store_of

#: ``rewriter``: ``auto`` takes Arrow where :func:`arrow_ineligibility` allows it, else Iceberg's
#: Spark action; ``iceberg`` always Iceberg's Spark action; ``arrow`` refuses a table Arrow cannot rewrite.
REWRITERS = ("auto", "iceberg", "arrow")

#: Iceberg's primitive types the Arrow rewriter carries, by their name in Iceberg's schema JSON.
_ARROW_TYPES = {"boolean", "int", "long", "float", "double", "date", "string", "binary", "timestamp", "timestamptz"}
_DECIMAL = re.compile(r"^decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)$")

#: Iceberg's ``write.parquet.compression-codec`` values, as Arrow names them. Iceberg's ``lz4`` is
#: Hadoop's framing, which Arrow does not write: such tables stay with Iceberg's writer.
_CODECS = {"zstd": "zstd", "gzip": "gzip", "snappy": "snappy", "brotli": "brotli", "uncompressed": "none"}
#: parquet-mr's levels when the table sets none (Arrow's own zstd default is 1, Iceberg's writer uses 3).
_DEFAULT_LEVELS = {"zstd": 3, "gzip": 6}

#: Format v3's row lineage (``MetadataColumns.ROW_ID``, ``LAST_UPDATED_SEQUENCE_NUMBER``): (field ID, name).
#: Iceberg's rewrite of a v3 table writes both after the table's columns, optional longs, for every row as
#: its reader gives them: the file's value, else ``_row_id`` = the file's ``first_row_id`` + the row's
#: position and ``_last_updated_sequence_number`` = the file's data sequence number. So each row keeps
#: its lineage although the new file gets new ones.
ROW_LINEAGE = ((2147483540, "_row_id"), (2147483539, "_last_updated_sequence_number"))
#: Format v3's types (Iceberg's JSON names, ``geometry(...)`` and ``geography(...)`` by prefix): Iceberg's writer's.
_V3_TYPES = ("variant", "geometry", "geography", "unknown", "timestamp_ns", "timestamptz_ns")

#: Table properties that move where new data files go (Iceberg's LocationProviders).
_DATA_LOCATION_PROPERTIES = ("write.data.path", "write.object-storage.path", "write.folder-storage.path")

#: Options the Arrow rewriter honours besides the planner's own (``BinPackRewriteFilePlanner.validOptions``).
ARROW_REWRITER_OPTIONS = frozenset({
    "partial-progress.enabled", "partial-progress.max-commits", "partial-progress.max-failed-commits",
    "max-concurrent-file-group-rewrites", "use-starting-sequence-number", "output-spec-id",
    "remove-dangling-deletes", "rewrite-job-order",
})


def arrow_type_supported(type_json: Any) -> bool:
    """Whether a column of this Iceberg type (schema JSON) is carried by the Arrow rewriter."""
    return isinstance(type_json, str) and (type_json in _ARROW_TYPES or decimal_type(type_json) is not None)


def decimal_type(type_name: str) -> tuple[int, int] | None:
    """(precision, scale) of an Iceberg ``decimal(p, s)`` type name; ``None`` for any other type."""
    match = _DECIMAL.match(type_name)
    return (int(match.group(1)), int(match.group(2))) if match else None


def arrow_ineligibility(*, strategy: str, schema: Mapping[str, Any], properties: Mapping[str, str],
                        format_version: int, current_spec_id: int, sort_order_fields: int,
                        location: str, options: Mapping[str, str],
                        planner_options: Iterable[str] | None) -> str | None:
    """Why this rewrite cannot run on Arrow, or ``None`` when it can. Each reason names what differs.

    ``planner_options``: the options Iceberg's bin-pack planner takes, known only in the JVM; ``None``
    (the worker's check before a JVM) leaves the options to the job's own check.
    """
    if strategy != "binpack":
        return f"strategy {strategy!r} sorts rows (Arrow only bin-packs)"
    if format_version > 3:
        return f"format v{format_version} is newer than the format v3 Arrow rewrites"
    if str(options.get("output-spec-id", current_spec_id)) != str(current_spec_id):
        return "output-spec-id names another partition spec"
    if sort_order_fields:
        return "the table has a sort order (Iceberg's writer sorts the new files)"
    if properties.get("write.format.default", "parquet").lower() != "parquet":
        return f"the table writes {properties['write.format.default']} files"
    if parquet_codec(properties) is None:
        return f"compression codec {properties.get('write.parquet.compression-codec')!r} is not one Arrow writes"
    if any(key.startswith("write.parquet.bloom-filter") for key in properties):
        return "the table asks for Parquet bloom filters"
    data_locations = [location, *(properties[key] for key in _DATA_LOCATION_PROPERTIES if key in properties)]
    stores = {store_of(place) for place in data_locations}
    if None in stores or len(stores) > 1:
        return ("the table's data is not all on one of the stores the Arrow rewriter reaches (a local file system, "
                "S3, GCS, ADLS; other stores use Iceberg's writer)")
    if stores == {"adls"} and len({adls_location(place)[1] for place in data_locations}) > 1:
        return "the table's data is on more than one ADLS account (the Arrow rewriter reaches one per table)"
    known = ARROW_REWRITER_OPTIONS | set(planner_options if planner_options is not None else options)
    unknown = sorted(set(options) - known)
    if unknown:
        return f"options {unknown} are for Iceberg's Spark rewriter"
    for field in schema.get("fields", []):
        kind = field["type"]["type"] if isinstance(field.get("type"), dict) else field.get("type")
        if str(kind).startswith(_V3_TYPES):
            return f"column {field.get('name')!r} has type {kind}, a format v3 type Arrow does not rewrite"
        if not arrow_type_supported(field.get("type")):
            return f"column {field.get('name')!r} has type {kind}, which Arrow does not rewrite here"
        default = next((key for key in ("initial-default", "write-default") if field.get(key) is not None), None)
        if default is not None:
            return (f"column {field.get('name')!r} has a default value ({default}, format v3), which Arrow does not "
                    "fill in")
    return None


def on_executors(master: str) -> bool:
    """Whether the Arrow rewriter writes on Spark's executors (a cluster master) rather than on the
    driver's threads (a local master). On a cluster the driver is often the Airflow worker (client
    mode), and the executors are where the job's cores are: each new file is one Spark task there,
    as the Spark action spreads a group's output files over tasks. In local mode the executors
    would be Python workers on the same cores, with the work pickled to them: threads cost less."""
    return not master.startswith("local")


def arrow_refusal(table: str, reason: str) -> str:
    """What ``rewriter='arrow'`` says when it cannot rewrite ``table``, and the way out."""
    return (f"rewriter='arrow' cannot rewrite {table}: {reason}. Use rewriter='auto', which takes Iceberg's "
            "Spark rewriter for such tables.")


def parquet_codec(properties: Mapping[str, str]) -> tuple[str, int | None] | None:
    """Arrow's codec name and level for the table's ``write.parquet.compression-*`` properties."""
    # Iceberg's writer takes gzip when the property is absent: Java catalogs set zstd on the tables they
    # create (since Iceberg 1.4), other writers (PyIceberg) may leave it out.
    codec = properties.get("write.parquet.compression-codec", "gzip").lower()
    if codec not in _CODECS:
        return None
    level = properties.get("write.parquet.compression-level")
    return _CODECS[codec], int(level) if level not in (None, "") else _DEFAULT_LEVELS.get(codec)


def dictionary_columns(properties: Mapping[str, str], columns: Iterable[tuple[str, str]]) -> list[str]:
    """The columns (name, Iceberg type) written with a dictionary: those the table does not disable
    (``write.parquet.dict-encoding-enabled.column.<name>``), floating-point ones left out.

    Why not floats: Iceberg's readers skip a row group by its dictionary and its footer statistics
    with Iceberg's own comparisons (``-0.0`` below ``0.0``, NaN in no range), where engines compare as
    SQL does (``-0.0 = 0.0``, NaN above every number). A dictionary of ``0.0`` hides those rows from
    ``WHERE d = -0.0``, and statistics that leave NaN out hide them from ``WHERE d >= x``. Without
    either, the row group is read; files are still pruned by the manifests' bounds (docs/safety.md)."""
    prefix = "write.parquet.dict-encoding-enabled.column."
    return [name for name, type_name in columns
            if type_name not in FLOATING_TYPES and properties.get(prefix + name, "true").lower() != "false"]


def statistics_columns(columns: Iterable[tuple[str, str]]) -> list[str]:
    """The columns (name, Iceberg type) whose footers carry statistics: all but floating-point ones
    (why: :func:`dictionary_columns`)."""
    return [name for name, type_name in columns if type_name not in FLOATING_TYPES]


def row_group_bytes(properties: Mapping[str, str]) -> int:
    """Iceberg's ``write.parquet.row-group-size-bytes`` (its default 128 MiB)."""
    return int(properties.get("write.parquet.row-group-size-bytes", 128 * 1024 * 1024))


def split_into_outputs(sizes: Sequence[int], outputs: int) -> list[int]:
    """For each input file in order, the output file (0-based) it goes to: ``outputs`` runs of about
    equal input bytes, as Iceberg's planner expects (``expectedOutputFiles``)."""
    total = sum(sizes)
    if outputs <= 1 or total == 0:
        return [0] * len(sizes)
    share = total / outputs
    placed, before = [], 0
    for size in sizes:
        placed.append(min(outputs - 1, int(before // share)))
        before += size
    return placed
