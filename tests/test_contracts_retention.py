"""The contracts of expire, clean and convert equality deletes, and the effective retention of
expire and clean in series: pure tests (no Spark, no table).

What a DAG author relies on: every XCom key of today's results is still there, an older XCom
still reads, bad job arguments are refused before a JVM starts, and the sentence the clean step
logs about what the two steps together keep is true of the decisions the steps take.
"""

from __future__ import annotations

import inspect
import json
from dataclasses import replace
from datetime import datetime, timezone

import pytest

from airflow_lake_provider.core.clean_policy import resolve_clean_policy
from airflow_lake_provider.core.contracts import (
    DEFAULT_COMMIT_RETRY,
    CleanJobArgs,
    CleanJobResult,
    CleanResult,
    CommitRetry,
    ConvertEqualityDeletesJobArgs,
    ConvertEqualityDeletesResult,
    ExpireJobArgs,
    ExpireResult,
    ExpiryOutcome,
)
from airflow_lake_provider.core.history import SnapshotInfo, SnapshotRef, TableHistory
from airflow_lake_provider.core.retention_decision import resolve_expiry
from airflow_lake_provider.core.retention_settings import (
    DEFAULT_CLEAN_POLICY,
    DEFAULT_CLEAN_RETAINED,
    DEFAULT_ORPHAN_OLDER_THAN_HOURS,
    ORPHAN_FLOOR_HOURS,
    CleanPolicy,
    CleanSettings,
    ExpirySettings,
    effective_retention,
)
from airflow_lake_provider.core.table_retention import TableRetention
from airflow_lake_provider.exceptions import LakeConfigError

H = 3_600_000
DAY = 24 * H
NOW = int(datetime(2026, 3, 1, tzinfo=timezone.utc).timestamp() * 1000)

# The XCom keys each step returned before the contracts (every one must still be there).
EXPIRE_KEYS = {"table", "snapshot_id", "retention_source", "kept", "removed", "removed_ref_reasons", "dry_run",
               "expired_snapshot_ids", "already_gone_snapshot_ids", "removed_refs", "would_expire_snapshot_ids",
               "would_remove_refs", "deleted_files", "snapshot_id_after"}
CLEAN_KEYS = {"table", "snapshot_id", "policy", "retained", "retention_source", "kept", "removed",
              "removed_ref_reasons", "planned_removals", "orphan_older_than_ms", "dry_run", "expired_snapshot_ids",
              "already_gone_snapshot_ids", "removed_refs", "would_expire_snapshot_ids", "would_remove_refs",
              "deleted_files", "orphan_files", "orphan_file_count", "kept_referenced", "kept_referenced_count",
              "snapshot_id_after"}
# Added by the quarantine (issue 14): where the orphans went, and what the purge removed.
CLEAN_QUARANTINE_KEYS = {"quarantine_run", "quarantine_manifest", "quarantined_file_count", "purged_runs",
                         "purged_file_count", "quarantine_days"}
# Added with the jobs' driver paths (issue 37): who expired, who listed the orphans.
EXPIRY_BY_KEYS = {"expired_by"}
ORPHANS_BY_KEYS = {"orphans_listed_by"}
CONVERT_KEYS = {"table", "format_version", "dry_run", "snapshot_id_before", "converted_snapshot_id",
                "committed_snapshot_ids", "snapshot_id_after", "converted_equality_delete_files",
                "equality_delete_records", "affected_data_files", "replaced_delete_files", "deleted_rows", "verified",
                "attempts", "seconds", "recovered_from_earlier_try"}


def _through_xcom(data: dict) -> dict:
    return json.loads(json.dumps(data))


# ---------------------------------------------------------------- results: keys, round trips, older XComs


