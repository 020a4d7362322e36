"""What every step takes and returns: one typed contract per step, read here and nowhere else.

Each value that crosses a seam (Airflow task -> Spark job, Spark job -> task, task -> XCom ->
next task) is one of these frozen dataclasses. The operator builds a step's job arguments (and
:meth:`Contract.validate` refuses bad ones before any JVM starts), the PySpark job reads the same
class with :meth:`Contract.from_json`, its result comes back as a class, and the operator returns
it to XCom as plain JSON with :meth:`Contract.to_json`. Defaults are the field defaults: written
once. Older XComs still read: unknown keys are ignored and missing ones take their default.

The base class lives in ``core/contract_base.py`` and the Airflow run every job names in
``core/airflow_run.py``, below ``core/quarantine.py`` (whose manifest is a contract too), so this
module imports the quarantine's checks and nothing imports back; ``Contract`` and ``AirflowRun``
still import from here.

Shipped to the Spark driver with the jobs: pure Python, no Airflow, no Spark.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from airflow_lake_provider.core import step_names as names
from airflow_lake_provider.core.airflow_run import AirflowRun
from airflow_lake_provider.core.arrow_rewrite import REWRITERS
from airflow_lake_provider.core.coercion import whole_number
from airflow_lake_provider.core.contract_base import Contract
from airflow_lake_provider.core.quarantine import DEFAULT_QUARANTINE_DAYS, checked_quarantine_days, run_reference
from airflow_lake_provider.exceptions import LakeConfigError

if TYPE_CHECKING:  # typing_extensions is there for the type checker only: the Spark driver may not have it
    from typing_extensions import Self


# == shared by the steps that commit ==

@dataclasses.dataclass(frozen=True, kw_only=True)
class CommitRetry(Contract):
    """The two retry fields of every job that commits beside other writers (flat keys in its args).

    A commit refused because another writer changed the same files is planned again from the new
    snapshot, at most ``max_attempts`` times, waiting ``retry_backoff_seconds`` before the first
    retry, doubled for each further one. The operators' ``max_commit_attempts`` and
    ``commit_retry_backoff_seconds`` default to these fields (the messages name those parameters).
    """

    most_attempts: ClassVar[int] = 10
    longest_backoff_seconds: ClassVar[float] = 300.0

    max_attempts: int = 3
    retry_backoff_seconds: float = 2.0

    def validate(self) -> Self:
        attempts, backoff = self.max_attempts, self.retry_backoff_seconds
        if isinstance(attempts, bool) or not isinstance(attempts, int) or not 1 <= attempts <= self.most_attempts:
            raise LakeConfigError(
                f"max_commit_attempts must be a whole number from 1 to {self.most_attempts}; got {attempts!r}.")
        if isinstance(backoff, bool) or not isinstance(backoff, (int, float)) \
                or not 0 <= backoff <= self.longest_backoff_seconds:
            raise LakeConfigError(f"commit_retry_backoff_seconds must be a number of seconds from 0 to "
                                  f"{self.longest_backoff_seconds:g}; got {backoff!r}.")
        return self


DEFAULT_COMMIT_RETRY = CommitRetry()


# == plan ==
# (the plan operator's XCom, PlanResult: made by core.planning, read by the rewrite)


@dataclasses.dataclass(frozen=True)
class DataFileInfo:
    """One live data file as the planner sees it (what Iceberg's ``FileScanTask`` offers).

    ``delete_file_paths`` are all delete files that apply to the file (they count towards
    ``delete-file-threshold``); ``delete_record_count`` is the summed row count of the
    *file-scoped* ones only (position deletes that reference just this file, or deletion
    vectors), because that is all Iceberg counts for ``delete-ratio-threshold``.
    """

    path: str
    spec_id: int
    partition: dict[str, Any]
    size_bytes: int
    record_count: int
    delete_file_paths: tuple[str, ...] = ()
    delete_record_count: int = 0

    def to_detail(self, spec_id: int, partition: Mapping[str, Any]) -> dict[str, Any]:
        """The file as one of its group's ``file_details``: spec and partition only where they differ
        from the group's, deletes only where some apply."""
        item: dict[str, Any] = {"path": self.path, "size_bytes": self.size_bytes, "record_count": self.record_count}
        if self.spec_id != spec_id or self.partition != partition:
            item["spec_id"], item["partition"] = self.spec_id, self.partition
        if self.delete_file_paths:
            item["delete_file_paths"] = list(self.delete_file_paths)
            item["delete_record_count"] = self.delete_record_count
        return item

    @classmethod
    def from_detail(cls, item: Mapping[str, Any], spec_id: int, partition: Mapping[str, Any]) -> DataFileInfo:
        """Inverse of :meth:`to_detail` for a file of a group of ``spec_id`` and ``partition``."""
        return cls(
            path=item["path"],
            spec_id=int(item.get("spec_id", spec_id)),
            partition=dict(item.get("partition", partition)),
            size_bytes=int(item.get("size_bytes", 0)),
            record_count=int(item.get("record_count", 0)),
            delete_file_paths=tuple(item.get("delete_file_paths", ())),
            delete_record_count=int(item.get("delete_record_count", 0)),
        )


@dataclasses.dataclass(frozen=True)
class PlanGroup(Contract):
    """One file group of a plan: Iceberg rewrites it as a unit (one Spark job stage, one commit group).

    ``spec_id``/``partition`` name the group's partition in the table's current spec (files of
    older specs sit under the current spec's all-null partition, like in Iceberg); each file keeps
    its own spec and partition. ``expected_output_files`` is stored because it depends on the
    options the plan was made with. ``file_details`` (the files, in scan order) are held while
    planning and kept only when the plan was made with ``include_file_paths``; ``file_paths`` is
    their paths. Both are absent from the JSON without them, not null; a JSON with ``file_paths``
    but no ``file_details`` reads as files of size 0.
    """

    what: ClassVar[str] = "plan group"

    spec_id: int
    partition: dict[str, Any] = dataclasses.field(default_factory=dict)
    files: int = 0
    bytes: int = 0
    delete_files: int = 0
    expected_output_files: int = 1
    file_paths: tuple[str, ...] | None = dataclasses.field(init=False, default=None)
    file_details: tuple[DataFileInfo, ...] | None = None

    def __post_init__(self) -> None:
        if self.file_details is not None:
            object.__setattr__(self, "file_paths", tuple(f.path for f in self.file_details))

    @classmethod
    def of(cls, spec_id: int, partition: Mapping[str, Any], files: Sequence[DataFileInfo],
           expected_output_files: int = 1) -> PlanGroup:
        """The group of ``files`` (in scan order), its sums counted from them."""
        return cls(spec_id=spec_id, partition=dict(partition), files=len(files),
                   bytes=sum(f.size_bytes for f in files),
                   delete_files=len({p for f in files for p in f.delete_file_paths}),
                   expected_output_files=expected_output_files, file_details=tuple(files))

    @property
    def delete_file_paths(self) -> frozenset[str]:
        """The distinct delete files touching the group's files (known only with ``file_details``)."""
        return frozenset(p for f in self.file_details or () for p in f.delete_file_paths)

    def without_files(self) -> PlanGroup:
        """The group's summary: an XCom for a table of a million files should not carry a million paths."""
        return self if self.file_details is None else self.replace(file_details=None)

    def to_json(self) -> dict[str, Any]:
        data = super().to_json()
        if self.file_details is None:
            del data["file_paths"], data["file_details"]
        else:
            data["file_details"] = [f.to_detail(self.spec_id, self.partition) for f in self.file_details]
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | Self | None) -> Self:
        if isinstance(data, Mapping) and "spec_id" in data:
            details = data.get("file_details")
            if details is None and data.get("file_paths") is not None:
                details = [{"path": p} for p in data["file_paths"]]
            if details is not None:
                spec_id, partition = int(data["spec_id"]), dict(data.get("partition") or {})
                data = {**data, "file_details": tuple(
                    item if isinstance(item, DataFileInfo) else DataFileInfo.from_detail(item, spec_id, partition)
                    for item in details)}
        return super().from_json(data)


