"""Deletion vectors that break a format v3 table, found from its manifests' entries alone.

A deletion vector (DV, a Puffin blob) names the one data file whose rows it deletes. Iceberg keeps
at most one live DV per data file: every engine builds an index of them before it reads a row, and
a second one for the same file fails every read of the table ("Can't index multiple DVs",
apache/iceberg#17206). Writers that do not merge the existing DV into the new one leave that state
(Iceberg 1.12 accepts the commit when the writer validates from the snapshot it read). A DV whose
data file is no longer live deletes nothing; it is what a rewrite leaves when it drops a data file
without its DV, and two of them for one removed file break reads as well.

Pure: the entries come from the job's reading of the ``entries`` metadata table (which does not
build that index, so it reads a broken table), and the refusal names the files and the way out.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from airflow_lake_provider.core import step_names as names

#: How many data files and DVs a refusal names before "and N more".
NAMED = 5


@dataclass(frozen=True, order=True)
class DeletionVector:
    """One live DV: where its blob is (``path`` and ``offset``: several DVs share a Puffin file) and
    the data file it names, with the rows it deletes."""

    referenced_data_file: str
    path: str
    offset: int
    deleted_rows: int = 0


@dataclass(frozen=True)
class DeletionVectorProblems:
    """``duplicates``: data file -> its live DVs, for files with more than one; ``dangling``: DVs whose
    data file is not live in the snapshot (those of a duplicated file included)."""

    duplicates: dict[str, list[DeletionVector]] = field(default_factory=dict)
    dangling: list[DeletionVector] = field(default_factory=list)

    @property
    def breaks_reads(self) -> bool:
        """Whether readers fail on the snapshot: some data file, live or not, has two DVs."""
        return bool(self.duplicates)

    def __bool__(self) -> bool:
        return bool(self.duplicates or self.dangling)

    def to_json(self) -> dict:
        return {"duplicated_data_files": {path: [f"{dv.path}@{dv.offset}" for dv in dvs]
                                          for path, dvs in sorted(self.duplicates.items())},
                "dangling_deletion_vectors": [f"{dv.path}@{dv.offset} -> {dv.referenced_data_file}"
                                              for dv in sorted(self.dangling)]}


def find_problems(deletion_vectors: Iterable[DeletionVector], live_data_files: Iterable[str]) -> DeletionVectorProblems:
    """The duplicated and dangling DVs among a snapshot's live DVs, given its live data files."""
    by_file: dict[str, list[DeletionVector]] = defaultdict(list)
    for dv in deletion_vectors:
        by_file[dv.referenced_data_file].append(dv)
    live = set(live_data_files)
    return DeletionVectorProblems(
        duplicates={path: sorted(dvs) for path, dvs in by_file.items() if len(dvs) > 1},
        dangling=sorted(dv for path, dvs in by_file.items() if path not in live for dv in dvs),
    )


def _named(items: list[str]) -> str:
    shown = ", ".join(items[:NAMED])
    return shown + (f" and {len(items) - NAMED} more" if len(items) > NAMED else "")


def refusal(table: str, snapshot_id: int | None, problems: DeletionVectorProblems, *, doing: str) -> str:
    """Why ``doing`` (e.g. "rewrite") will not run on ``table``'s snapshot, naming the files, and the way out."""
    broken = sorted(problems.duplicates)
    counts = [f"{path} ({len(problems.duplicates[path])} DVs)" for path in broken]
    return (
        f"{table} cannot be read at snapshot {snapshot_id}: data files with more than one deletion vector, which "
        f"every engine refuses (\"Can't index multiple DVs\"): {len(broken)}, {_named(counts)}. A writer added a DV "
        f"without merging the one before. The {doing} changed nothing. Repair the table first: "
        f"IcebergRepairDeletionVectorsOperator(table={table!r}) (the {names.REPAIR_DELETION_VECTORS} step; "
        "dry_run=True lists what it would merge) merges each file's DVs into one, keeping every deleted row "
        "deleted, and drops the DVs of files no longer in the table."
    )