def test_expire_result_keeps_every_key_and_adds_the_settings_it_applied() -> None:
    result = ExpireResult(table="db.t", snapshot_id=8, expired_snapshot_ids=[1, 2], kept={"8": "kept: current snapshot"},
                          deleted_files={"data_files": 3}, snapshot_id_after=8, retain_last=2, max_snapshot_age_ms=DAY)
    data = result.to_json()
    assert set(data) == EXPIRE_KEYS | {"retain_last", "max_snapshot_age_ms"} | EXPIRY_BY_KEYS
    assert _through_xcom(data) == data
    assert ExpireResult.from_json(_through_xcom(data)) == result
    assert ExpiryOutcome.from_json(data).expired_snapshot_ids == [1, 2]  # the job side reads out of the whole


def test_an_older_expire_xcom_still_reads() -> None:
    before_contracts = {"table": "db.t", "snapshot_id": 8, "retention_source": "table", "kept": {}, "removed": {},
                        "removed_ref_reasons": {}, "dry_run": False, "expired_snapshot_ids": [1],
                        "removed_refs": [], "deleted_files": {}, "snapshot_id_after": 8, "some_future_key": 1}
    result = ExpireResult.from_json(before_contracts)
    assert (result.expired_snapshot_ids, result.retain_last, result.already_gone_snapshot_ids) == ([1], None, [])


def test_clean_result_keeps_every_key_and_adds_the_effective_retention() -> None:
    job = CleanJobResult(expired_snapshot_ids=[3], orphan_files=["s3://b/t/data/x.parquet"], orphan_file_count=1,
                         snapshot_id_after=9)
    result = CleanResult(**job.to_json(), table="db.t", snapshot_id=9, policy="KEEP_LATEST_COMMITS", retained=5,
                         planned_removals=[3], orphan_older_than_ms=NOW - 72 * H,
                         effective_retention={"snapshots": "...", "files": "...", "statement": "..."})
    data = result.to_json()
    assert set(data) == CLEAN_KEYS | {"effective_retention"} | CLEAN_QUARANTINE_KEYS | EXPIRY_BY_KEYS | ORPHANS_BY_KEYS
    assert CleanResult.from_json(_through_xcom(data)) == result
    with pytest.raises(LakeConfigError, match="clean result contract is incomplete"):
        CleanResult.from_json({"table": "db.t"})  # policy and retained are always reported


@pytest.mark.parametrize(("version", "key", "other"), [(2, "added_position_delete_files", "added_deletion_vectors"),
                                                        (3, "added_deletion_vectors", "added_position_delete_files")])
def test_convert_result_names_the_added_files_by_format_version(version: int, key: str, other: str) -> None:
    result = ConvertEqualityDeletesResult.unchanged("db.t", version, 7).replace(
        committed_snapshot_ids=[8], snapshot_id_after=8, added_delete_files=5, deleted_rows=17)
    data = result.to_json()
    assert set(data) == CONVERT_KEYS | {key} and other not in data
    assert data[key] == 5 and data["snapshot_id_before"] == data["converted_snapshot_id"] == 7
    assert ConvertEqualityDeletesResult.from_json(_through_xcom(data)) == result


def test_nothing_to_convert_is_the_same_result_with_zeros() -> None:
    data = ConvertEqualityDeletesResult.unchanged("db.t", 2, 7, dry_run=True).to_json()
    assert data["snapshot_id_before"] == data["converted_snapshot_id"] == data["snapshot_id_after"] == 7
    assert (data["committed_snapshot_ids"], data["added_position_delete_files"], data["verified"], data["attempts"],
            data["dry_run"], data["recovered_from_earlier_try"]) == ([], 0, None, [], True, False)


# ---------------------------------------------------------------- job arguments


def test_clean_job_args_are_the_expiry_plus_the_orphan_floor() -> None:
    args = CleanJobArgs(table="db.t", snapshot_ids=[1, 2], protected_ids=[5], refs={"main": 9, "v1": 2},
                        removed_refs=["old"], orphan_older_than_ms=NOW, dry_run=True).validate()
    data = _through_xcom(args.to_json())
    assert CleanJobArgs.from_json(data) == args
    assert ExpireJobArgs.from_json(data) == ExpireJobArgs(table="db.t", snapshot_ids=[1, 2], protected_ids=[5],
                                                          refs={"main": 9, "v1": 2}, removed_refs=["old"])


