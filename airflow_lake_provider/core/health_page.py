"""The figures of the Lake health page: per table, its health, file sizes before and after its
last maintenance, and what its last maintenance runs did. Pure: no Airflow, no Spark.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from itertools import pairwise
from typing import TYPE_CHECKING, Any

from airflow_lake_provider.core.airflow_run import RUN_PROPERTY_PREFIX
from airflow_lake_provider.core.health import table_health
from airflow_lake_provider.core.maintenance_need import is_maintenance_commit
from airflow_lake_provider.core.planning import table_file_sizes
from airflow_lake_provider.core.snapshots import ancestry, parent_of

if TYPE_CHECKING:
    from pyiceberg.table import Table

# Histogram buckets: powers of two of the target file size, from 1/64 of it to 2x and more.
BUCKET_SHARES = (1 / 64, 1 / 16, 1 / 4, 1 / 2, 3 / 4, 1.5)


@dataclass(frozen=True)
class Histogram:
    """File counts per size bucket; ``labels[i]`` names ``counts[i]``."""

    labels: tuple[str, ...]
    counts: tuple[int, ...]

    @property
    def total(self) -> int:
        return sum(self.counts)


def _size(number: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if number < 1024 or unit == "GiB":
            return f"{number:.0f} {unit}" if unit == "B" or number >= 10 else f"{number:.1f} {unit}"
        number /= 1024
    return f"{number:.0f} GiB"


def size_histogram(sizes: list[int], target: int) -> Histogram:
    """Counts of ``sizes`` per bucket relative to the ``target`` file size."""
    edges = [int(target * share) for share in BUCKET_SHARES]
    labels = [f"< {_size(edges[0])}", *(f"{_size(a)}-{_size(b)}" for a, b in pairwise(edges)), f">= {_size(edges[-1])}"]
    counts = [0] * (len(edges) + 1)
    for size in sizes:
        counts[sum(1 for edge in edges if size >= edge)] += 1
    return Histogram(tuple(labels), tuple(counts))


@dataclass(frozen=True)
class MaintenanceCommit:
    """A commit a maintenance run made, read from the table's history."""

    snapshot_id: int
    timestamp_ms: int
    dag_id: str
    run_id: str
    task_id: str
    operation: str
    removed_data_files: int
    added_data_files: int
    removed_delete_files: int


def maintenance_commits(table: Table, limit: int = 10) -> list[MaintenanceCommit]:
    """The table's last maintenance commits on main, newest first (from ``airflow.*`` summary properties)."""
    found = []
    for snapshot in ancestry(table) if table.current_snapshot() is not None else ():
        summary = snapshot.summary
        if summary is None or not is_maintenance_commit(snapshot):
            continue
        found.append(MaintenanceCommit(
            snapshot_id=snapshot.snapshot_id, timestamp_ms=snapshot.timestamp_ms,
            dag_id=summary.get(f"{RUN_PROPERTY_PREFIX}dag-id", ""),
            run_id=summary.get(f"{RUN_PROPERTY_PREFIX}run-id", ""),
            task_id=summary.get(f"{RUN_PROPERTY_PREFIX}task-id", ""), operation=str(summary.operation.value),
            removed_data_files=int(summary.get("deleted-data-files") or 0),
            added_data_files=int(summary.get("added-data-files") or 0),
            removed_delete_files=int(summary.get("removed-delete-files") or summary.get("removed-position-delete-files")
                                     or 0)))
        if len(found) >= limit:
            break
    return found


def _data_file_sizes(table: Table, snapshot_id: int) -> list[int]:
    files = table.inspect.data_files(snapshot_id=snapshot_id)
    return [int(size) for size in files.column("file_size_in_bytes").to_pylist()]


@dataclass
class TableReport:
    """Everything the page shows for one table (``error``: why it could not be read)."""

    table: str
    lake_conn_id: str
    #: Where the table lives, as the page says it: the connection, or the embedded lake standing in for it.
    lake: str = ""
    score: int | None = None
    reasons: list[str] = field(default_factory=list)
    data_files: int = 0
    small_files: int = 0
    delete_files: int = 0
    snapshots: int = 0
    before: Histogram | None = None
    after: Histogram | None = None
    now: Histogram | None = None
    before_note: str = ""
    commits: list[MaintenanceCommit] = field(default_factory=list)
    runs: list[dict[str, Any]] = field(default_factory=list)
    error: str = ""

    @property
    def state(self) -> str:
        """``unreadable``, ``unhealthy`` (score < 70), ``fair`` (< 90) or ``healthy``."""
        if self.error or self.score is None:
            return "unreadable"
        return "unhealthy" if self.score < 70 else "fair" if self.score < 90 else "healthy"


