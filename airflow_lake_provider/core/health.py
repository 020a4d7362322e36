"""Table health from metadata alone (PyIceberg, no JVM): what makes a table slow or costly.

The figures a maintainer looks at first, per table and per partition: how many data files and
how small, how many delete files and deleted rows, how long the snapshot history is and how
many manifests a scan must open; plus a 0-100 score whose parts say what lowers it and by how
much (docs/health-score.md). Pure logic over PyIceberg metadata: no Airflow, no Spark.

The figures come from the current snapshot's manifests (every live entry), the way
``tests/lake_checks.live_files`` counts them: delete files that no longer match any data file
(dangling deletes) are counted too, unlike in a scan plan. Cost: one read of the manifest list
and of every manifest, a few tens of milliseconds per thousand files (see
``benchmarks/health_cost.py``).
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any, cast

from airflow_lake_provider.core.coercion import is_none, whole_number
from airflow_lake_provider.core.coercion import number as coerced_number
from airflow_lake_provider.core.partitions import partition_id, partition_values
from airflow_lake_provider.core.planning import (
    MIN_FILE_SIZE_DEFAULT_RATIO,
    table_file_sizes,
)
from airflow_lake_provider.exceptions import LakeConfigError

if TYPE_CHECKING:
    from collections.abc import Iterable

    from pyiceberg.table import Table
    from pyiceberg.table.snapshots import Snapshot

DEFAULT_MAX_SNAPSHOT_AGE_MS = 5 * 24 * 3600 * 1000  # Iceberg's history.expire.max-snapshot-age-ms

# The score: 100 minus these penalties (docs/health-score.md explains each one).
SMALL_FILES_MAX_PENALTY = 40  # scaled by the share of data files compaction would merge away
DELETES_MAX_PENALTY = 30  # reached at a weighted delete ratio of DELETES_FULL_PENALTY_RATIO
DELETES_FULL_PENALTY_RATIO = 0.10
#: A row deleted by equality counts as this many position-deleted rows. From Amoro's health score
#: (CommonPartitionEvaluator.getHealthScore): equality deletes cost 40 points at a ratio of the
#: duplicate ratio (0.1), position deletes 20 points at twice it: 400 vs 100 points per unit ratio.
EQUALITY_DELETE_ROW_WEIGHT = 4
SNAPSHOTS_FREE = 100  # snapshots kept without penalty
SNAPSHOTS_PER_POINT = 100  # then 1 point per this many more
SNAPSHOTS_MAX_PENALTY = 10
OLD_SNAPSHOT_PENALTY = 5  # the oldest snapshot is older than the table's expiry age
MANIFESTS_FREE = 20
MANIFESTS_PER_POINT = 20
MANIFESTS_MAX_PENALTY = 15


class _Figures:
    """Figures derived from the counts a table and a partition both have."""

    data_files: int
    data_bytes: int
    records: int
    small_files: int
    position_delete_files: int
    equality_delete_files: int
    delete_records: int
    equality_delete_records: int

    @property
    def average_file_bytes(self) -> int:
        return self.data_bytes // self.data_files if self.data_files else 0

    @property
    def delete_files(self) -> int:
        return self.position_delete_files + self.equality_delete_files

    @property
    def small_file_ratio(self) -> float:
        return self.small_files / self.data_files if self.data_files else 0.0

    @property
    def delete_ratio(self) -> float:
        """Delete records (position and equality) per data record; 0 when there are no data records."""
        return self.delete_records / self.records if self.records else 0.0

    @property
    def weighted_delete_ratio(self) -> float:
        """The delete ratio with each equality-deleted row counted ``EQUALITY_DELETE_ROW_WEIGHT`` times.

        Readers apply a position delete by skipping a row they locate directly; an equality delete
        they must compare against the key of every row of every older data file it applies to.
        """
        if not self.records:
            return 0.0
        position = self.delete_records - self.equality_delete_records
        return (position + EQUALITY_DELETE_ROW_WEIGHT * self.equality_delete_records) / self.records

    def derived(self) -> dict[str, Any]:
        return {
            "average_file_bytes": self.average_file_bytes,
            "delete_files": self.delete_files,
            "small_file_ratio": round(self.small_file_ratio, 6),
            "delete_ratio": round(self.delete_ratio, 6),
            "weighted_delete_ratio": round(self.weighted_delete_ratio, 6),
        }


@dataclass
class FileStats(_Figures):
    """Data and delete file figures of a table or of one partition."""

    data_files: int = 0
    data_bytes: int = 0
    records: int = 0
    small_files: int = 0
    small_bytes: int = 0
    position_delete_files: int = 0
    equality_delete_files: int = 0
    delete_records: int = 0
    equality_delete_records: int = 0

    def add(self, data_file: Any, small_limit: int) -> None:
        kind = data_file.content.name
        if kind == "DATA":
            self.data_files += 1
            self.data_bytes += data_file.file_size_in_bytes
            self.records += data_file.record_count
            if data_file.file_size_in_bytes < small_limit:
                self.small_files += 1
                self.small_bytes += data_file.file_size_in_bytes
            return
        self.delete_records += data_file.record_count
        if kind == "EQUALITY_DELETES":
            self.equality_delete_files += 1
            self.equality_delete_records += data_file.record_count
        else:
            self.position_delete_files += 1

    def mergeable_small_files(self, target: int) -> int:
        """Small files a compaction would remove: all of them but the files their bytes fill."""
        if self.small_files < 2:
            return 0
        return max(0, self.small_files - max(1, math.ceil(self.small_bytes / target)))

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), **self.derived()}


@dataclass(frozen=True)
class PartitionHealth:
    """One partition, named the way the planner names it: ``spec_id`` plus ``{field: value}``."""

    spec_id: int
    partition: dict[str, Any]
    stats: FileStats
    mergeable_small_files: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "spec_id": self.spec_id,
            "partition": self.partition,
            **self.stats.to_dict(),
            "mergeable_small_files": self.mergeable_small_files,
        }


@dataclass(frozen=True)
class ScorePart:
    """One reason the score is below 100, and how many points it costs."""

    reason: str
    penalty: int

    def to_dict(self) -> dict[str, Any]:
        return {"reason": self.reason, "penalty": self.penalty}


@dataclass(frozen=True)
class TableHealth(_Figures):
    table: str
    snapshot_id: int | None
    data_files: int
    data_bytes: int
    records: int
    small_files: int
    target_file_size_bytes: int
    position_delete_files: int
    equality_delete_files: int
    delete_records: int
    snapshots: int
    oldest_snapshot_ms: int | None
    partitions: int
    small_file_limit_bytes: int = 0
    mergeable_small_files: int = 0
    manifests: int = 0
    oldest_snapshot_age_ms: int | None = None
    max_snapshot_age_ms: int = DEFAULT_MAX_SNAPSHOT_AGE_MS
    measured_at_ms: int = 0
    equality_delete_records: int = 0
    by_partition: tuple[PartitionHealth, ...] = field(default=(), repr=False)

    @property
    def score_parts(self) -> list[ScorePart]:
        return score_parts(self)

    @property
    def score(self) -> int:
        return max(0, 100 - sum(part.penalty for part in self.score_parts))

    def worst_partitions(self, limit: int | None = None) -> list[PartitionHealth]:
        """Partitions by how much maintenance they need: mergeable small files, then deletes."""
        ranked = sorted(
            self.by_partition,
            key=lambda p: (-p.mergeable_small_files, -p.stats.delete_records, -p.stats.small_files),
        )
        return ranked if limit is None else ranked[:limit]

    def to_dict(self, *, max_partitions: int | None = None) -> dict[str, Any]:
        """A JSON-able report; ``by_partition`` lists the ``max_partitions`` worst partitions."""
        plain = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "by_partition"}
        return {
            **plain,
            **self.derived(),
            "score": self.score,
            "score_parts": [part.to_dict() for part in self.score_parts],
            "by_partition": [p.to_dict() for p in self.worst_partitions(max_partitions)],
        }


def _file_stats(table: Table, snapshot: Snapshot | None, small_limit: int):
    """Figures of the live files of ``snapshot``: the table's, per partition (by :func:`partition_id`,
    with its JSON values), and the number of manifests read."""
    specs = table.specs()
    total = FileStats()
    per_partition: dict[tuple[int, str], tuple[dict[str, Any], FileStats]] = {}
    seen: dict[tuple[int, tuple], FileStats] = {}  # raw partition record -> its stats: one conversion each
    manifests = 0
    for manifest in snapshot.manifests(table.io) if snapshot is not None else ():
        manifests += 1
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
            data_file = entry.data_file
            total.add(data_file, small_limit)
            # A partition Record iterates by index (__getitem__/__len__); its type does not say so.
            raw = (data_file.spec_id, tuple(cast("Iterable[Any]", data_file.partition)))
            if raw not in seen:
                partition = partition_values((f.name for f in specs[data_file.spec_id].fields), raw[1])
                seen[raw] = per_partition.setdefault(partition_id(data_file.spec_id, partition),
                                                     (partition, FileStats()))[1]
            seen[raw].add(data_file, small_limit)
    return total, per_partition, manifests


def table_health(table: Table, *, table_name: str = "", now_ms: int | None = None) -> TableHealth:
    """Health of a PyIceberg table's current snapshot, from its manifests only."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    properties = dict(table.properties)
    # The planner's own defaults: a "small file" here is a compaction candidate there.
    target, small_limit, _ = table_file_sizes(properties)
    snapshot = table.current_snapshot()
    total, per_partition, manifests = _file_stats(table, snapshot, small_limit)
    by_partition = tuple(
        PartitionHealth(spec_id, partition, stats, mergeable_small_files=stats.mergeable_small_files(target))
        for (spec_id, _), (partition, stats) in per_partition.items()
    )
    snapshots = table.snapshots()
    oldest = min((s.timestamp_ms for s in snapshots), default=None)
    return TableHealth(
        table=table_name or ".".join(table.name()),
        snapshot_id=snapshot.snapshot_id if snapshot else None,
        data_files=total.data_files,
        data_bytes=total.data_bytes,
        records=total.records,
        small_files=total.small_files,
        target_file_size_bytes=target,
        position_delete_files=total.position_delete_files,
        equality_delete_files=total.equality_delete_files,
        delete_records=total.delete_records,
        equality_delete_records=total.equality_delete_records,
        snapshots=len(snapshots),
        oldest_snapshot_ms=oldest,
        partitions=sum(1 for p in by_partition if p.stats.data_files),
        small_file_limit_bytes=small_limit,
        mergeable_small_files=sum(p.mergeable_small_files for p in by_partition),
        manifests=manifests,
        oldest_snapshot_age_ms=None if oldest is None else max(0, now_ms - oldest),
        max_snapshot_age_ms=int(properties.get("history.expire.max-snapshot-age-ms", DEFAULT_MAX_SNAPSHOT_AGE_MS)),
        measured_at_ms=now_ms,
        by_partition=by_partition,
    )