@pytest.mark.parametrize("contract", [ExpireJobArgs, CleanJobArgs])
def test_expiry_args_refuse_what_is_not_a_snapshot_id(contract) -> None:
    with pytest.raises(LakeConfigError, match="snapshot_ids must be snapshot IDs"):
        contract(table="db.t", snapshot_ids=[1, "2"]).validate()
    with pytest.raises(LakeConfigError, match="protected_ids must be snapshot IDs"):
        contract(table="db.t", protected_ids=[True]).validate()
    with pytest.raises(LakeConfigError, match="needs a table"):
        contract(table="").validate()


def test_commit_retry_defaults_are_written_once() -> None:
    from airflow_lake_provider.operators.convert_equality_deletes import IcebergConvertEqualityDeletesOperator

    defaults = inspect.signature(IcebergConvertEqualityDeletesOperator.__init__).parameters
    assert defaults["max_commit_attempts"].default == DEFAULT_COMMIT_RETRY.max_attempts == 3
    assert defaults["commit_retry_backoff_seconds"].default == DEFAULT_COMMIT_RETRY.retry_backoff_seconds == 2.0
    # The job reads the same defaults when the operator sends none (older callers, tests).
    args = ConvertEqualityDeletesJobArgs.from_json({"table": "db.t"})
    assert (args.max_attempts, args.retry_backoff_seconds, args.snapshot_properties) == (3, 2.0, {})
    assert ConvertEqualityDeletesJobArgs.from_json(args.to_json()) == args


@pytest.mark.parametrize(("attempts", "backoff", "message"), [
    (0, 2.0, "max_commit_attempts must be a whole number from 1 to 10; got 0"),
    (11, 2.0, "max_commit_attempts must be a whole number from 1 to 10; got 11"),
    (True, 2.0, "max_commit_attempts"),
    (3, -1, "commit_retry_backoff_seconds must be a number of seconds from 0 to 300; got -1"),
    (3, 301, "commit_retry_backoff_seconds"),
])
def test_commit_retry_refuses_out_of_range(attempts, backoff, message) -> None:
    with pytest.raises(LakeConfigError, match=message):
        ConvertEqualityDeletesJobArgs(table="db.t", max_attempts=attempts, retry_backoff_seconds=backoff).validate()
    with pytest.raises(LakeConfigError, match=message):
        CommitRetry(max_attempts=attempts, retry_backoff_seconds=backoff).validate()


# ---------------------------------------------------------------- settings and the form's defaults


def test_the_forms_defaults_are_the_operators() -> None:
    from airflow_lake_provider.dag_factory import maintenance_params
    from airflow_lake_provider.operators.clean import IcebergCleanPolicyOperator

    form = {name: param.value for name, param in maintenance_params("db.t").items()}
    clean = inspect.signature(IcebergCleanPolicyOperator.__init__).parameters
    assert form["policy"] == clean["policy"].default == DEFAULT_CLEAN_POLICY.value
    assert form["retained"] == clean["retained"].default == DEFAULT_CLEAN_RETAINED
    # The operator's None is the default, resolved once by CleanSettings.
    assert clean["orphan_older_than_hours"].default is None and clean["remove_orphans"].default is True
    assert form["orphan_older_than_hours"] == CleanSettings.checked().orphan_older_than_hours == DEFAULT_ORPHAN_OLDER_THAN_HOURS
    assert form["remove_orphans"] is True
    assert maintenance_params("db.t")["orphan_older_than_hours"].schema["minimum"] == ORPHAN_FLOOR_HOURS
    # Empty expiry fields mean "the table's own": the override switch is off by default.
    assert (form["override_table_retention"], form["retain_last"], form["older_than"]) == (False, None, None)


