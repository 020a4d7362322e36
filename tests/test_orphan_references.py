"""Files that are never orphans, through the clean job (``jobs.clean.run`` in the shared session).

Each test makes a file unreferenced by the table being cleaned but still needed (another table of
the catalog references it, or it is the table's own metadata, statistics or version hint), ages
every file past the floor, and checks the file stays with its reason while a true orphan next to
it (a dead writer's file: the control) is taken.
"""

from __future__ import annotations

import datetime as dt
import os
import time
from pathlib import Path

import pyarrow.parquet as pq

from demo_data import EVENTS_SCHEMA, _batch, create_events_table
from lake_checks import local_path, table_fingerprint
from airflow_lake_provider.jobs import clean, iceberg, references

DAY_MS = 24 * 3600 * 1000


def _age_tree(location: str, hours: float = 96) -> None:
    """Every file under ``location`` modified ``hours`` ago: past any floor."""
    then = time.time() - hours * 3600
    for folder, _, names in os.walk(local_path(location)):
        for name in names:
            os.utime(os.path.join(folder, name), (then, then))


def _dead_writer_file(location: str) -> str:
    """A data file a writer wrote and never committed (the control: a true orphan)."""
    path = Path(local_path(location)) / "data" / "day=2026-01-01" / "00000-0-dead-writer.parquet"
    pq.write_table(_batch(9000, 3, _day(), ["x"]), path)
    return str(path)


def _day() -> dt.date:
    return dt.date(2026, 1, 1)


def _clean(spark, table: str, **args) -> dict:
    """The clean job with no snapshot to expire and a floor of one day (the tests age files by four)."""
    cutoff = int(time.time() * 1000) - DAY_MS
    return clean.run(spark, "lake", {"table": table, "orphan_older_than_ms": cutoff, **args})


def _events(lake_hook, name: str):
    return create_events_table(lake_hook.catalog, name, days=1, commits_per_day=2, rows_per_commit=5)


def _kept_locally(result: dict) -> dict[str, str]:
    return {local_path(path): reason for path, reason in result["kept_referenced"].items()}


def _taken_locally(result: dict) -> set[str]:
    return {local_path(path) for path in result["orphan_files"]}


def test_files_a_registered_copy_references_are_kept(spark, lake_hook, namespace):
    """register_table shares every file: what the source no longer references, the copy still reads."""
    source_name, copy_name = f"{namespace}.source", f"{namespace}_copy.registered"
    source = _events(lake_hook, source_name)
    lake_hook.catalog.create_namespace(f"{namespace}_copy")
    copy = lake_hook.catalog.register_table(copy_name, source.metadata_location)
    before = table_fingerprint(copy)
    shared = {local_path(task.file.file_path) for task in copy.scan().plan_files()}

    # The source moves on and expires its history without deleting files (as another engine's expiry
    # may): the shared files are now unreferenced by the source, still referenced by the copy.
    source.overwrite(_batch(100, 4, _day(), ["a"]))
    jsource = iceberg.load_table(spark, "lake", source_name)
    jsource.expireSnapshots().expireOlderThan(int(time.time() * 1000) + 1000).retainLast(1) \
        .cleanExpiredFiles(False).commit()
    dead = _dead_writer_file(source.location())
    _age_tree(source.location())

    result = _clean(spark, source_name, reference_namespaces=[namespace, f"{namespace}_copy"])
    kept = _kept_locally(result)
    assert {path: kept.get(path) for path in shared} == \
        {path: f"referenced by table {copy_name} (data file)" for path in shared}
    assert any(reason == f"referenced by table {copy_name} (manifest list)" for reason in kept.values())
    assert any(reason == f"referenced by table {copy_name} (manifest)" for reason in kept.values())
    # The control: a true orphan is taken (with the manifests of the source's own expired snapshots).
    assert dead in _taken_locally(result) and _taken_locally(result).isdisjoint(kept)
    assert all(os.path.exists(path) for path in kept)
    assert table_fingerprint(lake_hook.load_table(copy_name)) == before  # the copy reads every row
    import generated_pages
    generated_pages.save_figure("references", (
        f"Cross-table references: cleaning a table whose files a `register_table` copy shares kept "
        f"{len(kept)} shared files with their reasons and took the true orphan; the copy read all {before[0]} rows "
        "afterwards (`tests/test_orphan_references.py`)"))