def table_report(table: Table, *, table_name: str, lake_conn_id: str) -> TableReport:
    """Measure one table from its metadata (PyIceberg only)."""
    health = table_health(table, table_name=table_name)
    report = TableReport(table=table_name, lake_conn_id=lake_conn_id, score=health.score,
                         reasons=[f"-{p.penalty}: {p.reason}" for p in health.score_parts if p.penalty],
                         data_files=health.data_files, small_files=health.small_files,
                         delete_files=health.position_delete_files + health.equality_delete_files,
                         snapshots=health.snapshots)
    target = table_file_sizes(table.properties).target_bytes
    report.commits = maintenance_commits(table)
    current = table.current_snapshot()
    if current is not None:
        report.now = size_histogram(_data_file_sizes(table, current.snapshot_id), target)
    if report.commits:
        # The last maintenance run may have committed more than once (data, then position deletes):
        # "after" is its newest commit, "before" the parent of its oldest.
        last = report.commits[0]
        first = [c for c in report.commits if (c.dag_id, c.run_id) == (last.dag_id, last.run_id)][-1]
        report.after = size_histogram(_data_file_sizes(table, last.snapshot_id), target)
        parent = parent_of(table, table.snapshot_by_id(first.snapshot_id))
        if parent is not None:
            report.before = size_histogram(_data_file_sizes(table, parent.snapshot_id), target)
        else:
            report.before_note = (f"the snapshot before it has been expired; the maintenance removed "
                                  f"{last.removed_data_files} data files and added {last.added_data_files}")
    return report


def order_reports(reports: list[TableReport]) -> list[TableReport]:
    """Unreadable and unhealthy tables first (lowest score first), then by name."""
    rank = {"unreadable": 0, "unhealthy": 1, "fair": 2, "healthy": 3}
    return sorted(reports, key=lambda r: (rank[r.state], r.score if r.score is not None else -1, r.table))


def bar_heights(histogram: Histogram, height: int) -> list[int]:
    """Bar heights in pixels on a square-root scale (a few big files stay visible beside many small ones)."""
    top = max(histogram.counts, default=0)
    return [0 if not c else max(2, round(height * math.sqrt(c) / math.sqrt(top))) for c in histogram.counts]


#: The XCom key of the sentences a step said in its log (its plan, retention decisions, closing
#: line): the operator pushes them, the page shows them under the run.
SUMMARY_XCOM_KEY = "summary"


def table_results(value: Any) -> list[dict[str, Any]]:
    """The per-table results in a step's XCom value: the value itself, or each item of a fleet
    step's list (one result per table)."""
    items = value if isinstance(value, list) else [value]
    return [item for item in items if isinstance(item, dict) and isinstance(item.get("table"), str)]


def describe_step(task_id: str, value: dict[str, Any]) -> str:
    """One short phrase for what a step's XCom result says it did."""
    step = task_id.rsplit(".", 1)[-1]
    if value.get("dry_run"):
        return f"{step}: dry run"
    if "totals" in value:
        totals = value.get("totals") or {}
        return f"{step}: {len(value.get('groups') or [])} groups, {totals.get('files', 0)} files to compact"
    if "rewritten_data_files" in value:
        return f"{step}: {value.get('rewritten_data_files', 0)} -> {value.get('added_data_files', 0)} data files"
    if "orphan_file_count" in value:
        return (f"{step}: {len(value.get('expired_snapshot_ids') or [])} snapshots, "
                f"{value.get('orphan_file_count', 0)} orphan files")
    if "expired_snapshot_ids" in value:
        return f"{step}: expired {len(value.get('expired_snapshot_ids') or [])} snapshots"
    return step


def run_rows(results: list[dict[str, Any]], limit: int = 8) -> list[dict[str, Any]]:
    """The last runs that maintained a table, newest first, from its steps' XCom results.

    ``results``: ``{dag_id, run_id, task_id, when, value}`` rows of one table, with ``said`` (the
    sentences the step logged, its XCom ``summary``) where it left them. Each run lists its
    ``steps`` (one phrase each) and ``said`` (every step's sentences, in order).
    """
    runs: dict[tuple[str, str], dict[str, Any]] = {}
    for row in sorted(results, key=lambda r: r["when"]):
        run = runs.setdefault((row["dag_id"], row["run_id"]), {"dag_id": row["dag_id"], "run_id": row["run_id"],
                                                              "when": row["when"], "steps": [], "said": []})
        run["when"] = max(run["when"], row["when"])
        run["steps"].append(describe_step(row["task_id"], row["value"]))
        run["said"].extend(str(sentence) for sentence in row.get("said") or ())
    return sorted(runs.values(), key=lambda r: r["when"], reverse=True)[:limit]