# -- the score --------------------------------------------------------------------------------
def _per_step(count: int, free: int, step: int, cap: int) -> int:
    return min(cap, max(0, count - free) // step)


def score_parts(health: TableHealth) -> list[ScorePart]:
    """What lowers a table's score, in points; parts that cost nothing are left out."""
    parts: list[ScorePart] = []
    if health.data_files and health.mergeable_small_files:
        share = health.mergeable_small_files / health.data_files
        penalty = round(SMALL_FILES_MAX_PENALTY * share)
        parts.append(ScorePart(
            f"{health.mergeable_small_files} of {health.data_files} data files are small files compaction would "
            f"merge away (below {health.small_file_limit_bytes:,} bytes, {MIN_FILE_SIZE_DEFAULT_RATIO:.0%} of the "
            f"{health.target_file_size_bytes:,}-byte target)", penalty))
    if health.delete_records:
        penalty = round(DELETES_MAX_PENALTY * min(1.0, health.weighted_delete_ratio / DELETES_FULL_PENALTY_RATIO))
        equality = ""
        if health.equality_delete_records:
            equality = (f"; {health.equality_delete_records:,} of them by equality in "
                        f"{health.equality_delete_files} files, each weighing {EQUALITY_DELETE_ROW_WEIGHT}x: "
                        f"weighted ratio {health.weighted_delete_ratio:.2%}")
        parts.append(ScorePart(
            f"{health.delete_records:,} deleted rows in {health.delete_files} delete files against "
            f"{health.records:,} data rows (delete ratio {health.delete_ratio:.2%}{equality}) are applied on "
            "every read",
            penalty))
    penalty = _per_step(health.snapshots, SNAPSHOTS_FREE, SNAPSHOTS_PER_POINT, SNAPSHOTS_MAX_PENALTY)
    if penalty:
        parts.append(ScorePart(
            f"{health.snapshots} snapshots kept (the first {SNAPSHOTS_FREE} are free, then 1 point per "
            f"{SNAPSHOTS_PER_POINT}): expire snapshots", penalty))
    age = health.oldest_snapshot_age_ms
    if age is not None and age > health.max_snapshot_age_ms:
        parts.append(ScorePart(
            f"the oldest snapshot is {age / 3_600_000:.1f} h old, beyond the table's "
            f"{health.max_snapshot_age_ms / 3_600_000:.1f} h expiry age", OLD_SNAPSHOT_PENALTY))
    penalty = _per_step(health.manifests, MANIFESTS_FREE, MANIFESTS_PER_POINT, MANIFESTS_MAX_PENALTY)
    if penalty:
        parts.append(ScorePart(
            f"{health.manifests} manifests to open per scan (the first {MANIFESTS_FREE} are free, then 1 point "
            f"per {MANIFESTS_PER_POINT}): rewrite manifests or compact", penalty))
    return [part for part in parts if part.penalty > 0]


# -- thresholds: when a table needs maintenance ----------------------------------------------------
_THRESHOLDS = {
    # name: (kind, lowest, highest, the figure it is compared with, comparison)
    "min_small_files": ("count", 1, None, "small_files", ">="),
    "min_delete_ratio": ("ratio", 0.0, 1.0, "delete_ratio", ">="),
    "min_snapshots": ("count", 1, None, "snapshots", ">="),
    "max_score": ("score", 0, 100, "score", "<="),
}


def check_threshold(name: str, value: Any) -> int | float:
    """One threshold, coerced from a rendered template if need be, or :class:`LakeConfigError`."""
    kind, lowest, highest, _, _ = _THRESHOLDS[name]
    wanted = {"count": "a whole number", "ratio": "a number between 0 and 1", "score": "a number from 0 to 100"}
    refusal = LakeConfigError(f"{name} must be {wanted[kind]}; got {value!r}.")
    try:
        number = whole_number(value, name) if kind == "count" else coerced_number(value, name)
    except LakeConfigError:
        raise refusal from None
    if kind != "count":
        if not math.isfinite(number):
            raise refusal
        if kind == "score" and float(number).is_integer():
            number = int(number)
    if kind == "ratio" and not 0 < number <= 1:
        raise LakeConfigError(
            f"{name} must be a ratio above 0 and at most 1 (delete records per data record, e.g. 0.05 for 5%); "
            f"got {value!r}."
        )
    if number < lowest or (highest is not None and number > highest):
        span = f"from {lowest} to {highest}" if highest is not None else f"{lowest} or more"
        raise LakeConfigError(f"{name} must be {span}; got {value!r}.")
    return number


def parse_thresholds(values: dict[str, Any], *, keep_strings: bool = False) -> dict[str, Any]:
    """The given thresholds (``None`` means not given), validated; at least one is needed.

    ``keep_strings=True`` leaves strings unchecked: at DAG parse time they may be templates,
    which are checked once rendered.
    """
    unknown = set(values) - set(_THRESHOLDS)
    if unknown:
        raise LakeConfigError(f"Unknown thresholds {sorted(unknown)}; expected {', '.join(_THRESHOLDS)}.")
    given = {k: v for k, v in values.items() if not is_none(v)}
    if not given:
        raise LakeConfigError(
            f"Give at least one threshold ({', '.join(_THRESHOLDS)}): the table counts as needing "
            "maintenance as soon as any given threshold is crossed."
        )
    return {k: v if keep_strings and isinstance(v, str) else check_threshold(k, v) for k, v in given.items()}


@dataclass(frozen=True)
class HealthThresholds:
    """When a table needs maintenance: it does as soon as ANY given threshold is crossed.

    ``min_small_files``: small data files >= n; ``min_delete_ratio``: delete records per data
    record >= r (0 < r <= 1); ``min_snapshots``: snapshots >= k; ``max_score``: score <= s.
    """

    min_small_files: int | None = None
    min_delete_ratio: float | None = None
    min_snapshots: int | None = None
    max_score: float | None = None

    @classmethod
    def parse(cls, **values: Any) -> HealthThresholds:
        """Validated thresholds from (possibly rendered-template) values; at least one is needed."""
        return cls(**parse_thresholds(values))

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}

    def crossed(self, health: TableHealth) -> list[str]:
        """The thresholds ``health`` crosses, each as a sentence (empty: none)."""
        found = []
        for name, limit in self.to_dict().items():
            _, _, _, figure, comparison = _THRESHOLDS[name]
            seen = getattr(health, figure)
            if (seen >= limit) if comparison == ">=" else (seen <= limit):
                found.append(f"{figure} {round(seen, 6)} {comparison} {limit} ({name})")
        return found
