"""The clean job's orphan listing in the driver (``jobs/orphan_listing.py``: no Spark application)
against Iceberg's ``DeleteOrphanFiles`` Spark action, the judge, on the same table and floor.

Tables come from the expiry tests' generated histories (inserts, merge-on-read deletes, updates,
merges, rewrites, dangling deletes dropped, manifests rewritten, statistics, tags, a branch's own
commit), with snapshots expired so that some files are reachable from no snapshot any more. Then
files nobody references are left where writers and tools leave them: in a partition, deep in
made-up directories, in ``metadata/``, in hidden directories (``_temporary``, ``.spark-staging``),
one younger than the floor; and every file is aged past the floor, as in a production table, so
the listing must tell live files from orphans by the metadata alone. Both listings must return
exactly the same files.
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

from hypothesis import HealthCheck, Phase, example, given, settings
from lake_checks import age_files, files_on_disk, local_path
from test_worker_expiry import EVERYTHING, EXAMPLES, History, _build, histories

from airflow_lake_provider.core.orphan_match import PrefixMismatch, find_orphans, split_location
from airflow_lake_provider.jobs import iceberg
from airflow_lake_provider.jobs.orphan_listing import list_in_driver, list_with_spark_action

HOUR_MS = 3_600_000
STRAYS = ("data/day=2026-01-01/dead-writer.parquet", "data/a/b/c/d/e/deep.parquet", "metadata/dead-m0.avro",
          "data/_temporary/0/task.parquet", "data/.spark-staging/x.parquet", "stray-at-the-root.txt")
HIDDEN = ("_temporary", ".spark-staging")


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
          phases=[Phase.explicit, Phase.generate],
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@example(history=EVERYTHING)
@given(history=histories())
def test_the_driver_lists_the_orphans_icebergs_action_lists(spark, lake_hook, namespace, history: History):
    name = f"{namespace}.listed_{uuid.uuid4().hex[:8]}"
    main_ids = _build(spark, name, history)
    older = main_ids[:-history.keep_last]
    doomed = [sid for sid, chosen in zip(older, history.expire, strict=False) if chosen]
    jtable = iceberg.load_table(spark, "lake", name)
    held = {int(jtable.refs().get(ref).snapshotId()) for ref in jtable.refs().keySet()}
    expire = jtable.expireSnapshots().expireOlderThan(0).retainLast(1).cleanExpiredFiles(False)
    for sid in (sid for sid in doomed if sid not in held):
        expire = expire.expireSnapshotId(sid)
    expire.commit()  # the files only they reached stay on disk: orphans now

    root = Path(local_path(jtable.location()))
    for stray in STRAYS:
        (root / stray).parent.mkdir(parents=True, exist_ok=True)
        (root / stray).write_bytes(b"left by a writer that died")
    age_files(files_on_disk(lake_hook.load_table(name)), hours=100)
    (root / "data" / "young.parquet").write_bytes(b"a writer's file, not committed yet")
    floor = int(time.time() * 1000) - 72 * HOUR_MS

    jtable.refresh()
    icebergs = list_with_spark_action(spark, jtable, floor)
    ours = list_in_driver(spark, jtable, floor)
    assert ours == icebergs
    found = {os.path.relpath(local_path(path), root) for path in ours}
    assert found >= {s for s in STRAYS if not any(h in s for h in HIDDEN)}
    assert not {s for s in STRAYS if any(h in s for h in HIDDEN)} & found and "data/young.parquet" not in found
    # The lists read without their partition summaries name what the snapshots' own reading names.
    snapshots = jtable.snapshots()
    whole = iceberg.manifests_of(jtable, [snapshots.get(i) for i in range(snapshots.size())], detached=True)
    assert {p for p, _, _ in iceberg.with_paths(jtable, iceberg.all_manifests(jtable))} == {
        p for p, _, _ in iceberg.with_paths(jtable, whole)}


def test_the_comparison_is_icebergs():
    """Locations read as Hadoop's Path reads them; s3a and s3n are s3; a file the metadata names only under
    another authority is refused, as Iceberg's PrefixMismatchMode.ERROR refuses it."""
    assert split_location("file:/tmp/t/data//a.parquet") == ("file", None, "/tmp/t/data/a.parquet")
    assert split_location("file:///tmp/t/a#1?.parquet") == ("file", None, "/tmp/t/a#1?.parquet")
    assert split_location("s3a://bucket/t/a.parquet") == ("s3a", "bucket", "/t/a.parquet")
    assert split_location("/tmp/t/") == (None, None, "/tmp/t")
    assert find_orphans(["s3://b/t/a", "s3://b/t/b", "s3://b/t/c"], ["s3a://b/t/a", "/t/b"]) == ["s3://b/t/c"]
    try:
        find_orphans(["s3://one/t/a"], ["s3://other/t/a"])
    except PrefixMismatch as error:
        assert "('other', 'one')" in str(error) and "nothing was taken" in str(error)
    else:
        raise AssertionError("a file under another authority was taken for an orphan")