def test_files_another_table_added_with_add_files_are_kept_and_the_namespace_scope_applies(spark, lake_hook, namespace):
    """add_files imports files in place: a file under this table's location that another table
    imported is no orphan. ``reference_namespaces`` limits which tables are asked (the user's risk)."""
    source_name, importer_name = f"{namespace}.source", f"{namespace}_imports.importer"
    source = _events(lake_hook, source_name)
    imported = Path(local_path(source.location())) / "data" / "landing" / "batch-0001.parquet"
    imported.parent.mkdir(parents=True)
    pq.write_table(_batch(500, 6, _day(), ["z"]), imported)
    lake_hook.catalog.create_namespace(f"{namespace}_imports")
    importer = lake_hook.catalog.create_table(importer_name, schema=EVENTS_SCHEMA)
    importer.add_files([f"file://{imported}"])
    dead = _dead_writer_file(source.location())
    _age_tree(source.location())

    # Scope: the importer's namespace left out, its file would be taken (dry run); named, it is kept.
    outside = _clean(spark, source_name, dry_run=True, reference_namespaces=[namespace])
    assert _taken_locally(outside) == {str(imported), dead}
    inside = _clean(spark, source_name, dry_run=True, reference_namespaces=[f"{namespace}_imports"])
    assert _kept_locally(inside) == {str(imported): f"referenced by table {importer_name} (data file)"}

    # The default (None) is every namespace of the catalog: both are among them. The real run is
    # scoped all the same, so its cost does not grow with the tables the rest of the suite leaves.
    icatalog = spark._jsparkSession.sessionState().catalogManager().catalog("lake").icebergCatalog()
    every, refusal = references._namespaces(spark, icatalog, "lake", None)
    assert refusal is None and {namespace, f"{namespace}_imports"} <= {str(n) for n in every}
    result = _clean(spark, source_name, reference_namespaces=[namespace, f"{namespace}_imports"])
    assert _kept_locally(result) == {str(imported): f"referenced by table {importer_name} (data file)"}
    assert _taken_locally(result) == {dead}
    assert imported.exists()
    assert sorted(r["event_id"] for r in lake_hook.load_table(importer_name).scan().to_arrow().to_pylist()) == \
        list(range(500, 506))


def test_the_tables_own_metadata_statistics_and_version_hint_are_never_taken(spark, lake_hook, namespace):
    """Current and logged metadata files, Puffin statistics, partition statistics, the version hint."""
    name = f"{namespace}.events"
    table = _events(lake_hook, name)
    spark.sql(f"CALL lake.system.compute_table_stats(table => '{name}')").collect()
    spark.sql(f"CALL lake.system.compute_partition_stats(table => '{name}')").collect()
    jtable = iceberg.load_table(spark, "lake", name)
    metadata = jtable.operations().current()
    statistics = [str(f.path()) for f in jtable.statisticsFiles()]
    partition_statistics = [str(f.path()) for f in jtable.partitionStatisticsFiles()]
    assert statistics and partition_statistics
    hint = Path(local_path(table.location())) / "metadata" / "version-hint.text"
    hint.write_text("7")
    dead = _dead_writer_file(table.location())
    _age_tree(table.location())

    # End to end: Iceberg's scan plus the guard take the dead writer's file only.
    result = _clean(spark, name, reference_namespaces=[namespace])
    assert _taken_locally(result) == {dead}
    own = {
        str(metadata.metadataFileLocation()): "the table's current metadata file",
        str(metadata.previousFiles()[0].file()):
            "a metadata file in the table's metadata log (write.metadata.previous-versions-max)",
        statistics[0]: f"the table's statistics file (Puffin) of snapshot {jtable.currentSnapshot().snapshotId()}",
        partition_statistics[0]:
            f"the table's partition-statistics file of snapshot {jtable.currentSnapshot().snapshotId()}",
        f"file:{hint}": "the table's version hint (metadata/version-hint.text)",
    }
    assert all(os.path.exists(local_path(path)) for path in own)

    # The guard alone, given them as candidates (Iceberg 1.10's scan already counts them reachable),
    # spelt as Hadoop's listing spells them (file:/x) while the metadata says file:///x.
    listed = {f"file:{local_path(path)}": reason for path, reason in own.items()}
    kept = references.never_orphans(spark, "lake", jtable, [*listed, f"file:{dead}"], reference_namespaces=[])
    assert kept == listed


def test_a_table_that_cannot_be_read_or_an_unknown_namespace_keeps_every_candidate(spark, lake_hook, namespace, bad_input):
    """Whether another table references a file is unknown when it cannot be read: nothing is taken."""
    name = f"{namespace}.events"
    table = _events(lake_hook, name)
    dead = _dead_writer_file(table.location())
    _age_tree(table.location())

    result = _clean(spark, name, dry_run=True, reference_namespaces=[f"{namespace}_missing"])
    expected = (f"not taken: reference namespace '{namespace}_missing' does not exist in catalog lake; "
                f"no candidate is taken until reference_namespaces names existing namespaces")
    assert result["orphan_files"] == [] and _kept_locally(result) == {dead: expected}
    bad_input("clean job (reference_namespaces)", f"reference_namespaces=['{namespace}_missing']", expected,
              table_checked=True)

    broken_name = f"{namespace}_broken.lost"
    lake_hook.catalog.create_namespace(f"{namespace}_broken")
    broken = lake_hook.catalog.create_table(broken_name, schema=EVENTS_SCHEMA)
    os.remove(local_path(broken.metadata_location))  # its metadata file lost: the table cannot be loaded
    try:
        result = _clean(spark, name, reference_namespaces=[namespace, f"{namespace}_broken"])
    finally:  # the session's other cleans must not meet it
        lake_hook.catalog.drop_table(broken_name)
    assert result["orphan_files"] == []
    assert _kept_locally(result)[dead].startswith(f"not taken: table {broken_name} could not be read")
    assert os.path.exists(dead)
    assert _taken_locally(_clean(spark, name, reference_namespaces=[namespace])) == {dead}  # the control: readable again, the orphan goes
