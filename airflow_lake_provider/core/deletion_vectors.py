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

Also here, :func:`deleted_positions`: the positions one DV deletes, decoded from its Puffin blob
(``deletion-vector-v1``) exactly as Iceberg's ``BitmapPositionDeleteIndex.deserialize`` checks it, for
the Arrow rewriter (``jobs/arrow_deletes.py``). Pure Python: the Spark drivers' Python may lack numpy.
"""

from __future__ import annotations

import itertools
import struct
import zlib
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


# -- the DV blob ------------------------------------------------------------------------------------
#: ``deletion-vector-v1``'s magic bytes (Iceberg's ``MAGIC_NUMBER`` 1681511377, written little-endian).
DV_MAGIC = b"\xd1\xd3\x39\x64"
#: The portable Roaring format's cookies, and how many containers a run-container bitmap has before it
#: writes their offsets (``RoaringFormatSpec``).
_COOKIE_NO_RUNS, _COOKIE_RUNS, _NO_OFFSET_THRESHOLD = 12346, 12347, 4
#: An array container holds at most this many values; more are a bitmap container of 8 KiB.
_ARRAY_MAX = 4096


class CorruptDeletionVector(ValueError):
    """A DV blob that is not what its metadata says (length, magic, CRC, format or cardinality)."""


class _Reader:
    """Little-endian reads over a blob, refusing to read past its end."""

    def __init__(self, data: bytes, at: int = 0) -> None:
        self.data, self.at = data, at

    def take(self, size: int) -> bytes:
        if size < 0 or self.at + size > len(self.data):
            raise CorruptDeletionVector(f"the bitmap ends early (needs {size} bytes at offset {self.at} of "
                                        f"{len(self.data)})")
        chunk = self.data[self.at:self.at + size]
        self.at += size
        return chunk

    def unpack(self, form: str) -> tuple:
        return struct.unpack("<" + form, self.take(struct.calcsize("<" + form)))


def deleted_positions(blob: bytes, *, cardinality: int | None = None) -> list[int]:
    """The row positions (ascending) a deletion vector deletes, from its blob as the delete file's
    ``content_offset`` and ``content_size_in_bytes`` cut it out of the Puffin file.

    The blob (Puffin spec, ``deletion-vector-v1``): the length of what follows up to the CRC (4 bytes,
    big-endian), the magic ``D1 D3 39 64``, a 64-bit Roaring bitmap in the portable format (the number of
    32-bit bitmaps, 8 bytes; each with its key, 4 bytes, keys ascending, then a 32-bit Roaring bitmap in
    the portable format, all little-endian) and the CRC-32 of magic and bitmap (4 bytes, big-endian).
    ``cardinality``: the delete file's ``record_count``, which the positions must number.
    Anything else raises :class:`CorruptDeletionVector`: never a guess at which rows are deleted."""
    if len(blob) < 12:
        raise CorruptDeletionVector(f"a blob of {len(blob)} bytes is shorter than any deletion vector")
    length = int.from_bytes(blob[:4], "big")
    if length != len(blob) - 8:
        raise CorruptDeletionVector(f"the blob says {length} bytes of bitmap data, its size leaves {len(blob) - 8}")
    data = blob[4:4 + length]
    if data[:4] != DV_MAGIC:
        raise CorruptDeletionVector(f"magic bytes {data[:4].hex()} are not deletion-vector-v1's {DV_MAGIC.hex()}")
    expected_crc = int.from_bytes(blob[4 + length:], "big")
    if zlib.crc32(data) != expected_crc:
        raise CorruptDeletionVector(f"CRC-32 {zlib.crc32(data):08x} differs from the blob's {expected_crc:08x}")
    reader = _Reader(data, 4)
    (count,) = reader.unpack("q")
    if count < 0 or count > 2**31 - 1:
        raise CorruptDeletionVector(f"invalid bitmap count {count}")
    positions: list[int] = []
    last_key = -1
    for _ in range(count):
        (key,) = reader.unpack("i")
        if key < 0 or key > 2**31 - 2 or key <= last_key:
            raise CorruptDeletionVector(f"bitmap key {key} after {last_key} (keys ascend from 0)")
        last_key = key
        high = key << 32
        positions.extend(high | low for low in _roaring32(reader))
    if reader.at != len(data):
        raise CorruptDeletionVector(f"{len(data) - reader.at} bytes follow the bitmap")
    if cardinality is not None and len(positions) != cardinality:
        raise CorruptDeletionVector(f"the bitmap holds {len(positions)} positions, the delete file says {cardinality}")
    return positions


def _roaring32(reader: _Reader) -> list[int]:
    """One 32-bit Roaring bitmap in the portable format (``RoaringFormatSpec``), read from ``reader``."""
    (cookie,) = reader.unpack("I")
    if cookie & 0xFFFF == _COOKIE_RUNS:
        size = (cookie >> 16) + 1
        run_flags = reader.take((size + 7) // 8)
        offsets = size >= _NO_OFFSET_THRESHOLD
    elif cookie == _COOKIE_NO_RUNS:
        (size,) = reader.unpack("I")
        run_flags, offsets = b"", True
    else:
        raise CorruptDeletionVector(f"cookie {cookie} is not the portable Roaring format's")
    header = reader.unpack("H" * (2 * size)) if size else ()
    if offsets:
        reader.take(4 * size)  # where each container starts: they follow one another anyway
    values: list[int] = []
    last_key = -1
    for index in range(size):
        key, cardinality = header[2 * index], header[2 * index + 1] + 1
        if key <= last_key:
            raise CorruptDeletionVector(f"container key {key} after {last_key} (keys ascend)")
        last_key = key
        base = key << 16
        if run_flags and run_flags[index // 8] >> (index % 8) & 1:
            (runs,) = reader.unpack("H")
            pairs = reader.unpack("H" * (2 * runs)) if runs else ()
            found: list[int] = []
            for start, extra in zip(pairs[::2], pairs[1::2], strict=True):
                if start + extra > 0xFFFF:
                    raise CorruptDeletionVector(f"a run from {start} of {extra + 1} values leaves its container")
                found.extend(range(base + start, base + start + extra + 1))
        elif cardinality > _ARRAY_MAX:
            words = reader.unpack("Q" * 1024)
            found = []
            for index_of_word, word in enumerate(words):
                offset = base + 64 * index_of_word
                while word:
                    lowest = word & -word
                    found.append(offset + lowest.bit_length() - 1)
                    word ^= lowest
        else:
            found = [base + low for low in reader.unpack("H" * cardinality)]
        if len(found) != cardinality or any(b <= a for a, b in itertools.pairwise(found)):
            raise CorruptDeletionVector(f"container {key} holds {len(found)} ascending values, its header says "
                                        f"{cardinality}")
        values.extend(found)
    return values
