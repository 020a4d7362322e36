"""The approval decision, from pure values: thresholds, what asks and what runs unattended, the body a person reads."""

from __future__ import annotations

import pytest

from airflow_lake_provider.core.approval import (
    Approval,
    DeletionPreview,
    DeletionThreshold,
    approval_body,
    approval_digest,
    approval_needed,
)
from airflow_lake_provider.exceptions import LakeConfigError


def preview(**fields) -> DeletionPreview:
    values = dict(table="ns.events", step="expire", snapshot_ids=[11, 12, 13],
                  snapshot_reasons={"11": "removed: older than 5 days", "12": "removed: older than 5 days",
                                    "13": "removed: older than 5 days"},
                  snapshot_file_count=30, snapshot_bytes=3_000_000, snapshot_files=[f"/lake/f{i}.parquet" for i in range(30)],
                  metadata_file_count=6, live_file_count=100, live_bytes=10_000_000)
    values.update(fields)
    return DeletionPreview(**values)


@pytest.mark.parametrize("threshold, over", [
    (DeletionThreshold(max_files=30), []),  # at the limit: unattended
    (DeletionThreshold(max_files=29), ["30 files to delete is over the limit of 29"]),
    (DeletionThreshold(max_bytes=3_000_000), []),
    (DeletionThreshold(max_bytes=2_999_999), ["2.9 MiB to delete is over the limit of 2.9 MiB"]),
    (DeletionThreshold(max_share=0.3), []),  # 3 of 10 MB
    (DeletionThreshold(max_share=0.25), ["30% of the table's live bytes is over the limit of 25%"]),
    (DeletionThreshold(max_files=1000, max_share=0.1), ["30% of the table's live bytes is over the limit of 10%"]),
    (DeletionThreshold(max_files=0), ["30 files to delete is over the limit of 0"]),
])
def test_any_limit_exceeded_asks(threshold, over):
    assert approval_needed(threshold.validate(), preview()) == over


def test_share_is_of_bytes_and_an_empty_table_counts_as_all():
    assert preview(snapshot_bytes=9_000_000).share == 0.9
    assert preview(snapshot_file_count=600).share == 0.3  # many small files after a compaction: bytes decide
    assert preview(live_file_count=0, live_bytes=0).share == 1.0
    assert preview(snapshot_ids=[], snapshot_file_count=0, snapshot_bytes=0, live_bytes=0).share == 0.0
    # Orphans count with the snapshots' files.
    assert preview(orphan_file_count=20, orphan_bytes=0).file_count == 50


def test_nothing_to_delete_never_asks():
    empty = preview(snapshot_ids=[], snapshot_file_count=0, snapshot_bytes=0, snapshot_files=[])
    assert approval_needed(DeletionThreshold(max_files=0, max_bytes=0, max_share=0.01).validate(), empty) == []


def test_rendered_text_thresholds_are_read():
    threshold = DeletionThreshold.from_json({"max_files": "10", "max_bytes": "None", "max_share": "0.5"})
    assert threshold == DeletionThreshold(max_files=10, max_bytes=None, max_share=0.5)


def test_the_body_says_how_much_why_and_what():
    body = approval_body(preview(), DeletionThreshold(max_files=10).validate(), listed=2)
    assert "**3 snapshots**" in body
    assert "30 data and delete files (2.9 MiB)" in body
    assert "30.0% of the 9.5 MiB the table's 100 live files hold" in body
    assert "It asks because 30 files to delete is over the limit of 10 (unattended up to 10 files)." in body
    assert "- `11`: removed: older than 5 days" in body and "- `12`" in body and "- `13`" not in body
    assert "- ... and 1 more" in body  # snapshots
    assert "- `/lake/f0.parquet`" in body and "- ... and 28 more" in body
    assert "orphan" not in body.lower().split("reject")[0]  # an expiry has no orphans to list


def test_a_clean_body_lists_its_orphans():
    body = approval_body(preview(step="clean", orphan_files=["/lake/orphan-1.parquet"], orphan_file_count=1,
                                 orphan_bytes=2048), DeletionThreshold(max_files=0).validate())
    assert "**1 orphan files** (2.0 KiB for the 1 listed)" in body
    assert "- `/lake/orphan-1.parquet`" in body


