"""What the expire and clean steps are asked to keep, checked once, and said once (pure logic).

Each step builds its settings object from its operator's values (:class:`ExpirySettings`,
:class:`CleanSettings`) and hands that object to its decision, so a value is checked in one place
and read the same way by the decision, the log and the result. The defaults of the clean step
live here because the operator and the DAG form (``dag_factory``) both read them: the form can
never offer other defaults than the operator applies. :func:`effective_retention` states what the
two steps, run one after the other, keep together.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum

from airflow_lake_provider.core.coercion import HOUR_MS, number, positive_int
from airflow_lake_provider.core.history import MAIN_BRANCH, SnapshotRef
from airflow_lake_provider.core.table_retention import RetentionRule, TableRetention, human_ms
from airflow_lake_provider.exceptions import LakeConfigError

__all__ = [
    "DEFAULT_CLEAN_POLICY",
    "DEFAULT_CLEAN_RETAINED",
    "DEFAULT_ORPHAN_OLDER_THAN_HOURS",
    "ORPHAN_FLOOR_HOURS",
    "CleanPolicy",
    "CleanSettings",
    "EffectiveRetention",
    "ExpirySettings",
    "effective_retention",
]


class CleanPolicy(str, Enum):
    """The Hudi cleaner's policies, applied to Iceberg snapshots (:mod:`~airflow_lake_provider.core.clean_policy`)."""

    KEEP_LATEST_COMMITS = "KEEP_LATEST_COMMITS"
    KEEP_LATEST_FILE_VERSIONS = "KEEP_LATEST_FILE_VERSIONS"
    KEEP_LATEST_BY_HOURS = "KEEP_LATEST_BY_HOURS"

    def __str__(self) -> str:
        # Callers compare str(policy) with the name (e.g. the clean operator); Python 3.11's
        # default would give "CleanPolicy.KEEP_LATEST_COMMITS".
        return self.value

    @classmethod
    def named(cls, policy: CleanPolicy | str) -> CleanPolicy:
        """A policy from itself or its name in any case (templated params arrive as strings)."""
        if isinstance(policy, cls):
            return policy
        name = str(policy).strip().upper()
        if name.startswith("CLEANPOLICY."):
            name = name[len("CLEANPOLICY."):]
        try:
            return cls(name)
        except ValueError:
            valid = ", ".join(p.value for p in cls)
            raise LakeConfigError(f"Unknown clean policy {policy!r}; valid policies: {valid}.") from None


# The defaults of the clean step, read by the operator's parameters and the DAG form alike.
DEFAULT_CLEAN_POLICY = CleanPolicy.KEEP_LATEST_COMMITS
DEFAULT_CLEAN_RETAINED = 10
DEFAULT_ORPHAN_OLDER_THAN_HOURS = 72
# Unreferenced files younger than this may belong to a write still in flight.
ORPHAN_FLOOR_HOURS = 24


@dataclass(frozen=True)
class ExpirySettings:
    """What the expire step applies to main: the table's own retention, or the override's values.

    ``retain_last`` and ``max_snapshot_age_ms`` are the override's values (``older_than`` as an
    age at the time of the run); ``None`` falls back to the table's own setting. The default
    instance is the table's own retention, unchanged.
    """

    override_table_retention: bool = False
    retain_last: int | None = None
    max_snapshot_age_ms: int | None = None

    @classmethod
    def requested(
        cls, override_table_retention: bool, *, older_than_ms: int | None, retain_last: int | None, now_ms: int
    ) -> ExpirySettings:
        """The settings a DAG author asked for; values given without the override are refused.

        A value that would silently replace the table owner's settings is an error, not a default.
        """
        if not override_table_retention and (older_than_ms is not None or retain_last is not None):
            given = ", ".join(
                n for n, v in (("older_than", older_than_ms), ("retain_last", retain_last)) if v is not None
            )
            raise LakeConfigError(
                f"{given} given, but the table's own retention applies (its history.expire.* properties and its refs' "
                "settings). To apply your value instead, set override_table_retention=True (in the form: 'Override "
                f"the table's retention'); to use the table's settings, leave {given} empty."
            )
        return cls(
            override_table_retention=bool(override_table_retention),
            retain_last=None if retain_last is None else positive_int(retain_last, "retain_last"),
            max_snapshot_age_ms=None if older_than_ms is None else max(0, now_ms - int(older_than_ms)),
        )

    def override_rules(self) -> tuple[RetentionRule | None, RetentionRule | None]:
        """main's ``min-snapshots-to-keep`` and ``max-snapshot-age-ms`` as overridden (``None``: not overridden)."""
        main_min = main_age = None
        if self.override_table_retention and self.retain_last is not None:
            main_min = RetentionRule("min-snapshots-to-keep", self.retain_last, "override: retain_last")
        if self.override_table_retention and self.max_snapshot_age_ms is not None:
            main_age = RetentionRule("max-snapshot-age-ms", self.max_snapshot_age_ms, "override: older_than")
        return main_min, main_age


