"""Orphan candidates of a table: files under its location that no snapshot, tag or branch references.

Two ways to the same list. Iceberg's ``DeleteOrphanFiles`` Spark action is the reference; it
starts a Spark application to list the location and read every snapshot's manifests, which on a
small table is most of a clean run (docs/benchmarks.md). :func:`list_in_driver` does the same work
in the driver's JVM with Iceberg's own pieces and no Spark application:

* the listing is Iceberg's ``FileSystemWalker`` (the action's own, with its hidden-path rule that
  keeps partition directories such as ``_bucket=1``), through Hadoop's file system or, for a FileIO
  that lists by prefix (S3FileIO...), through the FileIO, as the action chooses;
* the reachable files are the action's: the live entries of every manifest of every snapshot
  (Iceberg's ``ManifestFiles.readPaths`` of ``iceberg.all_manifests``), the manifests, manifest
  lists, metadata files of the metadata log, version hint and statistics files (``ReachableFileUtil``);
* the comparison is the action's (``core/orphan_match.py``); the modification-time floor is
  applied to what is left, where the action applies it while listing: the same files come out.

The driver takes the work on a local master and below ``SPARK_ACTION_MIN_FILES`` live files
(``iceberg.needs_the_spark_action``); a larger table on a cluster keeps the action, which spreads
the listing and the manifests over the executors. The action is given a delete function that
deletes nothing: taking the candidates is the clean job's.
"""

from __future__ import annotations

from airflow_lake_provider.core.orphan_match import find_orphans
from airflow_lake_provider.jobs import iceberg
from airflow_lake_provider.jobs.iceberg import java_class
from airflow_lake_provider.jobs.session import hadoop_configuration

#: The action's depth limit for listing one directory on an executor (``MAX_EXECUTOR_LISTING_DEPTH``).
_MAX_LISTING_DEPTH = 2000


def orphan_candidates(spark, jtable, older_than_ms: int) -> tuple[list[str], str]:
    """The candidates, sorted, and who listed them: ``"driver"`` or ``"spark_action"``."""
    jtable.refresh()
    if iceberg.needs_the_spark_action(spark, jtable):
        return list_with_spark_action(spark, jtable, older_than_ms), "spark_action"
    return list_in_driver(spark, jtable, older_than_ms), "driver"


def list_with_spark_action(spark, jtable, older_than_ms: int) -> list[str]:
    """Iceberg's ``DeleteOrphanFiles`` action, run with a delete function that deletes nothing."""
    action = iceberg.actions(spark).deleteOrphanFiles(jtable).olderThan(older_than_ms).deleteWith(_noop_consumer(spark))
    if lists_by_prefix(jtable):
        # Iceberg lists through Hadoop's FileSystem by default, which has no s3:// when the table is read
        # through S3FileIO without S3A: list with the table's own FileIO then.
        action = action.usePrefixListing(True)
    return sorted(iceberg.strings(action.execute().orphanFileLocations()))


def _noop_consumer(spark):
    """A ``java.util.function.Consumer<String>`` that deletes nothing (py4j callback)."""
    from pyspark.java_gateway import ensure_callback_server_started

    gateway = spark.sparkContext._gateway
    ensure_callback_server_started(gateway)

    class KeepFile:
        def accept(self, location):
            return None

        class Java:
            implements = ["java.util.function.Consumer"]

    return KeepFile()


def lists_by_prefix(jtable) -> bool:
    """Whether the table's FileIO is not Hadoop's and can list by prefix (S3FileIO, ResolvingFileIO...)."""
    io = jtable.io()
    if io.getClass().getName() == "org.apache.iceberg.hadoop.HadoopFileIO":
        return False
    return iceberg.implements(io, "org.apache.iceberg.io.SupportsPrefixOperations")


def list_in_driver(spark, jtable, older_than_ms: int) -> list[str]:
    """The action's candidates, found in this JVM (see the module's docstring)."""
    conf = hadoop_configuration(spark)  # the action's: Spark's Hadoop settings
    by_prefix = lists_by_prefix(jtable)
    candidates = find_orphans(_listed(jtable, conf, by_prefix), reachable_files(jtable, by_content=False))
    return sorted(path for path in candidates if _modified_before(jtable, conf, by_prefix, path, older_than_ms))


def _listed(jtable, conf, by_prefix: bool) -> list[str]:
    """Every file under the table location, hidden paths left out, by Iceberg's ``FileSystemWalker``."""
    walker = java_class(jtable, "org.apache.iceberg.util.FileSystemWalker")
    predicates = java_class(jtable, "java.util.function.Predicate")
    every_file = getattr(predicates, "not")(predicates.isEqual(None))  # the floor is applied afterwards
    files, directories = iceberg.recorder(jtable), iceberg.recorder(jtable)
    location = str(jtable.location())
    if by_prefix:
        walker.listDirRecursivelyWithFileIO(jtable.io(), location, jtable.specs(), every_file, files)
    else:
        walker.listDirRecursivelyWithHadoop(location, jtable.specs(), every_file, conf,
                                            _MAX_LISTING_DEPTH, 2**31 - 1, directories, files)
        if iceberg.recorded(jtable, directories):
            raise RuntimeError(f"{location} is nested deeper than {_MAX_LISTING_DEPTH} directories")
    return iceberg.recorded(jtable, files)


def reachable_files(jtable, *, by_content: bool = True) -> dict[str, str]:
    """Every file some snapshot, tag or branch of the table reaches, and its metadata files: location ->
    kind (``core/orphan_guard.py``'s ``REFERENCE_KINDS``; ``deletes`` for any delete file; with
    ``by_content=False``, for a caller that needs only the locations, ``live`` for data and delete files)."""
    util = java_class(jtable, "org.apache.iceberg.ReachableFileUtil")
    found = dict.fromkeys(iceberg.strings(util.metadataFileLocations(jtable, False)), "metadata")
    found[str(util.versionHintLocation(jtable))] = "metadata"
    found.update(dict.fromkeys(iceberg.strings(util.statisticsFilesLocations(jtable)), "statistics"))
    found.update(dict.fromkeys(iceberg.strings(util.manifestListLocations(jtable)), "manifest_list"))
    manifests, files = iceberg.manifest_contents(jtable, iceberg.all_manifests(jtable), by_content=by_content)
    found.update(dict.fromkeys(manifests, "manifest"))
    for kind, paths in files.items():
        found.update(dict.fromkeys(paths, kind))
    return found


def _modified_before(jtable, conf, by_prefix: bool, path: str, older_than_ms: int) -> bool:
    """Whether the file at ``path`` was last modified before the floor (a file gone meanwhile is not)."""
    try:
        if by_prefix:
            found = jtable.io().listPrefix(path).iterator()
            while found.hasNext():
                info = found.next()
                if str(info.location()) == path:
                    return int(info.createdAtMillis()) < older_than_ms
            return False
        hadoop_path = java_class(jtable, "org.apache.hadoop.fs.Path")(path)
        status = hadoop_path.getFileSystem(conf).getFileStatus(hadoop_path)
        return int(status.getModificationTime()) < older_than_ms
    except Exception:  # noqa: BLE001 - gone meanwhile (FileNotFoundException): not an orphan to take
        return False