@dataclasses.dataclass(frozen=True)
class PlanTotals(Contract):
    """The plan's sums: ``delete_files`` counts distinct delete files (one may touch several groups)."""

    what: ClassVar[str] = "plan totals"

    groups: int = 0
    files: int = 0
    bytes: int = 0
    delete_files: int = 0
    partitions: int = 0


@dataclasses.dataclass(frozen=True)
class PlanBudget(Contract):
    """The per-run budget the plan was cut to (not Iceberg options): ``None`` is no limit."""

    what: ClassVar[str] = "plan budget"

    max_files: int | None = None
    max_bytes: int | None = None


@dataclasses.dataclass(frozen=True)
class PlanScope(Contract):
    """Which filters limited the plan: the run's data interval (``scope``) and ``partition_filter``."""

    what: ClassVar[str] = "plan scope"

    interval_filter: str | None = None
    partition_filter: str | None = None


@dataclasses.dataclass(frozen=True)
class PlanResult(Contract):
    """The plan: groups to rewrite at one snapshot of one table, one model from planner to rewrite.

    The planner makes it (``core.planning.plan_rewrite`` and ``plan_table``; the Spark planning job
    through ``plan_document``), the plan operator returns it as its XCom ``return_value``, the
    rewrite reads it. ``options`` is the Iceberg ``rewrite_data_files`` option map the plan was
    made with, every threshold spelled out, so the rewrite runs with exactly the plan's thresholds
    (``RewriteOptions.from_iceberg_options`` reads it back). ``engine`` and ``scope`` are set by
    the operator.
    """

    what: ClassVar[str] = names.PLAN

    table: str = ""
    snapshot_id: int | None = None
    groups: tuple[PlanGroup, ...] = ()
    totals: PlanTotals = PlanTotals()
    expected_output_files: int = 0
    options: dict[str, str] = dataclasses.field(default_factory=dict)
    budget: PlanBudget = PlanBudget()
    skipped_by_budget: int = 0
    engine: str | None = None
    scope: PlanScope | None = None

    @property
    def is_empty(self) -> bool:
        return not self.groups

    def without_files(self) -> PlanResult:
        """The plan with its groups' summaries only (:meth:`PlanGroup.without_files`)."""
        return self.replace(groups=tuple(g.without_files() for g in self.groups))


