"""What every step takes and returns: one typed contract per step, read here and nowhere else.

Each value that crosses a seam (Airflow task -> Spark job, Spark job -> task, task -> XCom ->
next task) is one of these frozen dataclasses. The operator builds a step's job arguments (and
:meth:`Contract.validate` refuses bad ones before any JVM starts), the PySpark job reads the same
class with :meth:`Contract.from_json`, its result comes back as a class, and the operator returns
it to XCom as plain JSON with :meth:`Contract.to_json`. Defaults are the field defaults: written
once. Older XComs still read: unknown keys are ignored and missing ones take their default.

Shipped to the Spark driver with the jobs: pure Python, no Airflow, no Spark.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from functools import cache
from typing import Any, ClassVar, TypeVar

from airflow_lake_provider.exceptions import LakeConfigError

C = TypeVar("C", bound="Contract")


class Contract:
    """Base of the step contracts (frozen dataclasses): JSON out, JSON in, one validation."""

    #: The step's name in error messages.
    what: ClassVar[str] = "step"

    def to_json(self) -> dict[str, Any]:
        """Plain JSON values (dicts, lists, str, int, float, bool, None), nested contracts included."""
        return {f.name: _to_json(getattr(self, f.name)) for f in dataclasses.fields(self)}

    @classmethod
    def from_json(cls: type[C], data: Mapping[str, Any] | None) -> C:
        """The contract from its JSON: unknown keys ignored, missing keys take their default."""
        if data is None:
            data = {}
        if isinstance(data, cls):
            return data
        if not isinstance(data, Mapping):
            raise LakeConfigError(f"The {cls.what} contract needs a mapping; got {type(data).__name__}.")
        hints = _hints(cls)
        values = {}
        for f in dataclasses.fields(cls):
            if f.name in data and f.init:
                values[f.name] = _from_json(data[f.name], hints.get(f.name))
        try:
            return cls(**values)
        except TypeError as error:  # a required field is missing
            raise LakeConfigError(f"The {cls.what} contract is incomplete: {error}.") from None

    def validate(self: C) -> C:
        """Refuse a contract that cannot be right (``LakeConfigError``); returns itself."""
        return self

    def replace(self: C, **changes: Any) -> C:
        return dataclasses.replace(self, **changes)


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _to_json(value: Any) -> Any:
    if isinstance(value, Contract):
        return value.to_json()
    if isinstance(value, Mapping):
        return {str(k): _to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_to_json(v) for v in value]
    return value


def _from_json(value: Any, annotation: Any) -> Any:
    """Nested contracts (``X``, ``X | None``, ``list[X]``, ``tuple[X, ...]``) from their JSON."""
    if value is None or annotation is None:
        return value
    for candidate in (annotation, *typing.get_args(annotation)):
        if isinstance(candidate, type) and issubclass(candidate, Contract) and isinstance(value, Mapping):
            return candidate.from_json(value)
    origin = typing.get_origin(annotation)
    if origin in (list, tuple) and isinstance(value, (list, tuple)):
        item = (typing.get_args(annotation) or (None,))[0]
        items = [_from_json(v, item) for v in value]
        return tuple(items) if origin is tuple else items
    return value


# == plan ==
# (the plan operator's XCom: PlanResult)





# == spark plan job ==
# (the Spark plan job's arguments and result)





# == rewrite ==
# (RewriteJobArgs, RewriteResult)





# == expire ==
# (CommitRetry, shared by every job that commits beside other writers; ExpireJobArgs, ExpiryOutcome, ExpireResult)


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

    def validate(self: C) -> C:
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

    def validate(self: C) -> C:
        if not self.table:
            raise LakeConfigError(f"The {self.what} needs a table.")
        _check_snapshot_ids(self.what, snapshot_ids=self.snapshot_ids, protected_ids=self.protected_ids)
        return self


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
    # Files deleted, by kind: data_files, position_delete_files, equality_delete_files, manifests,
    # manifest_lists, statistics_files ({} when no expiry ran).
    deleted_files: dict[str, int] = dataclasses.field(default_factory=dict)
    snapshot_id_after: int | None = None

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
# (CleanJobArgs, CleanJobResult, CleanResult)


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


@dataclasses.dataclass(frozen=True, kw_only=True)
class CleanJobResult(ExpiryOutcome):
    """What the clean job did: the expiry outcome, and the orphan files removed (or, dry, found)."""

    what = "clean job result"

    dry_run: bool = False
    orphan_files: list[str] = dataclasses.field(default_factory=list)  # the first ORPHAN_FILES_LISTED
    orphan_file_count: int = 0

    ORPHAN_FILES_LISTED: ClassVar[int] = 1000


@dataclasses.dataclass(frozen=True, kw_only=True)
class CleanResult(CleanJobResult, RetentionReport):
    """The clean step's XCom: the policy's decision, what Spark removed, and what expire and clean
    together keep (``effective_retention``: ``{snapshots, files, statement}``, see
    :func:`airflow_lake_provider.core.retention.effective_retention`)."""

    what = "clean result"

    policy: str  # as the clean step was given it (e.g. KEEP_LATEST_COMMITS)
    retained: int
    planned_removals: list[int] = dataclasses.field(default_factory=list)  # the snapshot IDs the policy resolved
    orphan_older_than_ms: int | None = None  # orphan cutoff (epoch ms); None: orphan removal off
    effective_retention: dict[str, str] = dataclasses.field(default_factory=dict)


# == convert equality deletes ==
# (ConvertEqualityDeletesJobArgs, ConvertEqualityDeletesResult)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ConvertEqualityDeletesJobArgs(CommitRetry):
    """The conversion job: the table, the run's snapshot properties (so a retried task finds its
    commit), dry run, and the commit retry (:class:`CommitRetry`)."""

    what = "convert equality deletes job"

    table: str
    dry_run: bool = False
    snapshot_properties: dict[str, str] = dataclasses.field(default_factory=dict)

    def validate(self: C) -> C:
        if not self.table:
            raise LakeConfigError(f"The {self.what} needs a table.")
        return super().validate()


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
    def from_json(cls: type[C], data: Mapping[str, Any] | None) -> C:
        if isinstance(data, Mapping):
            data = dict(data)
            for key in (ADDED_POSITION_DELETE_FILES, ADDED_DELETION_VECTORS):
                if key in data:
                    data.setdefault("added_delete_files", data.pop(key))
        return super().from_json(data)