def test_the_approval_keeps_the_step_to_what_was_approved():
    approval = Approval.of(preview(), "alice")
    assert approval.digest == approval_digest([13, 12, 11], [])
    assert approval.keep_to("ns.events", "expire", [11, 12, 14]) == ([11, 12], [14])
    with pytest.raises(LakeConfigError, match="was for the expire of ns.events; nothing was removed"):
        approval.keep_to("ns.other", "expire", [11])
    assert Approval.from_json(approval.to_json()) == approval


@pytest.mark.parametrize("fields, message", [
    ({}, "needs at least one of max_files, max_bytes or max_share"),
    ({"max_files": -1}, "max_files cannot be negative; got -1"),
    ({"max_bytes": "-5"}, "max_bytes cannot be negative; got -5"),
    ({"max_files": "many"}, "max_files must be a whole number; got 'many'"),
    ({"max_share": 0}, "max_share is a share of the table, more than 0 and at most 1"),
    ({"max_share": 1.5}, "max_share is a share of the table, more than 0 and at most 1"),
    ({"max_share": "half"}, "max_share must be a number; got 'half'"),
    ({"max_rows": 5}, "unknown: max_rows"),
])
def test_bad_thresholds_are_refused_with_a_sentence(fields, message, bad_input):
    with pytest.raises(LakeConfigError, match=message) as raised:
        DeletionThreshold.from_json(fields)
    bad_input("approve_deletions_over (deletion threshold)", repr(fields), raised.value)


def test_the_docs_list_every_xcom_key_of_the_approval():
    import dataclasses
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "docs" / "operators" / "approval.md").read_text()
    text = text.split("## XCom")[1]
    documented = set(re.findall(r"^\| `([a-z_]+)` \|", text, re.M))
    assert documented == {f.name for f in dataclasses.fields(Approval)}


def test_the_group_gates_each_deletion_only_when_asked_to(bad_input):
    from airflow.sdk import DAG

    from airflow_lake_provider.task_group import lake_maintenance_group

    with DAG("approval_shape", schedule=None) as dag:
        gated = lake_maintenance_group(table="ns.gated", approve_deletions_over=DeletionThreshold(max_files=10))
        plain = lake_maintenance_group(table="ns.plain")
    chain = ["rewrite", "expire_preview", "approve_expire", "expire", "clean_preview", "approve_clean", "clean"]
    for upstream, downstream in zip(chain, chain[1:]):
        assert gated.child_id(downstream) in dag.get_task(gated.child_id(upstream)).downstream_task_ids
    assert gated.expire.task_id == "ns_gated.expire" and gated.clean.task_id == "ns_gated.clean"
    approve_expire = dag.get_task("ns_gated.approve_expire")
    assert approve_expire.also_skip_on_reject == ["ns_gated.clean_preview", "ns_gated.approve_clean", "ns_gated.clean"]
    assert dag.get_task("ns_gated.expire_preview").dry_run is True
    assert gated.expire.require_approval and gated.clean.require_approval  # no answer from the gate: they skip
    assert gated.expire.trigger_rule == gated.clean.trigger_rule == "none_failed"  # a failed gate fails them
    assert {t.task_id for t in dag.tasks if t.task_id.startswith("ns_plain.")} == {
        "ns_plain.plan", "ns_plain.rewrite", "ns_plain.expire", "ns_plain.clean",
        "ns_plain.acquire_lease", "ns_plain.release_lease"}
    assert plain.expire.downstream_task_ids == {"ns_plain.clean"}

    with pytest.raises(LakeConfigError, match="max_share is a share of the table") as raised, DAG("bad", schedule=None):
        lake_maintenance_group(table="ns.bad", approve_deletions_over=DeletionThreshold(max_share=2))
    bad_input("lake_maintenance_group(approve_deletions_over=...)", "DeletionThreshold(max_share=2)", raised.value)


def test_a_gated_step_without_an_approval_skips_itself_before_reading_the_table():
    from airflow.sdk.exceptions import AirflowSkipException

    from airflow_lake_provider.operators.clean import IcebergCleanPolicyOperator
    from airflow_lake_provider.operators.expire import IcebergExpireSnapshotsOperator

    for operator in (IcebergExpireSnapshotsOperator, IcebergCleanPolicyOperator):
        step = operator(task_id="step", table="ns.nowhere", require_approval=True, approved=None)
        with pytest.raises(AirflowSkipException, match="none reached it"):
            step.execute({})  # the table does not exist: the skip comes first