# == spark plan job ==
# (the Spark plan job's arguments and result)


@dataclasses.dataclass(frozen=True)
class PartitionPredicates(Contract):
    """Spark SQL over ``spec_id`` and ``part`` (``core.partition_sql``): files the filter may
    select (``inclusive``), and partitions whose rows it selects whole (``strict``)."""

    what: ClassVar[str] = "partition predicates"

    inclusive: str = "true"
    strict: str = "true"


@dataclasses.dataclass(frozen=True)
class SparkPlanJobArgs(Contract):
    """What the ``plan`` Spark job plans: the snapshot the operator resolved (both engines plan the
    same one), the Iceberg option map of ``RewriteOptions`` and the budget, and the filter as
    predicates (``None``: the whole table)."""

    what: ClassVar[str] = "Spark plan job"

    table: str
    snapshot_id: int
    options: dict[str, str]
    max_files: int | None = None
    max_bytes: int | None = None
    include_files: bool = False
    predicates: PartitionPredicates | None = None


@dataclasses.dataclass(frozen=True)
class SparkPlanJobResult(Contract):
    """The Spark plan job's answer: the plan, or how many files sit in partitions the filter only
    partly selects (``unaligned_files``; then only PyIceberg's column metrics can plan, and
    ``plan`` is ``None``)."""

    what: ClassVar[str] = "Spark plan job result"

    plan: PlanResult | None = None
    unaligned_files: int = 0


# == rewrite ==
# (RewriteJobArgs, RewriteResult)

#: The rewrite strategies of Iceberg's ``rewrite_data_files``.
STRATEGIES = ("binpack", "sort", "zorder")
_ORDER_TERM = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)(?:\s+(ASC|DESC))?(?:\s+NULLS\s+(FIRST|LAST))?\s*$", re.I)


def parse_sort_order(text: str | None) -> list[tuple[str, str, str]]:
    """``"col [ASC|DESC] [NULLS FIRST|LAST], ..."`` as ``(column, direction, nulls)`` terms.

    Pure, so a bad sort order fails in :meth:`RewriteJobArgs.validate` before any JVM starts; the
    job builds Iceberg's ``SortOrder`` from the same terms. Nulls default the way Spark's do:
    first when ascending, last when descending. Empty: the table's own sort order.
    """
    if not text or not text.strip():
        return []
    terms = []
    for part in text.split(","):
        match = _ORDER_TERM.match(part)
        if not match:
            raise ValueError(
                f"Cannot read sort order term {part.strip()!r}: write 'column [ASC|DESC] [NULLS FIRST|LAST]'."
            )
        direction = (match.group(2) or "ASC").upper()
        nulls = (match.group(3) or ("FIRST" if direction == "ASC" else "LAST")).upper()
        terms.append((match.group(1), direction, nulls))
    return terms


@dataclasses.dataclass(frozen=True)
class PlannedPartition(Contract):
    """One partition the rewrite is limited to (a planned group's ``spec_id`` and ``partition``)."""

    what: ClassVar[str] = "planned partition"

    spec_id: int
    partition: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True, kw_only=True)
