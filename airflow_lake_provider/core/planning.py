"""Compaction planning without a JVM: which data files Iceberg's binpack rewrite would touch.

The planner reproduces Apache Iceberg 1.12's ``BinPackRewriteFilePlanner`` (and its base
``SizeBasedFileRewritePlanner``), checked against the 1.12.0 runtime jars this provider uses
(tests/test_planner_vs_iceberg.py):

* **Candidates** (skipped when ``rewrite-all``): a file is a candidate when its size is outside
  ``[min-file-size-bytes, max-file-size-bytes]`` (strictly below min or strictly above max),
  or it has ``>= delete-file-threshold`` delete files, or its ratio of deleted rows (file-scoped
  deletes only, capped at the file's row count) is ``>= delete-ratio-threshold``.
* **Grouping**: by partition of the table's *current* spec; files written under any other spec
  are lumped together under the current spec's all-null partition, as Iceberg does.
* **Bin packing**: ``BinPacking.ListPacker(max-file-group-size-bytes, lookback=1,
  largestBinFirst=false, max-file-group-input-files)`` over the candidates in scan order, weighed
  by file size. With a lookback of 1 this is "fill the current bin; when the next file does not
  fit, or the bin holds ``max-file-group-input-files`` files, close it".
* **Group filter** (skipped when ``rewrite-all``): a group is kept when it has more than one
  file and at least ``min-input-files`` files, or more than one file and more bytes than the
  target, or more bytes than ``max-file-size-bytes``, or any file with too many deletes or too
  high a delete ratio.
* **Expected output files**: Iceberg's ``expectedOutputFiles`` (round the remainder up only
  when it is itself larger than the min file size, or when spreading it would make files more
  than 10% larger than the target or larger than ``writeMaxFileSize``).

On top of Iceberg, an optional per-run **budget** (``max_files``/``max_bytes``) keeps whole
groups in a deterministic order and skips a group that would overflow it, so a backlog is
worked off over several runs.

The plan it makes is the plan operator's XCom contract itself,
:class:`~airflow_lake_provider.core.contracts.PlanResult` (its groups
:class:`~airflow_lake_provider.core.contracts.PlanGroup`, their files
:class:`~airflow_lake_provider.core.contracts.DataFileInfo`): one model from planner to rewrite.

Only :func:`plan_table` touches PyIceberg (imported inside it); the rest is pure Python so the
rules can be tested and reasoned about without a catalog or Spark.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any, NamedTuple

from airflow_lake_provider.core.contracts import (
    DataFileInfo,
    PlanBudget,
    PlanGroup,
    PlanResult,
    PlanTotals,
)
from airflow_lake_provider.core.partitions import (
    partition_id,
    partition_key,
    partition_values,
)
from airflow_lake_provider.exceptions import (
    LakeConfigError,
    LakePlanRefused,
    LakeSnapshotError,
)

if TYPE_CHECKING:
    from pyiceberg.table import Table

#: Iceberg's ``TableProperties.WRITE_TARGET_FILE_SIZE_BYTES(_DEFAULT)``.
WRITE_TARGET_FILE_SIZE_PROPERTY = "write.target-file-size-bytes"
WRITE_TARGET_FILE_SIZE_DEFAULT = 512 * 1024 * 1024

#: ``SizeBasedFileRewritePlanner`` defaults (Iceberg 1.12).
MIN_FILE_SIZE_DEFAULT_RATIO = 0.75
MAX_FILE_SIZE_DEFAULT_RATIO = 1.80
MIN_INPUT_FILES_DEFAULT = 5
MAX_FILE_GROUP_SIZE_BYTES_DEFAULT = 100 * 1024**3
#: ``max-file-group-input-files`` (Iceberg 1.11+; Spark accepts it from 1.12): no cap on files per group.
MAX_FILE_GROUP_INPUT_FILES_DEFAULT = 2**63 - 1
#: ``BinPackRewriteFilePlanner`` defaults (Iceberg 1.12).
DELETE_FILE_THRESHOLD_DEFAULT = 2**31 - 1
DELETE_RATIO_THRESHOLD_DEFAULT = 0.3

_JAVA_INT_MAX = 2**31 - 1
_JAVA_LONG_MAX = 2**63 - 1
# Field id of the ``file_path`` column of position delete files (MetadataColumns.DELETE_FILE_PATH).
_DELETE_FILE_PATH_FIELD_ID = 2147483546


# --------------------------------------------------------------------------------------------
# Inputs and options
# --------------------------------------------------------------------------------------------


# (field name, option key, kind) in the order Iceberg documents them; kind drives validation.
_ICEBERG_OPTIONS: tuple[tuple[str, str, str], ...] = (
    ("target_file_size_bytes", "target-file-size-bytes", "long"),
    ("min_file_size_bytes", "min-file-size-bytes", "long"),
    ("max_file_size_bytes", "max-file-size-bytes", "long"),
    ("min_input_files", "min-input-files", "int"),
    ("max_file_group_size_bytes", "max-file-group-size-bytes", "long"),
    ("max_file_group_input_files", "max-file-group-input-files", "long"),
    ("delete_file_threshold", "delete-file-threshold", "int"),
    ("delete_ratio_threshold", "delete-ratio-threshold", "ratio"),
    ("rewrite_all", "rewrite-all", "bool"),
)


def _is_whole(value: Any) -> bool:
    # bool is an int subclass; True as a file size is a mistake, not 1.
    return isinstance(value, int) and not isinstance(value, bool)


def _parse_int(text: Any, what: str) -> int:
    try:
        return int(str(text).strip())
    except ValueError:
        raise LakeConfigError(f"{what} must be a whole number; got {text!r}.") from None


@dataclass(frozen=True)
class RewriteOptions:
    """Options of Iceberg's binpack ``rewrite_data_files``, plus this provider's per-run budget.

    ``None`` for the min/max file sizes means Iceberg's default (75% / 180% of the target);
    :meth:`resolved` fills them in the way Iceberg computes them (truncating to whole bytes).
    ``max_files``/``max_bytes`` are not Iceberg options: they cap what one planned run takes.
    """

    target_file_size_bytes: int
    min_file_size_bytes: int | None = None
    max_file_size_bytes: int | None = None
    min_input_files: int = MIN_INPUT_FILES_DEFAULT
    max_file_group_size_bytes: int = MAX_FILE_GROUP_SIZE_BYTES_DEFAULT
    max_file_group_input_files: int = MAX_FILE_GROUP_INPUT_FILES_DEFAULT
    delete_file_threshold: int = DELETE_FILE_THRESHOLD_DEFAULT
    delete_ratio_threshold: float = DELETE_RATIO_THRESHOLD_DEFAULT
    rewrite_all: bool = False
    max_files: int | None = None
    max_bytes: int | None = None

    # -- validation ---------------------------------------------------------------------------

    def validate(self) -> None:
        """Raise :class:`LakeConfigError` for anything Iceberg would reject (or we cannot honour).

        Checked before any Spark starts, with the same bounds Iceberg 1.12 enforces, so a bad
        option fails in seconds with a message naming the option rather than in a JVM.
        """
        problems: list[str] = []

        def whole(name: str, value: Any, *, minimum: int, maximum: int, nullable: bool = False) -> None:
            if value is None and nullable:
                return
            if not _is_whole(value):
                problems.append(f"{name} must be a whole number; got {value!r} ({type(value).__name__}).")
            elif value < minimum:
                bound = "positive" if minimum == 1 else f">= {minimum}"
                problems.append(f"{name} must be {bound}; got {value}.")
            elif value > maximum:
                problems.append(f"{name} must be at most {maximum}; got {value}.")

        whole("target_file_size_bytes", self.target_file_size_bytes, minimum=1, maximum=_JAVA_LONG_MAX)
        whole("min_file_size_bytes", self.min_file_size_bytes, minimum=0, maximum=_JAVA_LONG_MAX, nullable=True)
        whole("max_file_size_bytes", self.max_file_size_bytes, minimum=1, maximum=_JAVA_LONG_MAX, nullable=True)
        whole("min_input_files", self.min_input_files, minimum=1, maximum=_JAVA_INT_MAX)
        whole("max_file_group_size_bytes", self.max_file_group_size_bytes, minimum=1, maximum=_JAVA_LONG_MAX)
        whole("max_file_group_input_files", self.max_file_group_input_files, minimum=1, maximum=_JAVA_LONG_MAX)
        whole("delete_file_threshold", self.delete_file_threshold, minimum=0, maximum=_JAVA_INT_MAX)
        # A zero budget would plan nothing forever; None is the way to say "no limit".
        whole("max_files", self.max_files, minimum=1, maximum=_JAVA_LONG_MAX, nullable=True)
        whole("max_bytes", self.max_bytes, minimum=1, maximum=_JAVA_LONG_MAX, nullable=True)

        ratio = self.delete_ratio_threshold
        if isinstance(ratio, bool) or not isinstance(ratio, (int, float)):
            problems.append(f"delete_ratio_threshold must be a number; got {ratio!r} ({type(ratio).__name__}).")
        elif not (0 < ratio <= 1):  # also rejects NaN
            problems.append(f"delete_ratio_threshold must be > 0 and <= 1; got {ratio}.")
        if not isinstance(self.rewrite_all, bool):
            problems.append(f"rewrite_all must be true or false; got {self.rewrite_all!r}.")

        if not problems:  # the size relations only make sense between valid numbers
            target = self.target_file_size_bytes
            if self.min_size >= target:
                problems.append(
                    f"min_file_size_bytes ({self.min_size}) must be smaller than target_file_size_bytes "
                    f"({target}): every new file would be below the minimum and rewritten again."
                )
            if self.max_size <= target:
                problems.append(
                    f"max_file_size_bytes ({self.max_size}) must be larger than target_file_size_bytes "
                    f"({target}): every new file would be above the maximum and rewritten again."
                )
        if problems:
            raise LakeConfigError("Invalid rewrite options: " + " ".join(problems))

    def resolved(self) -> RewriteOptions:
        """A copy with min/max file sizes filled in as Iceberg derives them from the target."""
        return replace(self, min_file_size_bytes=self.min_size, max_file_size_bytes=self.max_size)

    # Java: (long) (target * ratio) -- double multiply, then truncate; Python floats are doubles.
    @property
    def min_size(self) -> int:
        """``min_file_size_bytes``, or Iceberg's default derived from the target when it is ``None``."""
        if self.min_file_size_bytes is None:
            return int(self.target_file_size_bytes * MIN_FILE_SIZE_DEFAULT_RATIO)
        return self.min_file_size_bytes

    @property
    def max_size(self) -> int:
        """``max_file_size_bytes``, or Iceberg's default derived from the target when it is ``None``."""
        if self.max_file_size_bytes is None:
            return int(self.target_file_size_bytes * MAX_FILE_SIZE_DEFAULT_RATIO)
        return self.max_file_size_bytes

    # -- conversions --------------------------------------------------------------------------

    def to_iceberg_options(self) -> dict[str, str]:
        """The ``rewrite_data_files`` option map, resolved and validated, values as strings.

        Every size is spelled out (not left to Iceberg's defaults) so Spark rewrites with
        exactly the thresholds this planner used. The budget is ours and is not included.
        """
        self.validate()
        r = self.resolved()
        out: dict[str, str] = {}
        for name, key, kind in _ICEBERG_OPTIONS:
            value = getattr(r, name)
            if name == "max_file_group_input_files" and value == MAX_FILE_GROUP_INPUT_FILES_DEFAULT:
                continue  # only when capped: an Iceberg runtime before 1.12 refuses the key on Spark
            if kind == "bool":
                out[key] = "true" if value else "false"
            elif kind == "ratio":
                out[key] = repr(float(value))
            else:
                out[key] = str(int(value))
        return out

    @classmethod
    def from_iceberg_options(
        cls, options: Mapping[str, str], *, max_files: int | None = None, max_bytes: int | None = None
    ) -> RewriteOptions:
        """Read back an option map made by :meth:`to_iceberg_options` (unknown keys ignored)."""
        if "target-file-size-bytes" not in options:
            raise LakeConfigError("The rewrite options have no 'target-file-size-bytes'.")
        kwargs: dict[str, Any] = {}
        for name, key, kind in _ICEBERG_OPTIONS:
            if key not in options or options[key] is None:
                continue
            text = options[key]
            if kind == "bool":
                kwargs[name] = str(text).strip().lower() == "true"  # Java Boolean.parseBoolean
            elif kind == "ratio":
                try:
                    kwargs[name] = float(text)
                except ValueError:
                    raise LakeConfigError(f"Option '{key}' must be a number; got {text!r}.") from None
            else:
                kwargs[name] = _parse_int(text, f"Option '{key}'")
        return cls(**kwargs, max_files=max_files, max_bytes=max_bytes)

    @classmethod
    def given(cls, overrides: Mapping[str, Any]) -> dict[str, Any]:
        """The overrides that are set (``None`` means "not given"); an unknown name is an error."""
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(overrides) - names)
        if unknown:
            raise LakeConfigError(
                f"Unknown rewrite option(s): {', '.join(unknown)}. Known: {', '.join(sorted(names))}.")
        return {k: v for k, v in overrides.items() if v is not None}

    def merged(self, **overrides: Any) -> RewriteOptions:
        """These options with ``overrides`` in their place, every other choice kept.

        How a rewrite applies what it was given to the options its plan was made with (a plan's
        option map, read by :meth:`from_iceberg_options`). ``None`` means "not given". A new
        target also moves the min/max file sizes that followed the old one (Iceberg's 75 % /
        180 %) unless they are given too; sizes the plan set itself stay. An option map spells
        out every size, so a size equal to the one derived from the old target counts as
        derived. Not validated here: :meth:`to_iceberg_options` validates.
        """
        given = self.given(overrides)
        kept = self
        if "target_file_size_bytes" in given:
            derived = replace(self, min_file_size_bytes=None, max_file_size_bytes=None).resolved()
            kept = replace(
                self,
                min_file_size_bytes=None if self.min_file_size_bytes == derived.min_file_size_bytes
                else self.min_file_size_bytes,
                max_file_size_bytes=None if self.max_file_size_bytes == derived.max_file_size_bytes
                else self.max_file_size_bytes,
            )
        return replace(kept, **given)

    @classmethod
    def from_table_properties(cls, properties: Mapping[str, str], **overrides: Any) -> RewriteOptions:
        """Options for a table: the target defaults to its ``write.target-file-size-bytes``.

        That is where Iceberg's binpack planner takes its default target from, so a plan made
        here and a rewrite run in Spark agree when no target is given. ``None`` overrides are
        ignored (they mean "not set"); unknown names are an error. Values are not validated
        here: call :meth:`validate`.
        """
        given = cls.given(overrides)
        if "target_file_size_bytes" not in given:
            raw = (properties or {}).get(WRITE_TARGET_FILE_SIZE_PROPERTY)
            given["target_file_size_bytes"] = (
                WRITE_TARGET_FILE_SIZE_DEFAULT
                if raw is None
                else _parse_int(raw, f"Table property '{WRITE_TARGET_FILE_SIZE_PROPERTY}'")
            )
        return cls(**given)


