"""Approval for big deletions: what a deletion step would remove, when a person must approve it, what they read.

Expiry and clean delete files for good. Most runs delete a little (yesterday's compacted
files), and those should run unattended; a run that would delete much more than usual (a
retention property set wrong, a clock far ahead, a policy with ``retained=1`` on a busy table)
should wait for a person. :class:`DeletionThreshold` says where "much more" starts (files,
bytes, or a share of the table's live files or bytes), :class:`DeletionPreview` is what a dry
run says would go, :func:`approval_needed` compares the two, :func:`approval_body` is the text
the person reads in the Airflow UI, and :class:`Approval` (the gate's XCom) is what was
approved, which the deleting step then keeps to.

Pure: no Airflow, no Spark. :func:`files_only_in` reads a PyIceberg table's manifests (the
table object is handed in; nothing here opens a catalog).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from airflow_lake_provider.core import step_names as names
from airflow_lake_provider.core.coercion import is_none
from airflow_lake_provider.core.contract_base import Contract
from airflow_lake_provider.exceptions import LakeConfigError

if TYPE_CHECKING:
    from pyiceberg.table import Table

#: How many snapshot IDs and file paths the body lists before "and N more".
LISTED_IN_BODY = 20


@dataclasses.dataclass(frozen=True)
class DeletionThreshold:
    """Above any of these a deletion waits for a person's approval; at or under all of them it runs unattended.

    :param max_files: most files one step may delete unattended (content files of expired
        snapshots plus orphan files).
    :param max_bytes: most bytes one step may delete unattended.
    :param max_share: most bytes one step may delete unattended, as a share of the table's live
        bytes (0 < share <= 1): ``0.5`` asks when a step would delete as many bytes as half of what
        the table holds now (see :attr:`DeletionPreview.share` for why bytes, not files).

    At least one must be set (a threshold with none set would never ask, which is "no approval":
    say so with ``approve_deletions_over=None``). ``max_files=0`` asks before any deletion.
    """

    max_files: int | None = None
    max_bytes: int | None = None
    max_share: float | None = None

    def __post_init__(self) -> None:
        for name in ("max_files", "max_bytes", "max_share"):
            if is_none(getattr(self, name)):
                object.__setattr__(self, name, None)

    def validate(self) -> DeletionThreshold:
        """Refuse a threshold that cannot mean anything, with a sentence naming the value."""
        if self.max_files is None and self.max_bytes is None and self.max_share is None:
            raise LakeConfigError("A deletion threshold needs at least one of max_files, max_bytes or max_share; "
                                  "for no approval at all leave approve_deletions_over unset.")
        for name in ("max_files", "max_bytes"):
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int):
                try:
                    value = int(str(value))
                except ValueError:
                    raise LakeConfigError(f"The deletion threshold's {name} must be a whole number; "
                                          f"got {value!r}.") from None
                object.__setattr__(self, name, value)
            if value < 0:
                raise LakeConfigError(f"The deletion threshold's {name} cannot be negative; got {value}.")
        if self.max_share is not None:
            try:
                share = float(self.max_share)
            except (TypeError, ValueError):
                raise LakeConfigError(f"The deletion threshold's max_share must be a number; "
                                      f"got {self.max_share!r}.") from None
            if isinstance(self.max_share, bool) or not 0 < share <= 1:
                raise LakeConfigError(f"The deletion threshold's max_share is a share of the table, more than 0 "
                                      f"and at most 1 (0.25 is a quarter); got {self.max_share!r}.")
            object.__setattr__(self, "max_share", share)
        return self

    def describe(self) -> str:
        """``"100 files, 1.0 GiB or 25% of the table"``: the limits that are set."""
        parts = []
        if self.max_files is not None:
            parts.append(f"{self.max_files} files")
        if self.max_bytes is not None:
            parts.append(human_bytes(self.max_bytes))
        if self.max_share is not None:
            parts.append(f"{self.max_share:.0%} of the table's live bytes")
        return " or ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: DeletionThreshold | Mapping[str, Any]) -> DeletionThreshold:
        if isinstance(data, DeletionThreshold):
            return data.validate()
        if not isinstance(data, Mapping):
            raise LakeConfigError(f"A deletion threshold is a mapping of max_files, max_bytes, max_share; "
                                  f"got {data!r}.")
        unknown = sorted(set(data) - {"max_files", "max_bytes", "max_share"})
        if unknown:
            raise LakeConfigError(f"A deletion threshold has max_files, max_bytes and max_share; "
                                  f"unknown: {', '.join(unknown)}.")
        return cls(**data).validate()


@dataclasses.dataclass(frozen=True, kw_only=True)
class DeletionPreview(Contract):
    """What one deletion step would remove, as a dry run found it, and the table it is measured against.

    ``snapshot_*``: the snapshots the step would expire (``snapshot_reasons``: ID -> the rule that
    removes it) and the content files (data and delete files) reachable only from them, which
    Iceberg deletes with them. ``orphan_*``: the orphan files a clean would take (``orphan_files``
    is at most the first ``CleanJobResult.ORPHAN_FILES_LISTED``). ``live_*``: the current
    snapshot's content files, the base of the share.
    """

    what: ClassVar[str] = "deletion preview"

    table: str
    step: str  # one of step_names.DELETING_STEPS
    snapshot_ids: list[int] = dataclasses.field(default_factory=list)
    snapshot_reasons: dict[str, str] = dataclasses.field(default_factory=dict)
    snapshot_file_count: int = 0
    snapshot_bytes: int = 0
    snapshot_files: list[str] = dataclasses.field(default_factory=list)  # the first LISTED_IN_BODY
    metadata_file_count: int = 0  # manifests and manifest lists only the expired snapshots held
    orphan_files: list[str] = dataclasses.field(default_factory=list)
    orphan_file_count: int = 0
    orphan_bytes: int = 0  # of the listed orphan files
    live_file_count: int = 0
    live_bytes: int = 0

    @property
    def file_count(self) -> int:
        return self.snapshot_file_count + self.orphan_file_count

    @property
    def byte_count(self) -> int:
        return self.snapshot_bytes + self.orphan_bytes

    @property
    def share(self) -> float:
        """The bytes to delete as a share of the table's live bytes (more than 1 when more would go than stays).

        Bytes, not files: after a compaction the small files a routine expiry deletes outnumber the
        table's live files many times over (12 small files replaced by 2 is a files share of 600%),
        while their bytes are about what the table holds; bytes measure "how much of the table".
        An empty table (nothing live) has share 1 as soon as anything would go.
        """
        if self.byte_count == 0:
            return 0.0
        return self.byte_count / self.live_bytes if self.live_bytes else 1.0

    @property
    def is_empty(self) -> bool:
        return not self.snapshot_ids and not self.orphan_file_count


def check_gate(step: str, threshold: Any) -> None:
    """Refuse an approval gate that cannot work: it guards a deleting step, and a threshold given as
    it is (not a template) is checked now, at the DAG's parse."""
    if step not in names.DELETING_STEPS:
        raise LakeConfigError(f"The approval gate guards one of {', '.join(names.DELETING_STEPS)}; got step {step!r}.")
    if isinstance(threshold, DeletionThreshold):
        threshold.validate()