class RewriteJobArgs(CommitRetry):
    """What the ``rewrite`` Spark job does: compact ``partitions`` (``None``: the whole table).

    ``options`` are Iceberg's ``rewrite_data_files`` options as the operator settled them
    (the plan's thresholds with the rewrite's overrides, ``output-spec-id`` made explicit); the job
    adds ``use-starting-sequence-number=false`` unless they set it. ``snapshot_properties`` go on
    every commit, so a retried task finds its own work. A conflicting commit is tried up to
    ``max_attempts`` times, waiting ``retry_backoff_seconds`` before the first retry, doubled for
    each further one. The operator's parameters take their defaults from these fields.
    """

    what: ClassVar[str] = names.REWRITE

    table: str
    planned_snapshot_id: int | None = None
    partitions: tuple[PlannedPartition, ...] | None = None
    strategy: str = "binpack"
    sort_order: str | None = None
    zorder_columns: tuple[str, ...] = ()
    options: dict[str, str] = dataclasses.field(default_factory=dict)
    #: Defaults of the settings the rewrite step passes on as they are: the step's settings take them from here.
    rewrite_position_deletes: bool = True
    #: Options of ``rewritePositionDeletes``, limited to the same partitions as the data rewrite.
    position_delete_options: dict[str, str] = dataclasses.field(default_factory=lambda: {"rewrite-all": "true"})
    #: After the data rewrite, remove every delete file no live data file needs, from metadata alone
    #: (jobs/dangling_deletes.py).
    drop_dangling_deletes: bool = True
    rewrite_manifests: bool = False
    snapshot_properties: dict[str, str] = dataclasses.field(default_factory=dict)
    #: Who reads and writes the Parquet of a bin-pack rewrite (``core/arrow_rewrite.py``): ``auto``
    #: (Arrow where the result is provably the same, else Iceberg's Spark action), ``iceberg`` or ``arrow``.
    rewriter: str = "auto"
    #: The worker's expectation that the Arrow rewriter will run (the job chooses again, on every attempt):
    #: then a driver started by the task starts Spark only if the job uses it (``core/job_registry.py``'s
    #: ``rewrite_launch``).
    arrow_expected: bool = False

    def __post_init__(self) -> None:
        # Partitions given as plain dicts (a caller building the args by hand) become contracts too.
        if self.partitions is not None:
            object.__setattr__(self, "partitions", tuple(PlannedPartition.from_json(p) for p in self.partitions))

    @property
    def output_spec_id(self) -> int | None:
        value = self.options.get("output-spec-id")
        return None if value is None else int(value)

    def validate(self) -> RewriteJobArgs:
        """Refuse what Spark would fail on later: names in messages are the operator's parameters
        (Iceberg's options as ``options[...]``)."""
        if self.strategy not in STRATEGIES:
            raise LakeConfigError(f"strategy must be one of {', '.join(STRATEGIES)}; got {self.strategy!r}.")
        if self.rewriter not in REWRITERS:
            raise LakeConfigError(f"rewriter must be one of {', '.join(REWRITERS)}; got {self.rewriter!r}.")
        if self.rewriter == "arrow" and self.strategy != "binpack":
            raise LakeConfigError(f"rewriter 'arrow' only bin-packs; strategy {self.strategy!r} needs "
                                  "rewriter='auto' or 'iceberg'.")
        if self.strategy == "zorder" and not self.zorder_columns:
            raise LakeConfigError("strategy 'zorder' needs zorder_columns, e.g. ['event_id', 'amount'].")
        if self.strategy == "sort":
            try:
                parse_sort_order(self.sort_order)
            except ValueError as error:
                raise LakeConfigError(f"sort_order {self.sort_order!r}: {error}") from None
        for key in ("partial-progress.max-commits", "max-concurrent-file-group-rewrites"):
            if key in self.options:
                whole_number(self.options[key], f"options[{key!r}]", minimum=1)
        CommitRetry.validate(self)
        return self

    def check_columns(self, table_columns: Sequence[str]) -> None:
        """Refuse a sort order or z-order naming columns the table does not have."""
        named = ([column for column, _, _ in parse_sort_order(self.sort_order)] if self.strategy == "sort"
                 else list(self.zorder_columns) if self.strategy == "zorder" else [])
        unknown = [column for column in named if column not in table_columns]
        if unknown:
            parameter = "sort_order" if self.strategy == "sort" else "zorder_columns"
            raise LakeConfigError(f"{parameter} names columns the table does not have: {', '.join(unknown)}.")


@dataclasses.dataclass(frozen=True)
class RewriteResult(Contract):
    """The rewrite operator's XCom ``return_value``: what the rewrite committed, and with what.

    ``committed_snapshot_ids`` (oldest first) are this run's own commits only, never another
    writer's. ``groups`` are the committed file groups; ``failed_groups`` those not committed
    (each with a ``reason``), which fail the task unless ``fail_on_dropped_groups=False``.
    ``attempts`` records every commit attempt, conflicts included. Made by the job, or by the
    operator through :meth:`nothing_done` (dry run, empty plan) and :meth:`recovered` (an earlier
    try of the same task already committed).
    """

    what: ClassVar[str] = "rewrite result"

    table: str
    snapshot_id_before: int | None = None
    committed_snapshot_ids: tuple[int, ...] = ()
    snapshot_id_after: int | None = None
    rewritten_data_files: int = 0
    added_data_files: int = 0
    rewritten_bytes: int = 0
    removed_delete_files: int = 0
    #: Iceberg's commit drops equality deletes older than every live data file (table-wide).
    removed_equality_delete_files: int = 0
    groups: tuple[dict[str, Any], ...] = ()
    failed_groups: tuple[dict[str, Any], ...] = ()
    attempts: tuple[dict[str, Any], ...] = ()
    position_deletes: dict[str, Any] | None = None
    #: With ``drop_dangling_deletes``: the delete files removed because no live data file needed them.
    dangling_deletes: dict[str, Any] | None = None
    manifests: dict[str, int] | None = None
    #: Who rewrote the data files: ``arrow`` or ``iceberg`` (Iceberg's Spark action); ``None`` when nothing ran.
    rewriter: str | None = None
    #: Where the Parquet was read and written: ``driver`` (the Arrow rewriter on a local master) or
    #: ``executors`` (Iceberg's Spark action, or the Arrow rewriter on a cluster); ``None`` when nothing ran.
    rewritten_by: str | None = None
    #: Why ``rewriter='auto'`` took Iceberg's Spark action (``core/arrow_rewrite.py``'s reason).
    rewriter_note: str | None = None
    strategy: str = "binpack"
    planned_snapshot_id: int | None = None
    output_spec_id: int | None = None
    options: dict[str, str] = dataclasses.field(default_factory=dict)
    dry_run: bool = False
    recovered_from_earlier_try: bool = False

    @classmethod
    def of(cls, args: RewriteJobArgs, **outcome: Any) -> RewriteResult:
        """The result of running ``args``: what it was asked (table, plan, strategy, options) and ``outcome``."""
        return cls(table=args.table, planned_snapshot_id=args.planned_snapshot_id, strategy=args.strategy,
                   options=dict(args.options), output_spec_id=args.output_spec_id, **outcome)

    @classmethod
    def nothing_done(cls, args: RewriteJobArgs, snapshot_id: int | None, *, dry_run: bool) -> RewriteResult:
        """A dry run, or an empty plan: the table stays at ``snapshot_id``."""
        return cls.of(args, snapshot_id_before=snapshot_id, snapshot_id_after=snapshot_id, dry_run=dry_run)

    @classmethod
    def recovered(cls, args: RewriteJobArgs, snapshot_id_before: int | None,
                  commits: Sequence[tuple[int, Mapping[str, str]]]) -> RewriteResult:
        """An earlier try's commits (``(snapshot id, summary with "operation")``, oldest first), counted
        from their snapshot summaries as the job would have reported them."""
        def total(key: str, summaries: Sequence[Mapping[str, str]]) -> int:
            return sum(int(summary.get(key) or 0) for summary in summaries)

        summaries = [summary for _, summary in commits]
        replaces = [summary for summary in summaries if summary.get("operation") == "replace"]
        return cls.of(
            args,
            snapshot_id_before=snapshot_id_before,
            committed_snapshot_ids=tuple(snapshot_id for snapshot_id, _ in commits),
            snapshot_id_after=commits[-1][0] if commits else snapshot_id_before,
            rewritten_data_files=total("deleted-data-files", replaces),
            added_data_files=total("added-data-files", replaces),
            rewritten_bytes=total("removed-files-size", [s for s in replaces if int(s.get("deleted-data-files") or 0)]),
            **removed_delete_files(summaries),
            recovered_from_earlier_try=True,
        )