@dataclass(frozen=True)
class CleanSettings:
    """The clean step's policy and orphan floor, checked (defaults: the constants above).

    Build it with :meth:`checked`: the decision reads ``policy`` as a :class:`CleanPolicy` and
    ``retained`` as a count without checking them again.
    """

    policy: CleanPolicy = DEFAULT_CLEAN_POLICY
    retained: int = DEFAULT_CLEAN_RETAINED
    override_table_retention: bool = False
    remove_orphans: bool = True
    orphan_older_than_hours: float = DEFAULT_ORPHAN_OLDER_THAN_HOURS
    force_orphan_floor: bool = False

    @classmethod
    def checked(
        cls,
        policy: CleanPolicy | str | None = None,
        retained: int | None = None,
        *,
        override_table_retention: bool = False,
        remove_orphans: bool = True,
        orphan_older_than_hours: float | None = None,
        force_orphan_floor: bool = False,
    ) -> CleanSettings:
        """Settings from the operator's values (``None``: the default); a policy, ``retained`` or orphan
        floor that cannot work is refused."""
        hours = DEFAULT_ORPHAN_OLDER_THAN_HOURS if orphan_older_than_hours is None else orphan_older_than_hours
        if remove_orphans:
            hours = number(hours, "orphan_older_than_hours")
            if hours < 0:
                raise LakeConfigError(f"orphan_older_than_hours must not be negative; got {hours}.")
            if hours < ORPHAN_FLOOR_HOURS and not force_orphan_floor:
                raise LakeConfigError(
                    f"orphan_older_than_hours={hours:g} is under the {ORPHAN_FLOOR_HOURS} h floor: files that young "
                    "may belong to a write still in flight, and deleting them would corrupt its commit. Use 24 h or "
                    "more, or set force_orphan_floor=True if no writer can be running."
                )
        return cls(CleanPolicy.named(DEFAULT_CLEAN_POLICY if policy is None else policy),
                   positive_int(DEFAULT_CLEAN_RETAINED if retained is None else retained, "retained"),
                   bool(override_table_retention), bool(remove_orphans), hours, bool(force_orphan_floor))

    @property
    def label(self) -> str:
        """``KEEP_LATEST_COMMITS=10``: how the log and the decisions name the policy."""
        return f"{self.policy.value}={self.retained}"

    def orphan_cutoff_ms(self, now_ms: int) -> int | None:
        """Orphan files modified before this (epoch ms) are deleted; ``None``: orphan removal is off."""
        if not self.remove_orphans:
            return None
        return now_ms - int(self.orphan_older_than_hours * HOUR_MS)


@dataclass(frozen=True)
class EffectiveRetention:
    """What the expire and clean steps, run one after the other, keep of a table, and why.

    ``snapshots`` and ``files`` are sentences a reader can check against the table's settings;
    ``str()`` joins them into the one statement the clean step logs and returns.
    """

    snapshots: str
    files: str

    def __str__(self) -> str:
        return f"Expire and clean together keep {self.snapshots}. Files: {self.files}."

    def to_dict(self) -> dict[str, str]:
        return {"snapshots": self.snapshots, "files": self.files, "statement": str(self)}