class TableFileSizes(NamedTuple):
    """A table's file sizes as Iceberg's binpack planner reads them when no option is given."""

    target_bytes: int  #: ``write.target-file-size-bytes``, else 512 MiB
    min_bytes: int  #: smaller data files are compaction candidates (75 % of the target)
    max_bytes: int  #: larger data files are split (180 % of the target)


def table_file_sizes(properties: Mapping[str, str]) -> TableFileSizes:
    """The target, small-file and large-file sizes of a table with its ``properties``.

    One owner for these defaults: the planner's candidates and the health report's "small files"
    are the same files.
    """
    options = RewriteOptions.from_table_properties(properties)
    return TableFileSizes(options.target_file_size_bytes, options.min_size, options.max_size)


# --------------------------------------------------------------------------------------------
# Iceberg's arithmetic
# --------------------------------------------------------------------------------------------


def write_max_file_size(options: RewriteOptions) -> int:
    """Iceberg's ``writeMaxFileSize``: target plus half the way to max (Java double, truncated)."""
    target, max_size = options.target_file_size_bytes, options.max_size
    return int(float(target) + float(max_size - target) * 0.5)


def expected_output_files(input_size: int, options: RewriteOptions) -> int:
    """Iceberg's ``SizeBasedFileRewritePlanner.expectedOutputFiles`` for a group's input bytes.

    Rounds down (spreading the remainder over the other files) unless the remainder is itself
    a valid file (``> min``) or spreading it makes files 10% above target / above the write max.
    """
    target, min_size = options.target_file_size_bytes, options.min_size
    if input_size < target:
        return 1
    with_remainder = -(-input_size // target)  # ceiling
    without_remainder = input_size // target
    avg_without_remainder = input_size // without_remainder
    if input_size % target > min_size:
        return with_remainder
    if float(avg_without_remainder) < min(1.1 * target, float(write_max_file_size(options))):
        return without_remainder
    return with_remainder


def _too_many_deletes(f: DataFileInfo, options: RewriteOptions) -> bool:
    return len(f.delete_file_paths) >= options.delete_file_threshold


def _too_high_delete_ratio(f: DataFileInfo, options: RewriteOptions) -> bool:
    if not f.delete_file_paths:
        return False
    if f.record_count <= 0:
        return False  # Java: 0.0 / 0 is NaN, and NaN >= threshold is false
    deleted = min(f.delete_record_count, f.record_count)
    return deleted / f.record_count >= options.delete_ratio_threshold


def _is_candidate(f: DataFileInfo, options: RewriteOptions) -> bool:
    outside = f.size_bytes < options.min_size or f.size_bytes > options.max_size
    return outside or _too_many_deletes(f, options) or _too_high_delete_ratio(f, options)


def _bin_pack(files: Sequence[DataFileInfo], max_group_bytes: int,
              max_group_files: int = MAX_FILE_GROUP_INPUT_FILES_DEFAULT) -> list[list[DataFileInfo]]:
    """``BinPacking.ListPacker(max, lookback=1, largestBinFirst=false, maxItemsPerBin)`` weighed by file size.

    With one open bin: add while ``bin + size <= max`` and the bin has fewer than ``max_group_files``
    files; otherwise close the bin and open a new one (a file larger than ``max`` gets a bin of its own).
    """
    bins: list[list[DataFileInfo]] = []
    current: list[DataFileInfo] = []
    weight = 0
    for f in files:
        if current and weight + f.size_bytes <= max_group_bytes and len(current) < max_group_files:
            current.append(f)
            weight += f.size_bytes
        else:
            if current:
                bins.append(current)
            current, weight = [f], f.size_bytes
    if current:
        bins.append(current)
    return bins


def _keep_group(group: Sequence[DataFileInfo], options: RewriteOptions) -> bool:
    size = sum(f.size_bytes for f in group)
    n = len(group)
    return (
        (n > 1 and n >= options.min_input_files)  # enoughInputFiles
        or (n > 1 and size > options.target_file_size_bytes)  # enoughContent
        or size > options.max_size  # tooMuchContent
        or any(_too_many_deletes(f, options) for f in group)
        or any(_too_high_delete_ratio(f, options) for f in group)
    )


# --------------------------------------------------------------------------------------------
# The plan
# --------------------------------------------------------------------------------------------


def plan_document(
    *,
    table: str,
    snapshot_id: int | None,
    options: RewriteOptions,
    groups: Sequence[PlanGroup],
    delete_file_count: int,
    skipped_by_budget: int,
) -> PlanResult:
    """The :class:`PlanResult` of ``groups`` (planned with ``options``), with its totals.

    Shared by :func:`plan_rewrite` and the Spark planning job, whose groups arrive as summaries
    (it never holds the files of a whole table in one place): ``delete_file_count`` is the number
    of *distinct* delete files over all groups (one delete file may touch several groups).
    """
    return PlanResult(
        table=table,
        snapshot_id=snapshot_id,
        groups=tuple(groups),
        totals=PlanTotals(
            groups=len(groups),
            files=sum(g.files for g in groups),
            bytes=sum(g.bytes for g in groups),
            delete_files=delete_file_count,
            partitions=len({partition_id(g.spec_id, g.partition) for g in groups}),
        ),
        expected_output_files=sum(g.expected_output_files for g in groups),
        options=options.to_iceberg_options(),
        budget=PlanBudget(max_files=options.max_files, max_bytes=options.max_bytes),
        skipped_by_budget=skipped_by_budget,
    )


def rewrite_partition_of(
    f: DataFileInfo, current_spec_id: int | None, current_partition_fields: Sequence[str] | None
) -> tuple[int, dict[str, Any]]:
    """The (spec id, partition) whose group ``f`` joins: Iceberg lumps files of other specs
    under the current spec's all-null partition (no lumping when ``current_spec_id`` is None)."""
    if current_spec_id is None or f.spec_id == current_spec_id:
        return f.spec_id, f.partition
    return current_spec_id, dict.fromkeys(current_partition_fields or ())


def partition_order(spec_id: int, partition: Mapping[str, Any]) -> tuple[str, int]:
    """The order groups of different partitions are listed in: partition JSON, spec."""
    return partition_key(partition), spec_id


def plan_partition(
    files: Sequence[DataFileInfo], spec_id: int, partition: Mapping[str, Any], options: RewriteOptions
) -> list[PlanGroup]:
    """The groups of one partition (files in scan order), before any budget: candidates, bins, filter."""
    r = options.resolved()
    candidates = files if r.rewrite_all else [f for f in files if _is_candidate(f, r)]
    groups = []
    for packed in _bin_pack(candidates, r.max_file_group_size_bytes, r.max_file_group_input_files):
        if r.rewrite_all or _keep_group(packed, r):
            size = sum(f.size_bytes for f in packed)
            groups.append(PlanGroup.of(spec_id, partition, packed, expected_output_files(size, r)))
    return groups


@dataclass(frozen=True)
class BudgetMeasure:
    """What the budget needs of a file group: its partition (the unit the rewrite is scoped by) and size."""

    partition: str
    files: int
    bytes: int
    delete_files: int = 0


def apply_budget(groups: Sequence[Any], options: RewriteOptions, measure) -> tuple[list[Any], int]:
    """Whole partitions, most benefit first, while they fit ``max_files``/``max_bytes``.

    Returns the taken groups in their plan order and the number of groups skipped. The rewrite
    is scoped by partition (Iceberg rewrites every group of a planned partition), so a partition
    is taken with all its groups or not at all: taking some of its groups would let the rewrite
    exceed the budget. Benefit is files and delete files removed per byte read: a partition of
    many tiny files or many deletes goes before one of few large files; equal benefit keeps the
    plan's order. What does not fit is left for the next run, which plans from the table as this
    one left it and so starts with the best of the rest. ``measure(group)`` gives a
    :class:`BudgetMeasure`. A single partition larger than the budget is never taken.
    """
    if options.max_files is None and options.max_bytes is None:
        return list(groups), 0
    by_partition: dict[str, list[int]] = {}
    measures = [measure(group) for group in groups]
    for index, m in enumerate(measures):
        by_partition.setdefault(m.partition, []).append(index)

    def benefit(indexes: list[int]) -> float:
        size = sum(measures[i].bytes for i in indexes)
        return sum(measures[i].files + measures[i].delete_files for i in indexes) / max(size, 1)

    taken: set[int] = set()
    file_total = byte_total = 0
    for indexes in sorted(by_partition.values(), key=benefit, reverse=True):  # stable: ties keep plan order
        files = sum(measures[i].files for i in indexes)
        size = sum(measures[i].bytes for i in indexes)
        if (options.max_files is not None and file_total + files > options.max_files) or (
            options.max_bytes is not None and byte_total + size > options.max_bytes
        ):
            continue
        taken.update(indexes)
        file_total += files
        byte_total += size
    return [g for i, g in enumerate(groups) if i in taken], len(groups) - len(taken)


def budget_measure(group: PlanGroup) -> BudgetMeasure:
    """The :class:`BudgetMeasure` of a group (its sums: the files need not be there)."""
    return BudgetMeasure(f"{group.spec_id}:{partition_key(group.partition)}", group.files, group.bytes,
                         group.delete_files)


def plan_rewrite(
    files: Iterable[DataFileInfo],
    options: RewriteOptions,
    *,
    table: str = "",
    snapshot_id: int | None = None,
    current_spec_id: int | None = None,
    current_partition_fields: Sequence[str] | None = None,
) -> PlanResult:
    """Plan a binpack compaction of ``files`` exactly as Iceberg 1.12 would, then apply the budget.

    ``files`` must be in scan order: bin packing is order-sensitive, like in Iceberg.
    With ``current_spec_id`` (what :func:`plan_table` passes) files of other specs are grouped
    together under the current spec's all-null partition (``current_partition_fields`` names
    its fields), which is Iceberg's rule; without it, files are grouped by (spec id, partition).
    """
    options.validate()
    by_partition: dict[tuple[str, int], tuple[int, dict[str, Any], list[DataFileInfo]]] = {}
    for f in files:
        spec_id, partition = rewrite_partition_of(f, current_spec_id, current_partition_fields)
        by_partition.setdefault(partition_order(spec_id, partition), (spec_id, dict(partition), []))[2].append(f)

    groups: list[PlanGroup] = []
    for key in sorted(by_partition):  # deterministic: partition JSON, then spec id
        spec_id, partition, members = by_partition[key]
        groups += plan_partition(members, spec_id, partition, options)
    taken, skipped = apply_budget(groups, options.resolved(), budget_measure)
    return plan_document(table=table, snapshot_id=snapshot_id, options=options, groups=taken,
                         delete_file_count=len({path for g in taken for path in g.delete_file_paths}),
                         skipped_by_budget=skipped)


# --------------------------------------------------------------------------------------------
# PyIceberg adapter
# --------------------------------------------------------------------------------------------


def _is_file_scoped(delete_file: Any) -> bool:
    """Iceberg's ``ContentFileUtil.isFileScoped``: a DV, or position deletes of one data file."""
    from pyiceberg.manifest import DataFileContent

    if delete_file.content != DataFileContent.POSITION_DELETES:
        return False
    if getattr(delete_file, "referenced_data_file", None):
        return True
    lower = (delete_file.lower_bounds or {}).get(_DELETE_FILE_PATH_FIELD_ID)
    upper = (delete_file.upper_bounds or {}).get(_DELETE_FILE_PATH_FIELD_ID)
    return lower is not None and lower == upper


def equality_deletes_refusal(table_name: str, snapshot_id: int | None) -> LakePlanRefused:
    """The error for planning a snapshot with equality deletes in the worker: PyIceberg cannot."""
    return LakePlanRefused(
        f"{table_name} has equality delete files at snapshot {snapshot_id} (written by Flink upserts or CDC), "
        "which PyIceberg cannot plan: plan it with engine='spark' or engine='auto' (Iceberg's own planner, in Spark)."
    )


def parse_partition_filter(table: Table, partition_filter: str | None) -> Any:
    """The PyIceberg expression of a filter string (``AlwaysTrue`` when empty), checked against the schema.

    An unparsable filter or one naming an unknown column raises :class:`LakeConfigError` here,
    before any scan or JVM.
    """
    from pyiceberg.expressions import AlwaysTrue
    from pyiceberg.expressions.parser import parse
    from pyiceberg.expressions.visitors import bind

    if partition_filter is None or not partition_filter.strip():
        return AlwaysTrue()
    try:
        row_filter = parse(partition_filter)
        bind(table.schema(), row_filter, case_sensitive=True)  # unknown columns fail here, not mid-scan
    except Exception as exc:  # pyparsing.ParseException, ValueError from binding
        if hasattr(exc, "loc"):  # the parser's own "Expected {...}" grammar dump helps nobody
            detail = (f"it does not parse (at char {exc.loc}); write a PyIceberg filter such as "
                      "day = '2026-01-01' or amount > 10 AND region = 'eu'")
        else:
            detail = str(exc)
        raise LakeConfigError(f"Invalid partition_filter {partition_filter!r}: {detail}.") from exc
    return row_filter


def plan_table(
    table: Any,
    options: RewriteOptions | None = None,
    *,
    partition_filter: str | None = None,
    table_name: str = "",
    snapshot_id: int | None = None,
    include_files: bool = True,
) -> PlanResult:
    """Plan a compaction of a PyIceberg ``table`` at its current snapshot (or ``snapshot_id``).

    ``partition_filter`` is a PyIceberg row-filter string (``"day = '2026-01-01'"``); like
    Iceberg's planner the filter selects whole files (no residuals). An unparsable filter or
    one naming an unknown column raises :class:`LakeConfigError` before anything else runs.
    ``include_files=False`` keeps only the groups' sums (:meth:`PlanResult.without_files`).
    """
    # Imported here: this module also ships to Spark (jobs), where only its pure part is used.
    from airflow_lake_provider.core.snapshots import has_equality_deletes

    options = options or RewriteOptions.from_table_properties(dict(table.properties))
    options.validate()
    row_filter = parse_partition_filter(table, partition_filter)

    if snapshot_id is None:
        current = table.current_snapshot()
        if current is None:  # a table with no data: nothing to rewrite
            return plan_document(table=table_name, snapshot_id=None, options=options, groups=(),
                                 delete_file_count=0, skipped_by_budget=0)
        snapshot_id = current.snapshot_id
    elif table.snapshot_by_id(snapshot_id) is None:
        raise LakeSnapshotError(f"Snapshot {snapshot_id} is not part of the history of table {table_name or table}.")
    if has_equality_deletes(table, table.snapshot_by_id(snapshot_id)):
        raise equality_deletes_refusal(table_name or str(table), snapshot_id)

    specs = table.specs()
    current_spec = table.spec()
    files: list[DataFileInfo] = []
    for task in table.scan(snapshot_id=snapshot_id, row_filter=row_filter).plan_files():
        data_file = task.file
        names = [f.name for f in specs[data_file.spec_id].fields]
        partition = partition_values(names, data_file.partition)
        deletes = sorted(task.delete_files or (), key=lambda d: d.file_path)
        files.append(
            DataFileInfo(
                path=data_file.file_path,
                spec_id=data_file.spec_id,
                partition=partition,
                size_bytes=data_file.file_size_in_bytes,
                record_count=data_file.record_count,
                delete_file_paths=tuple(d.file_path for d in deletes),
                delete_record_count=sum(d.record_count for d in deletes if _is_file_scoped(d)),
            )
        )
    plan = plan_rewrite(
        files,
        options,
        table=table_name,
        snapshot_id=snapshot_id,
        current_spec_id=current_spec.spec_id,
        current_partition_fields=[f.name for f in current_spec.fields],
    )
    return plan if include_files else plan.without_files()


__all__ = [
    "DataFileInfo",
    "RewriteOptions",
    "TableFileSizes",
    "apply_budget",
    "equality_deletes_refusal",
    "expected_output_files",
    "parse_partition_filter",
    "plan_document",
    "plan_partition",
    "plan_rewrite",
    "plan_table",
    "table_file_sizes",
    "write_max_file_size",
]