def removed_delete_files(summaries: Sequence[Mapping[str, str]]) -> dict[str, int]:
    """A rewrite's delete-file counts from its commits' snapshot summaries (each with its
    ``operation``): what left the table, not what each Iceberg action reports (its data rewrite
    reports only some of the delete files its commit drops: 8 of 184 on a Flink upsert table)."""
    def total(key: str, among: Sequence[Mapping[str, str]]) -> int:
        return sum(int(summary.get(key) or 0) for summary in among)

    replaces = [summary for summary in summaries if summary.get("operation") == "replace"]
    return {"removed_delete_files": total("removed-delete-files", replaces) - total("added-delete-files", replaces),
            "removed_equality_delete_files": total("removed-equality-delete-files", summaries)}


# == expire ==
# (ExpireJobArgs, ExpiryOutcome, RetentionReport, ExpireResult; CommitRetry is shared, above)


def _check_snapshot_ids(what: str, **lists: Any) -> None:
    for name, ids in lists.items():
        if any(isinstance(i, bool) or not isinstance(i, int) for i in ids):
            raise LakeConfigError(f"The {what}'s {name} must be snapshot IDs (integers); got {list(ids)!r}.")


@dataclasses.dataclass(frozen=True, kw_only=True)
class ExpireJobArgs(Contract):
    """What the expire job is told: exactly which snapshots to expire, decided in the Airflow worker.

    ``refs`` is every ref's snapshot when the IDs were decided: if a tag or branch was created,
    moved or dropped since, the job refuses (the decision is stale). ``removed_refs`` are the refs
    past their ``max-ref-age-ms``, which Iceberg removes in the same commit.
    """

    what = "expire job"

    table: str
    snapshot_ids: list[int] = dataclasses.field(default_factory=list)
    protected_ids: list[int] = dataclasses.field(default_factory=list)
    refs: dict[str, int] | None = None
    removed_refs: list[str] = dataclasses.field(default_factory=list)

    def validate(self) -> Self:
        if not self.table:
            raise LakeConfigError(f"The {self.what} needs a table.")
        _check_snapshot_ids(self.what, snapshot_ids=self.snapshot_ids, protected_ids=self.protected_ids)
        return self


#: The kinds of file an expiry deletes, as Iceberg's ``ExpireSnapshots`` result counts them.
DELETED_FILE_KINDS = ("data_files", "position_delete_files", "equality_delete_files", "manifests", "manifest_lists",
                      "statistics_files")


@dataclasses.dataclass(frozen=True, kw_only=True)
class ExpiryOutcome(Contract):
    """What Spark did to the snapshots (the job side of the expire and clean results).

    In a dry run, or when there was nothing to do, the ``would_*`` fields say what a real run
    would remove and nothing was expired.
    """

    what = "expiry outcome"

    expired_snapshot_ids: list[int] = dataclasses.field(default_factory=list)
    already_gone_snapshot_ids: list[int] = dataclasses.field(default_factory=list)  # expired meanwhile by another
    removed_refs: list[str] = dataclasses.field(default_factory=list)
    would_expire_snapshot_ids: list[int] = dataclasses.field(default_factory=list)
    would_remove_refs: list[str] = dataclasses.field(default_factory=list)
    # Files deleted, by kind (DELETED_FILE_KINDS; {} when no expiry ran).
    deleted_files: dict[str, int] = dataclasses.field(default_factory=dict)
    snapshot_id_after: int | None = None
    # Who expired (None: nothing was): "pyiceberg" in the Airflow worker; in the job, "driver" (Iceberg's
    # ExpireSnapshots in the driver's JVM, no Spark application) or "spark_action" (Iceberg's Spark action).
    expired_by: str | None = None

    @property
    def deleted_file_count(self) -> int:
        return sum(self.deleted_files.values())