def test_clean_settings_check_the_orphan_floor_and_the_policy() -> None:
    assert CleanSettings.checked() == CleanSettings()
    assert CleanSettings.checked("keep_latest_by_hours", 24).label == "KEEP_LATEST_BY_HOURS=24"
    assert CleanSettings.checked(orphan_older_than_hours=72).orphan_cutoff_ms(NOW) == NOW - 72 * H
    assert CleanSettings.checked(remove_orphans=False).orphan_cutoff_ms(NOW) is None
    assert CleanSettings.checked(orphan_older_than_hours=1, force_orphan_floor=True).orphan_older_than_hours == 1
    for kwargs, message in [({"orphan_older_than_hours": 2}, "under the 24 h floor"),
                            ({"orphan_older_than_hours": -1}, "must not be negative"),
                            ({"retained": 0}, "retained must be an integer >= 1"),
                            ({"policy": "KEEP_EVERYTHING"}, "valid policies: KEEP_LATEST_COMMITS")]:
        with pytest.raises(LakeConfigError, match=message):
            CleanSettings.checked(**kwargs)


def test_expiry_settings_refuse_values_without_the_override() -> None:
    with pytest.raises(LakeConfigError, match="retain_last given, but the table's own retention applies"):
        ExpirySettings.requested(False, older_than_ms=None, retain_last=3, now_ms=NOW)
    settings = ExpirySettings.requested(True, older_than_ms=NOW - 2 * DAY, retain_last=3, now_ms=NOW)
    assert settings == ExpirySettings(True, 3, 2 * DAY)
    assert [str(rule) for rule in settings.override_rules()] == [
        "min-snapshots-to-keep=3 (override: retain_last)", "max-snapshot-age-ms=172800000 (2d, override: older_than)"]
    assert ExpirySettings().override_rules() == (None, None)


# ---------------------------------------------------------------- the effective retention of expire then clean
#
# main is 1 <- 2 <- ... <- 10, one snapshot a day (10 is current and 1 day old); the table keeps
# the last 2 snapshots and 3 days. Snapshot 6 is protected (the rewrite's, say).

TABLE = {"history.expire.min-snapshots-to-keep": "2", "history.expire.max-snapshot-age-ms": str(3 * DAY)}
PROTECTED = [6]


def _history(properties: dict[str, str] = TABLE) -> TableHistory:
    main = tuple(SnapshotInfo(i, i - 1 if i > 1 else None, NOW - (11 - i) * DAY, "append") for i in range(1, 11))
    return TableHistory(main, (SnapshotRef("main", 10, "branch"),), 10, TableRetention.from_properties(properties))


def _expire_then_clean(expiry: ExpirySettings, clean: CleanSettings) -> list[int]:
    """The snapshots left after the expire step's decision and then the clean step's, as the operators take them."""
    history = _history()
    expired = resolve_expiry(history, expiry, now_ms=NOW, protected_ids=PROTECTED).expire_ids
    left = replace(history, snapshots=tuple(s for s in history.snapshots if s.snapshot_id not in expired))
    cleaned = resolve_clean_policy(left, clean, now_ms=NOW, protected_ids=PROTECTED).expire_ids
    return [s.snapshot_id for s in left.snapshots if s.snapshot_id not in cleaned]


def test_without_override_the_tables_retention_alone_decides() -> None:
    clean = CleanSettings.checked(CleanPolicy.KEEP_LATEST_COMMITS, 1)
    together = effective_retention(_history().retention, clean, ExpirySettings(), protected_ids=PROTECTED)
    assert together.snapshots == (
        "on main, the table's retention [the last 2 (min-snapshots-to-keep, table property) and those younger than "
        "3d (max-snapshot-age-ms, table property)]; clean policy KEEP_LATEST_COMMITS=1 [the last 1 commits] removes "
        "nothing beyond it: the expire step applied the table's retention in full, and clean never goes under it; "
        "always, the current snapshot, the protected snapshots [6], and every other branch and tag by its own retention"
    )
    assert together.files == ("every file a kept snapshot, tag or branch references, and unreferenced (orphan) files "
                              "younger than 72 h")
    assert str(together).startswith("Expire and clean together keep on main, the table's retention [the last 2 ")
    assert together.to_dict()["statement"] == str(together)
    # True of the decisions: 2 days old and younger (8, 9, 10) and the protected 6; the policy's "last 1" adds nothing.
    assert _expire_then_clean(ExpirySettings(), clean) == [6, 8, 9, 10]