def approval_needed(threshold: DeletionThreshold, preview: DeletionPreview) -> list[str]:
    """The limits ``preview`` goes over, as sentences; empty: it may run unattended."""
    over = []
    if threshold.max_files is not None and preview.file_count > threshold.max_files:
        over.append(f"{preview.file_count} files to delete is over the limit of {threshold.max_files}")
    if threshold.max_bytes is not None and preview.byte_count > threshold.max_bytes:
        over.append(f"{human_bytes(preview.byte_count)} to delete is over the limit of "
                    f"{human_bytes(threshold.max_bytes)}")
    if threshold.max_share is not None and preview.share > threshold.max_share:
        over.append(f"{preview.share:.0%} of the table's live bytes is over the limit of "
                    f"{threshold.max_share:.0%}")
    return over


def approval_subject(preview: DeletionPreview) -> str:
    return (f"{preview.step.capitalize()} of {preview.table} would delete {preview.file_count} files "
            f"({human_bytes(preview.byte_count)}): approve?")


def approval_body(preview: DeletionPreview, threshold: DeletionThreshold, *, listed: int = LISTED_IN_BODY) -> str:
    """The Markdown a person reads before approving: how much, the share, why it asks, what exactly goes."""
    lines = [
        f"**{preview.step.capitalize()}** of `{preview.table}` would delete:",
        "",
        (f"- **{len(preview.snapshot_ids)} snapshots**, and with them {preview.snapshot_file_count} data and delete "
         f"files ({human_bytes(preview.snapshot_bytes)}) no remaining snapshot needs, and "
         f"{preview.metadata_file_count} manifests and manifest lists"),
    ]
    if preview.step == names.CLEAN:
        lines.append(f"- **{preview.orphan_file_count} orphan files** ({human_bytes(preview.orphan_bytes)} "
                     f"for the {len(preview.orphan_files)} listed) that no snapshot, tag or branch references")
    lines += [
        (f"- in all {preview.file_count} files, {human_bytes(preview.byte_count)}: {preview.share:.1%} of the "
         f"{human_bytes(preview.live_bytes)} the table's {preview.live_file_count} live files hold"),
        "",
        (f"It asks because {'; '.join(approval_needed(threshold, preview)) or 'nothing (under the threshold)'} "
         f"(unattended up to {threshold.describe()})."),
        "",
        ("**Approve** deletes exactly what is listed here (anything the table adds meanwhile waits for the next "
         "run); **Reject** deletes nothing and skips the rest of the group's deletions in this run."),
    ]
    if preview.snapshot_ids:
        lines += ["", "Snapshots:", ""]
        lines += [f"- `{sid}`: {preview.snapshot_reasons.get(str(sid), 'removed')}"
                  for sid in preview.snapshot_ids[:listed]]
        lines += _more(len(preview.snapshot_ids), listed)
    if preview.snapshot_files:
        lines += ["", "Files only those snapshots hold:", ""]
        lines += [f"- `{path}`" for path in preview.snapshot_files[:listed]]
        lines += _more(preview.snapshot_file_count, min(listed, len(preview.snapshot_files)))
    if preview.orphan_files:
        lines += ["", "Orphan files:", ""]
        lines += [f"- `{path}`" for path in preview.orphan_files[:listed]]
        lines += _more(preview.orphan_file_count, min(listed, len(preview.orphan_files)))
    return "\n".join(lines)


