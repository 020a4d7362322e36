"""The one coercion place: every templated form a rendered field arrives in, and the error for a bad one."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from airflow_lake_provider.core.coercion import SnapshotIds, coerce, parse_older_than, snapshot_ids
from airflow_lake_provider.exceptions import LakeConfigError


@pytest.mark.parametrize(("value", "expected"), [
    (True, True), (False, False), ("True", True), ("False", False), ("false", False), ("TRUE", True),
    ("0", False), ("1", True), ("yes", True), ("no", False), (" False ", False), (None, False), ("", False),
    ("None", False), (0, False), (1, True),
])
def test_switches(value, expected):
    assert coerce(value, bool, what="dry_run") is expected


def test_a_rendered_false_is_false_for_an_optional_switch_too():
    assert coerce("False", bool | None, what="use_starting_sequence_number") is False
    assert coerce("None", bool | None, what="use_starting_sequence_number") is None


@pytest.mark.parametrize(("value", "expected"), [
    (5, 5), ("5", 5), (" 12 ", 12), ("5.0", 5), (5.0, 5), ("536_870_912", 536870912), ("-3", -3),
])
def test_whole_numbers(value, expected):
    assert coerce(value, int, what="min_input_files") == expected


@pytest.mark.parametrize("text", ["None", "none", "", "null", None, "  "])
def test_optional_fields_take_the_texts_of_none(text):
    assert coerce(text, int | None, what="max_commits") is None
    assert coerce(text, str | None, what="sort_order") is None
    assert coerce(text, list[str] | None, what="zorder_columns") is None


def test_a_required_text_keeps_the_word_none():
    assert coerce("None", str, what="table") == "None"


@pytest.mark.parametrize(("value", "what"), [
    ("five", "min_input_files"), ("5.5", "min_input_files"), (True, "min_input_files"),
])
def test_a_bad_number_is_a_sentence(value, what):
    with pytest.raises(LakeConfigError, match=f"{what} must be a whole number; got"):
        coerce(value, int, what=what)


def test_a_bad_switch_is_a_sentence():
    with pytest.raises(LakeConfigError, match="dry_run must be true or false; got 'maybe'"):
        coerce("maybe", bool, what="dry_run")


@pytest.mark.parametrize(("value", "expected"), [
    (0.3, 0.3), ("0.3", 0.3), (1, 1), ("2", 2.0),
])
def test_numbers(value, expected):
    assert coerce(value, float, what="delete_ratio_threshold") == expected


@pytest.mark.parametrize("value", [
    ["event_id", "amount"], ("event_id", "amount"), "['event_id', 'amount']", '["event_id", "amount"]',
    "event_id, amount", "event_id,amount", "[event_id, amount]",
])
def test_lists_of_names(value):
    assert coerce(value, list[str] | None, what="zorder_columns") == ["event_id", "amount"]


@pytest.mark.parametrize("value", [{"a": "1"}, '{"a": "1"}', "{'a': '1'}"])
def test_mappings(value):
    assert coerce(value, dict[str, str] | None, what="options") == {"a": "1"}


def test_a_bad_mapping_is_a_sentence():
    with pytest.raises(LakeConfigError, match="options must be a mapping"):
        coerce("min-input-files=3", dict[str, str], what="options")


RESULT = {"snapshot_id_before": 1, "committed_snapshot_ids": [2, 3], "snapshot_id_after": 3}


@pytest.mark.parametrize(("value", "expected"), [
    (None, []), ("None", []), ("", []), (7, [7]), ("7", [7]), ("-7", [-7]), ([7, "8"], [7, 8]),
    ("[7, 8]", [7, 8]), ("(7, 8)", [7, 8]),
    (RESULT, [3, 3]), (str(RESULT), [3, 3]), ([RESULT, None], [3, 3]), ([None, "None"], []),
    ({"snapshot_id": 5}, [5]),
])
def test_snapshot_ids_from_every_form_an_upstream_task_hands_over(value, expected):
    assert snapshot_ids(value) == expected
    assert coerce(value, SnapshotIds | None, what="protected_snapshot_ids") == expected


@pytest.mark.parametrize(("value", "message"), [
    (True, "is not a snapshot ID"), ("latest", "is not a snapshot ID"), ("[7,", "Cannot read snapshot IDs"),
    (1.5, "Cannot read snapshot IDs from a float"),
])
def test_a_bad_snapshot_id_is_a_sentence(value, message):
    with pytest.raises(LakeConfigError, match=message):
        snapshot_ids(value)


def test_an_operator_coerces_its_rendered_fields_by_its_annotations():
    from airflow_lake_provider.operators.rewrite import IcebergRewriteDataFilesOperator

    op = IcebergRewriteDataFilesOperator(
        task_id="rewrite", table="db.t", dry_run="False", max_commit_attempts="4", zorder_columns="['a', 'b']",
        sort_order="None", spark_conf="{'spark.sql.shuffle.partitions': '4'}",
    )
    op.coerce_rendered_fields()
    assert op.dry_run is False
    assert op.max_commit_attempts == 4
    assert op.zorder_columns == ["a", "b"]
    assert op.sort_order is None
    assert op.spark_conf == {"spark.sql.shuffle.partitions": "4"}
    assert op.table == "db.t"


# ---------------------------------------------------------------- parse_older_than

H = 3_600_000
NOW = int(datetime(2026, 3, 1, tzinfo=timezone.utc).timestamp() * 1000)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("7d", NOW - 7 * 24 * H),
        ("36h", NOW - 36 * H),
        (" 90M ", NOW - 90 * 60_000),
        ("30s", NOW - 30_000),
        ("2w", NOW - 14 * 24 * H),
        ("1.5h", NOW - int(1.5 * H)),
        ("0m", NOW),
        ("P3D", NOW - 72 * H),
        ("PT36H", NOW - 36 * H),
        ("P1DT12H", NOW - 36 * H),
        ("pt90m", NOW - 90 * 60_000),
        ("2026-01-01T00:00:00+00:00", 1767225600000),
        ("2026-01-01T00:00:00", 1767225600000),
        ("2026-01-01T00:00:00Z", 1767225600000),
        ("2026-01-01T01:00:00+01:00", 1767225600000),
        ("2026-01-01", 1767225600000),
        (1767225600000, 1767225600000),
        ("1767225600000", 1767225600000),
        (datetime(2026, 1, 1), 1767225600000),
        (datetime(2026, 1, 1, 2, tzinfo=timezone(timedelta(hours=2))), 1767225600000),
        (timedelta(hours=2), NOW - 2 * H),
        (None, None),
        ("", None),
        ("  ", None),
        ("None", None),
    ],
)
def test_parse_older_than(value: object, expected: int | None) -> None:
    assert parse_older_than(value, now_ms=NOW) == expected


@pytest.mark.parametrize(
    ("value", "match"),
    [
        ("7 fortnights", "accepted: a duration"),
        ("yesterday", "accepted: a duration"),
        ("P1M", "years and months have no fixed length"),
        ("P1Y", "years and months have no fixed length"),
        ("P", "not understood"),
        ("-7d", "not understood"),
        (True, "not understood"),
        ([7], "not understood"),
        (7, "not epoch milliseconds"),
        ("1767225600", "not epoch milliseconds"),  # epoch seconds
        ("2099-01-01T00:00:00Z", "in the future"),
    ],
)
def test_parse_older_than_errors(value: object, match: str) -> None:
    with pytest.raises(LakeConfigError, match=match):
        parse_older_than(value, now_ms=NOW)


def test_one_duration_type_in_three_units():
    from datetime import timedelta

    from airflow_lake_provider.core.coercion import Days, Hours, Seconds, coerce

    assert coerce("3d", Hours, what="orphan_older_than_hours") == 72
    assert coerce(timedelta(hours=36), Days | None, what="quarantine_days") == 1.5
    assert coerce("PT1H", Seconds, what="ttl_seconds") == 3600 and coerce("600", Seconds, what="ttl_seconds") == 600
    assert coerce("None", Hours | None, what="orphan_older_than_hours") is None
    with pytest.raises(LakeConfigError, match="quarantine_days must be a number of days or a duration"):
        coerce("soon", Days, what="quarantine_days")