def test_with_both_overrides_a_snapshot_stays_only_if_both_steps_keep_it() -> None:
    expiry = ExpirySettings(True, retain_last=4, max_snapshot_age_ms=0)
    clean = CleanSettings.checked("KEEP_LATEST_COMMITS", 3, override_table_retention=True, remove_orphans=False)
    together = effective_retention(_history().retention, clean, expiry)
    assert together.snapshots.startswith(
        "on main, those kept both by the expire step's override [the last 4 (min-snapshots-to-keep, override: "
        "retain_last) and no older one (max-snapshot-age-ms=0, override: older_than)] and by clean policy "
        "KEEP_LATEST_COMMITS=3 [the last 3 commits]; always, the current snapshot, and every other branch")
    assert together.files == "every file a kept snapshot, tag or branch references, and every unreferenced file " \
                             "(orphan removal is off)"
    assert _expire_then_clean(expiry, clean) == [6, 8, 9, 10]  # the last 3 of the last 4, and the protected one


def test_the_table_override_of_one_step_only_is_stated_as_such() -> None:
    retention = _history().retention
    clean_only = effective_retention(retention, CleanSettings.checked("KEEP_LATEST_BY_HOURS", 30,
                                                                      override_table_retention=True), ExpirySettings())
    assert clean_only.snapshots.startswith(
        "on main, those kept both by the table's retention [the last 2 (min-snapshots-to-keep, table property) and "
        "those younger than 3d (max-snapshot-age-ms, table property)] and by clean policy KEEP_LATEST_BY_HOURS=30 "
        "[every snapshot current in the last 30 h]")
    expire_only = effective_retention(retention, CleanSettings.checked("KEEP_LATEST_FILE_VERSIONS", 2),
                                      ExpirySettings(True, retain_last=1))
    assert expire_only.snapshots.startswith(
        "on main, those kept both by the expire step's override [the last 1 (min-snapshots-to-keep, override: "
        "retain_last) and those younger than 3d (max-snapshot-age-ms, table property)] and by either the table's "
        "retention [")
    assert "or clean policy KEEP_LATEST_FILE_VERSIONS=2 [the snapshots holding the last 2 versions of every " \
           "partition]" in expire_only.snapshots


def test_without_the_expire_steps_settings_the_statement_says_so() -> None:
    together = effective_retention(TableRetention(), CleanSettings())
    assert together.snapshots.startswith(
        "on main, those kept by either the table's retention [the last 1 (min-snapshots-to-keep, Iceberg default) and "
        "those younger than 5d (max-snapshot-age-ms, Iceberg default)] or clean policy KEEP_LATEST_COMMITS=10 "
        "[the last 10 commits] (this task knows no expire step's settings)")


def test_mains_own_settings_and_the_ref_age_are_named() -> None:
    retention = TableRetention.from_properties({"history.expire.max-ref-age-ms": str(7 * DAY)})
    main = SnapshotRef("main", 10, "branch", min_snapshots_to_keep=5)
    together = effective_retention(retention, CleanSettings(), ExpirySettings(), main=main)
    assert "the last 5 (min-snapshots-to-keep, branch main's own setting)" in together.snapshots
    assert together.snapshots.endswith(
        "every other branch and tag by its own retention (one older than 7d goes: max-ref-age-ms=604800000 "
        "(7d, table property))")