@dataclasses.dataclass(frozen=True, kw_only=True)
class RetentionReport(Contract):
    """The worker's decision, as the expire and clean results report it: the rule behind every snapshot."""

    what = "retention report"

    table: str
    snapshot_id: int | None = None  # the current snapshot the decision was taken on
    retention_source: str = "table"  # "table": the table's own retention; "override": override_table_retention
    kept: dict[str, str] = dataclasses.field(default_factory=dict)  # snapshot ID -> "kept: <rule>"
    removed: dict[str, str] = dataclasses.field(default_factory=dict)  # snapshot ID -> "removed: <rule>"
    removed_ref_reasons: dict[str, str] = dataclasses.field(default_factory=dict)  # ref -> why it goes
    dry_run: bool = False


@dataclasses.dataclass(frozen=True, kw_only=True)
class ExpireResult(ExpiryOutcome, RetentionReport):
    """The expire step's XCom: the decision, what Spark did, and the settings it applied to main.

    ``retain_last`` / ``max_snapshot_age_ms`` are the override's values (``None``: the table's own);
    the clean step reads them to state what the two steps together keep.
    """

    what = "expire result"

    retain_last: int | None = None
    max_snapshot_age_ms: int | None = None


# == clean ==
# (CleanJobArgs, CleanJobResult, CleanResult; the quarantine's restore below)


@dataclasses.dataclass(frozen=True, kw_only=True)
class CleanJobArgs(ExpireJobArgs):
    """The clean job: the expiry the policy resolved (as for expire), then the orphan files.

    Orphans are files under the table location no snapshot, tag or branch references;
    those modified before ``orphan_older_than_ms`` (epoch ms) are deleted, ``None`` leaves them all.
    ``dry_run``: expire nothing and list the orphans with a delete function that deletes nothing.
    """

    what = "clean job"

    orphan_older_than_ms: int | None = None
    dry_run: bool = False
    # The namespaces whose tables are checked for references to this table's files (None: all).
    reference_namespaces: list[str] | None = None
    # Orphans are moved to quarantine and purged after this many days; 0 deletes them at once.
    quarantine_days: float = DEFAULT_QUARANTINE_DAYS
    # The root of the quarantine (None: beside the table, see core.quarantine).
    quarantine_location: str | None = None
    # The Airflow run the manifest names (None: a job run by hand).
    airflow_run: AirflowRun | None = None
    # With an approval gate: only these orphans may be taken (None: no gate, every orphan found).
    approved_orphan_files: list[str] | None = None

    def validate(self) -> Self:
        super().validate()
        checked_quarantine_days(self.quarantine_days)
        return self


@dataclasses.dataclass(frozen=True, kw_only=True)
class CleanJobResult(ExpiryOutcome):
    """What the clean job did: the expiry outcome, and the orphan files removed (or, dry, found)."""

    what = "clean job result"

    dry_run: bool = False
    orphan_files: list[str] = dataclasses.field(default_factory=list)  # the first ORPHAN_FILES_LISTED
    orphan_file_count: int = 0
    # Candidates the orphan scan found but something still references: path -> why (first ORPHAN_FILES_LISTED).
    kept_referenced: dict[str, str] = dataclasses.field(default_factory=dict)
    kept_referenced_count: int = 0
    # The run key of this run's quarantine (None: nothing quarantined, or quarantine_days=0) and its manifest.
    quarantine_run: str | None = None
    quarantine_manifest: str | None = None
    quarantined_file_count: int = 0
    # Earlier quarantine runs past quarantine_days, deleted at the start (dry run: would be deleted).
    purged_runs: list[str] = dataclasses.field(default_factory=list)
    purged_file_count: int = 0
    # Who listed the orphans (None: no listing ran): "driver" (Iceberg's listing and references read in the
    # job's driver JVM, no Spark application) or "spark_action" (Iceberg's DeleteOrphanFiles action).
    orphans_listed_by: str | None = None

    ORPHAN_FILES_LISTED: ClassVar[int] = 1000


@dataclasses.dataclass(frozen=True, kw_only=True)
class CleanResult(CleanJobResult, RetentionReport):
    """The clean step's XCom: the policy's decision, what Spark removed, and what expire and clean
    together keep (``effective_retention``: ``{snapshots, files, statement}``, see
    :func:`airflow_lake_provider.core.retention_settings.effective_retention`)."""

    what = "clean result"

    policy: str  # as the clean step was given it (e.g. KEEP_LATEST_COMMITS)
    retained: int
    planned_removals: list[int] = dataclasses.field(default_factory=list)  # the snapshot IDs the policy resolved
    orphan_older_than_ms: int | None = None  # orphan cutoff (epoch ms); None: orphan removal off
    effective_retention: dict[str, str] = dataclasses.field(default_factory=dict)
    quarantine_days: float = DEFAULT_QUARANTINE_DAYS  # how long orphans stay in quarantine (0: deleted at once)


# == restore from quarantine ==
# (RestoreQuarantineJobArgs, RestoreQuarantineResult)