def _more(total: int, shown: int) -> list[str]:
    return [f"- ... and {total - shown} more"] if total > shown else []


@dataclasses.dataclass(frozen=True, kw_only=True)
class Approval(Contract):
    """The gate's XCom: what the deleting step may remove, and who said so.

    ``approved_by``: ``"threshold"`` (under it, no one asked) or the user who approved.
    ``snapshot_ids`` and ``orphan_files`` are the complete sets the step may remove (the step
    removes the part of its fresh decision that is in them, nothing else); ``orphan_files``
    holds at most the listed orphans, so a clean with more orphans takes the rest on a later run.
    ``digest`` fingerprints the approved sets (for audit: the log and the HITL record name it).
    """

    what: ClassVar[str] = "deletion approval"

    table: str
    step: str
    approved_by: str
    snapshot_ids: list[int] = dataclasses.field(default_factory=list)
    orphan_files: list[str] = dataclasses.field(default_factory=list)
    file_count: int = 0
    byte_count: int = 0
    digest: str = ""

    @classmethod
    def of(cls, preview: DeletionPreview, approved_by: str) -> Approval:
        return cls(table=preview.table, step=preview.step, approved_by=approved_by,
                   snapshot_ids=list(preview.snapshot_ids), orphan_files=list(preview.orphan_files),
                   file_count=preview.file_count, byte_count=preview.byte_count,
                   digest=approval_digest(preview.snapshot_ids, preview.orphan_files))

    def keep_to(self, table: str, step: str, snapshot_ids: Iterable[int]) -> tuple[list[int], list[int]]:
        """The fresh decision's snapshots split into (approved, left for a later run).

        Refuses an approval given for another table or step: wiring gone wrong must not delete.
        """
        if self.table != table or self.step != step:
            raise LakeConfigError(f"The approval given to the {step} of {table} was for the {self.step} of "
                                  f"{self.table}; nothing was removed.")
        allowed = set(self.snapshot_ids)
        ids = list(snapshot_ids)
        return [sid for sid in ids if sid in allowed], [sid for sid in ids if sid not in allowed]


def approver_name(user: Any) -> str:
    """Who approved, from Airflow's HITL response (``responded_by_user``: a mapping with a name or id, or a name)."""
    if isinstance(user, Mapping):
        return str(user.get("name") or user.get("id") or "a user")
    return str(user or "a user")


def approval_digest(snapshot_ids: Sequence[int], orphan_files: Sequence[str]) -> str:
    text = "\n".join([*(str(i) for i in sorted(snapshot_ids)), "--", *sorted(orphan_files)])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def human_bytes(size: int) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