def effective_retention(
    table: TableRetention,
    clean: CleanSettings,
    expiry: ExpirySettings | None = None,
    *,
    main: SnapshotRef | None = None,
    protected_ids: Iterable[int] = (),
) -> EffectiveRetention:
    """The retention of expire then clean, stated once: a snapshot of main survives both steps
    only if each keeps it.

    * The expire step keeps main's history by the table's rules (``main``'s own ref settings,
      else the table's ``history.expire.*``, else Iceberg's defaults), or by the override's
      values (each falling back to the table's); ``expiry=None``: no expire step is known.
    * The clean step keeps what its policy keeps, or what the table's retention keeps (its floor)
      unless ``override_table_retention``.

    So without any override the table's retention alone decides and the clean policy removes
    nothing more: expire already applied the table's rules in full, and clean never goes under
    them. Whatever the settings, the current snapshot, ``protected_ids``, and every other branch
    and tag (by its own rules) stay, as
    :func:`~airflow_lake_provider.core.retention_decision.resolve_expiry` and
    :func:`~airflow_lake_provider.core.clean_policy.resolve_clean_policy` decide them; files
    follow the snapshots, and orphans younger than the floor stay.
    """
    main = main or SnapshotRef(MAIN_BRANCH, 0, "branch")
    table_min = main.own_rule("min-snapshots-to-keep", table.min_snapshots_to_keep)
    table_age = main.own_rule("max-snapshot-age-ms", table.max_snapshot_age_ms)
    tables = f"the table's retention [{_keep_phrase(table_min, table_age)}]"
    policy = f"clean policy {clean.label} [{_policy_phrase(clean)}]"
    if expiry is not None and not expiry.override_table_retention and not clean.override_table_retention:
        on_main = (f"{tables}; {policy} removes nothing beyond it: the expire step applied the table's retention "
                   "in full, and clean never goes under it")
    else:
        kept_by = []
        if expiry is not None and expiry.override_table_retention:
            override_min, override_age = expiry.override_rules()
            override_phrase = _keep_phrase(override_min or table_min, override_age or table_age)
            kept_by.append(f"the expire step's override [{override_phrase}]")
        elif expiry is not None:
            kept_by.append(tables)
        kept_by.append(policy if clean.override_table_retention else f"either {tables} or {policy}")
        on_main = f"those kept both by {kept_by[0]} and by {kept_by[1]}" if expiry else f"those kept by {kept_by[0]}"
        if expiry is None:
            on_main += " (this task knows no expire step's settings)"
    protected = sorted({int(i) for i in protected_ids})
    always = "the current snapshot, " + (f"the protected snapshots {protected}, " if protected else "")
    always += "and every other branch and tag by its own retention"
    if table.max_ref_age_ms.value is not None:
        always += f" (one older than {human_ms(table.max_ref_age_ms.value)} goes: {table.max_ref_age_ms})"
    referenced = "every file a kept snapshot, tag or branch references"
    if not clean.remove_orphans:
        files = f"{referenced}, and every unreferenced file (orphan removal is off)"
    else:
        files = f"{referenced}, and unreferenced (orphan) files younger than {clean.orphan_older_than_hours:g} h"
    return EffectiveRetention(f"on main, {on_main}; always, {always}", files)


def _keep_phrase(min_rule: RetentionRule, age_rule: RetentionRule) -> str:
    """``the last 5 (min-snapshots-to-keep, table property) and those younger than 7d (...)``."""
    last = f"the last {min_rule.value} ({min_rule.name}, {min_rule.source})"
    if age_rule.value is None:
        return f"{last} and every older one ({age_rule.name}=forever, {age_rule.source})"
    if age_rule.value == 0:
        return f"{last} and no older one ({age_rule.name}=0, {age_rule.source})"
    return f"{last} and those younger than {human_ms(age_rule.value)} ({age_rule.name}, {age_rule.source})"


def _policy_phrase(clean: CleanSettings) -> str:
    n = clean.retained
    return {
        CleanPolicy.KEEP_LATEST_COMMITS: f"the last {n} commits",
        CleanPolicy.KEEP_LATEST_FILE_VERSIONS: f"the snapshots holding the last {n} versions of every partition",
        CleanPolicy.KEEP_LATEST_BY_HOURS: f"every snapshot current in the last {n} h",
    }[clean.policy]