@dataclasses.dataclass(frozen=True, kw_only=True)
class RestoreQuarantineJobArgs(Contract):
    """The restore job: move one quarantine run's files back to their original paths.

    ``quarantine_run``: the run key (the clean result's ``quarantine_run``) or its manifest's
    location (``quarantine_manifest``); ``None`` lists the table's runs and restores nothing.
    ``quarantine_location``: the root the clean step was given (``None``: beside the table);
    not needed when ``quarantine_run`` is a manifest location.
    """

    what = "restore quarantine job"

    table: str
    quarantine_run: str | None = None
    quarantine_location: str | None = None

    def validate(self) -> Self:
        if not self.table:
            raise LakeConfigError(f"The {self.what} needs a table.")
        if self.quarantine_run is not None:
            run_reference(self.quarantine_run)
        return self


@dataclasses.dataclass(frozen=True, kw_only=True)
class RestoreQuarantineResult(Contract):
    """The restore's XCom: what went back, and what stayed where it was and why (never overwritten).

    With no run given: ``runs`` lists the table's quarantine runs (run key -> its summary:
    ``moved_at``, ``files``, ``manifest``, ``airflow_run``) and nothing is restored.
    """

    what = "restore quarantine result"

    table: str
    quarantine_run: str | None = None
    quarantine_manifest: str | None = None
    restored: list[str] = dataclasses.field(default_factory=list)  # original paths, the first RESTORED_LISTED
    restored_count: int = 0
    skipped: dict[str, str] = dataclasses.field(default_factory=dict)  # original path -> why not moved (the first 1000)
    skipped_count: int = 0
    runs: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)

    RESTORED_LISTED: ClassVar[int] = 1000


# == convert equality deletes ==
# (ConvertEqualityDeletesJobArgs, ConvertEqualityDeletesResult)


@dataclasses.dataclass(frozen=True, kw_only=True)
class DeleteFileCommitJobArgs(CommitRetry):
    """A job that swaps delete files in one commit: the table, the run's snapshot properties (so a
    retried task finds its commit), dry run, and the commit retry (:class:`CommitRetry`)."""

    table: str
    dry_run: bool = False
    snapshot_properties: dict[str, str] = dataclasses.field(default_factory=dict)

    def validate(self) -> Self:
        if not self.table:
            raise LakeConfigError(f"The {self.what} needs a table.")
        return super().validate()


@dataclasses.dataclass(frozen=True, kw_only=True)
class ConvertEqualityDeletesJobArgs(DeleteFileCommitJobArgs):
    """The conversion job (:class:`DeleteFileCommitJobArgs`)."""

    what = "convert equality deletes job"


ADDED_POSITION_DELETE_FILES, ADDED_DELETION_VECTORS = "added_position_delete_files", "added_deletion_vectors"


@dataclasses.dataclass(frozen=True, kw_only=True)
class ConvertEqualityDeletesResult(Contract):
    """The conversion's XCom, the same whether Spark converted, nothing needed converting, or an
    earlier try's commit was found.

    ``added_delete_files`` travels as ``added_position_delete_files`` (format v2) or
    ``added_deletion_vectors`` (v3), as the files it counts are called.
    """

    what = "convert equality deletes result"

    table: str
    format_version: int
    dry_run: bool = False
    snapshot_id_before: int | None = None
    converted_snapshot_id: int | None = None  # the snapshot whose equality deletes were converted
    committed_snapshot_ids: list[int] = dataclasses.field(default_factory=list)  # this task's commits only
    snapshot_id_after: int | None = None
    converted_equality_delete_files: int = 0
    equality_delete_records: int = 0  # deleted keys
    affected_data_files: int = 0
    added_delete_files: int = 0  # in a dry run: what the commit would add
    replaced_delete_files: int = 0  # file-scoped position deletes or DVs the new ones replace
    deleted_rows: int = 0
    verified: dict[str, int] | None = None  # {visible_rows_in_affected_files, after}
    attempts: list[dict[str, Any]] = dataclasses.field(default_factory=list)  # {stage, attempt, outcome, ...}
    seconds: dict[str, float] = dataclasses.field(default_factory=dict)  # per stage, summed over attempts
    recovered_from_earlier_try: bool = False

    @property
    def added_key(self) -> str:
        return ADDED_DELETION_VECTORS if self.format_version >= 3 else ADDED_POSITION_DELETE_FILES

    @classmethod
    def unchanged(cls, table: str, format_version: int, snapshot_id: int | None, *,
                  dry_run: bool = False) -> ConvertEqualityDeletesResult:
        """Nothing converted: the table stays at ``snapshot_id``."""
        return cls(table=table, format_version=format_version, dry_run=dry_run, snapshot_id_before=snapshot_id,
                   converted_snapshot_id=snapshot_id, snapshot_id_after=snapshot_id)

    def to_json(self) -> dict[str, Any]:
        data = super().to_json()
        data[self.added_key] = data.pop("added_delete_files")
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | Self | None) -> Self:
        if isinstance(data, Mapping):
            data = dict(data)
            for key in (ADDED_POSITION_DELETE_FILES, ADDED_DELETION_VECTORS):
                if key in data:
                    data.setdefault("added_delete_files", data.pop(key))
        return super().from_json(data)