# == what expiring snapshots deletes, from a PyIceberg table's manifests ==

@dataclasses.dataclass(frozen=True)
class FilesOnlyIn:
    """Content files (path -> size) and metadata files reachable only from some snapshots."""

    content_files: dict[str, int]
    metadata_files: int


def files_only_in(table: Table, snapshot_ids: Iterable[int]) -> FilesOnlyIn:
    """What Iceberg deletes when it expires ``snapshot_ids`` of the PyIceberg ``table``.

    A content file goes when a manifest of an expired snapshot lists it live (added or existing)
    and no manifest of a remaining snapshot does; likewise a manifest, and every expired
    snapshot's manifest list. That is the reachability rule of Iceberg's file cleanup, computed
    from metadata (each manifest is read once), no JVM.
    """
    expired = set(snapshot_ids)
    if not expired:
        return FilesOnlyIn({}, 0)
    io = table.io
    snapshots = list(table.metadata.snapshots)
    gone = [s for s in snapshots if s.snapshot_id in expired]
    kept = [s for s in snapshots if s.snapshot_id not in expired]
    cache: dict[str, dict[str, int]] = {}

    def manifests(group):
        return {m.manifest_path: m for s in group for m in s.manifests(io)}

    def live_files(manifest) -> dict[str, int]:
        if manifest.manifest_path not in cache:
            cache[manifest.manifest_path] = {
                entry.data_file.file_path: entry.data_file.file_size_in_bytes
                for entry in manifest.fetch_manifest_entry(io, discard_deleted=True)}
        return cache[manifest.manifest_path]

    gone_manifests, kept_manifests = manifests(gone), manifests(kept)
    kept_files: set[str] = set()
    for manifest in kept_manifests.values():
        kept_files.update(live_files(manifest))
    only_gone: dict[str, int] = {}
    for path, manifest in gone_manifests.items():
        if path in kept_manifests:
            continue
        for file_path, size in live_files(manifest).items():
            if file_path not in kept_files:
                only_gone[file_path] = size
    metadata = len(set(gone_manifests) - set(kept_manifests)) + len(gone)
    return FilesOnlyIn(dict(sorted(only_gone.items())), metadata)


def live_totals(table: Table) -> tuple[int, int]:
    """The current snapshot's live content files: (count, bytes)."""
    snapshot = table.current_snapshot()
    count = size = 0
    for manifest in snapshot.manifests(table.io) if snapshot is not None else ():
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
            count += 1
            size += entry.data_file.file_size_in_bytes
    return count, size


def deletion_preview(table: Table, name: str, step: str, result: Any) -> DeletionPreview:
    """What ``step`` (``expire`` or ``clean``) would delete from ``table``: its dry-run ``result``, with the
    files and bytes only the snapshots it would remove hold, read from the manifests (no JVM)."""
    if not isinstance(result, Mapping):
        raise LakeConfigError(f"The approval gate of the {step} of {name} needs the {step} dry run's result "
                              f"(e.g. {step}_preview.output); got {result!r}.")
    if not result.get("dry_run"):
        raise LakeConfigError(f"The approval gate of the {step} of {name} was given a result of a run that was not "
                              "a dry run: the files are gone already, there is nothing to approve.")
    snapshot_ids = [int(i) for i in result.get("would_expire_snapshot_ids") or ()]
    files = files_only_in(table, snapshot_ids)
    orphans = list(result.get("orphan_files") or ())
    live_count, live_bytes = live_totals(table)
    return DeletionPreview(
        table=name, step=step, snapshot_ids=snapshot_ids,
        snapshot_reasons={str(k): v for k, v in (result.get("removed") or {}).items()},
        snapshot_file_count=len(files.content_files), snapshot_bytes=sum(files.content_files.values()),
        snapshot_files=list(files.content_files)[:LISTED_IN_BODY], metadata_file_count=files.metadata_files,
        orphan_files=orphans, orphan_file_count=int(result.get("orphan_file_count") or 0),
        orphan_bytes=sum(_size(table.io, path) for path in orphans),
        live_file_count=live_count, live_bytes=live_bytes,
    )


def _size(io: Any, path: str) -> int:
    """A file's size through the table's FileIO; 0 when it is gone already (it will not be deleted then)."""
    try:
        return len(io.new_input(path))
    except (FileNotFoundError, OSError):
        return 0