# == repair_deletion_vectors: a format v3 table's duplicated and dangling DVs ==
@dataclasses.dataclass(frozen=True, kw_only=True)
class RepairDeletionVectorsJobArgs(DeleteFileCommitJobArgs):
    """The repair job (:class:`DeleteFileCommitJobArgs`)."""

    what = "repair deletion vectors job"


@dataclasses.dataclass(frozen=True, kw_only=True)
class RepairDeletionVectorsResult(Contract):
    """The repair's XCom. ``found``: the problems of the snapshot read (``duplicated_data_files``: data
    file -> its DVs as ``puffin@offset``; ``dangling_deletion_vectors``). In a dry run the counts say
    what the commit would do."""

    what = "repair deletion vectors result"

    table: str
    format_version: int
    dry_run: bool = False
    snapshot_id_before: int | None = None
    repaired_snapshot_id: int | None = None  # the snapshot whose DVs were read
    committed_snapshot_ids: list[int] = dataclasses.field(default_factory=list)  # this task's commits only
    snapshot_id_after: int | None = None
    found: dict[str, Any] = dataclasses.field(default_factory=dict)
    repaired_data_files: int = 0  # data files whose DVs were merged into one
    merged_deletion_vectors: int = 0  # the DVs merged (removed), of those files
    added_deletion_vectors: int = 0  # one per repaired data file
    dropped_dangling_deletion_vectors: int = 0
    deleted_rows: int = 0  # rows the merged DVs delete: every row any of the old ones deleted
    attempts: list[dict[str, Any]] = dataclasses.field(default_factory=list)  # {stage, attempt, outcome, ...}
    recovered_from_earlier_try: bool = False

    @classmethod
    def unchanged(cls, table: str, format_version: int, snapshot_id: int | None, *,
                  dry_run: bool = False) -> RepairDeletionVectorsResult:
        """Nothing repaired: the table stays at ``snapshot_id``."""
        return cls(table=table, format_version=format_version, dry_run=dry_run, snapshot_id_before=snapshot_id,
                   repaired_snapshot_id=snapshot_id, snapshot_id_after=snapshot_id)


# == sql: statements run by hand, for setup and checks ==


@dataclasses.dataclass(frozen=True, kw_only=True)
class SqlJobArgs(Contract):
    """The ``sql`` job: Spark SQL statements against the catalog, the rows of the last one back.

    For setting tables up, reading them back and running Iceberg procedures by hand; the rows are
    capped (``max_rows``) so a careless ``SELECT`` cannot flood a result or an XCom.
    """

    what: ClassVar[str] = "sql job"

    statements: list[str] = dataclasses.field(default_factory=list)
    max_rows: int = 1000

    def validate(self) -> Self:
        if not self.statements or not all(isinstance(s, str) and s.strip() for s in self.statements):
            raise LakeConfigError(f"The {self.what} needs at least one statement, each a non-empty string; "
                                  f"got {self.statements!r}.")
        whole_number(self.max_rows, f"max_rows of the {self.what}", minimum=1)
        return self


@dataclasses.dataclass(frozen=True, kw_only=True)
class SqlJobResult(Contract):
    """The last statement's ``rows`` (at most ``max_rows``; ``truncated`` when there were more)."""

    what: ClassVar[str] = "sql job result"

    columns: list[str] = dataclasses.field(default_factory=list)
    rows: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    truncated: bool = False
    statements: int = 0


# == batch: several tables' jobs in one Spark application ==


@dataclasses.dataclass(frozen=True, kw_only=True)
class BatchJobItem(Contract):
    """One job of a batch: the job's name and its own arguments (that job's contract as JSON)."""

    what: ClassVar[str] = "batch item"

    job: str
    args: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True, kw_only=True)
class BatchJobArgs(Contract):
    """The ``batch`` job: run ``jobs`` one after another in one Spark application.

    Why: a spark-submit costs a JVM start (5-7 s on 2 cores) whatever the work; a fleet whose
    tables each need a little compaction pays it once per application instead of once per table.
    """

    what: ClassVar[str] = "batch job"

    jobs: list[BatchJobItem] = dataclasses.field(default_factory=list)

    def validate(self) -> Self:
        if not self.jobs:
            raise LakeConfigError(f"The {self.what} needs at least one job.")
        if any(item.job == names.BATCH for item in self.jobs):
            raise LakeConfigError(f"A {self.what} cannot hold another batch.")
        return self


@dataclasses.dataclass(frozen=True, kw_only=True)
class BatchItemOutcome(Contract):
    """What one job of a batch did: its result, or its failure (the others ran regardless)."""

    what: ClassVar[str] = "batch item outcome"

    status: str  # "success" or "failed"
    result: dict[str, Any] | None = None
    error_class: str | None = None
    message: str | None = None

    @property
    def failed(self) -> bool:
        return self.status != "success"


@dataclasses.dataclass(frozen=True, kw_only=True)
class BatchJobResult(Contract):
    """The ``batch`` job's result: one outcome per job, in the order given."""

    what: ClassVar[str] = "batch result"

    outcomes: list[BatchItemOutcome] = dataclasses.field(default_factory=list)
