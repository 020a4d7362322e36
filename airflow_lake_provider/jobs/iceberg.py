"""Iceberg's Java API from PySpark (py4j): what the jobs share.

The Java actions API gives what SQL ``CALL`` cannot: our own snapshot summary properties on
every commit, per-file-group results, explicit snapshot IDs to expire, and a dry-run delete
function for orphan files.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from airflow_lake_provider.core.engines import SPARK_ACTION_MIN_FILES
from airflow_lake_provider.core.table_digest import TableDigest, read_table_digest
from airflow_lake_provider.jobs.session import DeferredSparkSession, spark_master


def load_table(spark, catalog: str, table: str):
    """The Java ``org.apache.iceberg.Table`` for ``catalog.table``, freshly loaded.

    Through Iceberg's own catalog while a :class:`~airflow_lake_provider.jobs.session.DeferredSparkSession`
    is not started (so loading a table does not start Spark), else through Spark's catalog.
    """
    if isinstance(spark, DeferredSparkSession) and not spark.started:
        java_catalog = spark.iceberg_catalog(catalog)
        if java_catalog is not None:
            return java_catalog.loadTable(spark._jvm.org.apache.iceberg.catalog.TableIdentifier.parse(table))
    session = spark._jsparkSession  # first, as in actions()
    return spark._jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(session, f"{catalog}.{table}")


def needs_the_spark_action(spark, jtable) -> bool:
    """Whether Iceberg's Spark action should do a job's metadata work (an expiry, the orphan listing)
    rather than Iceberg's code in the driver: a table of ``SPARK_ACTION_MIN_FILES`` live files or more on a
    cluster, whose executors read its manifests in parallel. On a local master they would be the driver's
    own threads, so the driver does it without starting Spark."""
    if spark_master(spark).startswith("local"):
        return False
    snapshot = jtable.currentSnapshot()
    totals = summary(snapshot) if snapshot is not None else {}
    return int(totals.get("total-data-files", 0)) + int(totals.get("total-delete-files", 0)) >= SPARK_ACTION_MIN_FILES


def iceberg_catalog(spark, catalog: str):
    """The Java Iceberg ``Catalog`` behind Spark catalog ``catalog``: built without Spark while a
    :class:`DeferredSparkSession` is not started, else Spark's own."""
    if isinstance(spark, DeferredSparkSession) and not spark.started:
        java_catalog = spark.iceberg_catalog(catalog)
        if java_catalog is not None:
            return java_catalog
    return spark._jsparkSession.sessionState().catalogManager().catalog(catalog).icebergCatalog()


def gateway(spark):
    """The py4j gateway to the driver's JVM: a :class:`DeferredSparkSession`'s own while Spark is not started,
    else the SparkContext's (as ``_jvm`` follows)."""
    if isinstance(spark, DeferredSparkSession) and not spark.started:
        return spark._gateway
    return spark.sparkContext._gateway


def actions(spark):
    session = spark._jsparkSession  # first: a DeferredSparkSession starts Spark here, and its _jvm follows
    return spark._jvm.org.apache.iceberg.spark.actions.SparkActions.get(session)


def format_version(jtable) -> int:
    """The table's format version, from its metadata (no Spark call: a deferred session stays unstarted)."""
    return int(jtable.operations().current().formatVersion())


def current_snapshot_id(jtable) -> int | None:
    jtable.refresh()
    snapshot = jtable.currentSnapshot()
    return int(snapshot.snapshotId()) if snapshot is not None else None


def table_digest(jtable) -> TableDigest:
    """The table's snapshots, refs and current snapshot, freshly refreshed, in one py4j call.

    Reading them object by object costs two or three round trips per snapshot (about 1 s per
    10,000 on these machines); the metadata's JSON comes in one call and is parsed as the Airflow
    worker parses it (:func:`read_table_digest`), all from one consistent ``TableMetadata``.
    """
    jtable.refresh()
    return metadata_digest(jtable.operations().current())


def metadata_digest(metadata) -> TableDigest:
    """The digest of a Java ``TableMetadata``, from its JSON in one round trip."""
    as_json = java_class(metadata, "org.apache.iceberg.TableMetadataParser").toJson(metadata)
    return read_table_digest(str(as_json), metadata_location=metadata.metadataFileLocation())


def is_ancestor(spark, jtable, snapshot_id: int) -> bool:
    """Whether ``snapshot_id`` is the current snapshot of main or one of its ancestors."""
    current = current_snapshot_id(jtable)
    if current is None:
        return False
    util = spark._jvm.org.apache.iceberg.util.SnapshotUtil
    return bool(util.isAncestorOf(jtable, current, snapshot_id))


def snapshots_after(jtable, snapshot_id: int | None) -> list[Any]:
    """Snapshots on main committed after ``snapshot_id``, oldest first."""
    jtable.refresh()
    found = []
    snapshot = jtable.currentSnapshot()
    while snapshot is not None and (snapshot_id is None or int(snapshot.snapshotId()) != snapshot_id):
        found.append(snapshot)
        parent = snapshot.parentId()
        snapshot = jtable.snapshot(parent) if parent is not None else None
    return list(reversed(found))


def commits_tagged(jtable, after: int | None, key: str, value: str) -> list[Any]:
    """The commits since ``after`` whose summary has ``key`` = ``value`` (a job's run id), oldest first."""
    return [s for s in snapshots_after(jtable, after) if summary(s).get(key) == value]


def delete_quietly(jtable, files: list[Any]) -> None:
    """Delete files a job wrote but never committed; a file left behind is an orphan for clean, not a loss,
    so a failure here never hides the error that led to it."""
    for path in {str(f.location()) for f in files}:
        try:
            jtable.io().deleteFile(path)
        except Exception:  # noqa: BLE001 - see above
            pass


def live_delete_files(jtable, snapshot, manifest_paths: set[str] | None = None) -> Iterator[Any]:
    """The live delete files of ``snapshot`` (Java ``DeleteFile``s, each its own copy), from its delete
    manifests (only those at ``manifest_paths`` when given)."""
    manifests = snapshot.deleteManifests(jtable.io())
    wanted = (m for m in manifests if manifest_paths is None or str(m.path()) in manifest_paths)
    yield from delete_files_of(jtable, wanted)


#: Avro as Iceberg's Spark runtime carries it (relocated): its generic reader, and its records' JSON.
_AVRO = "org.apache.iceberg.shaded.org.apache.avro."
#: A manifest entry's ``status`` when the entry records a removal (0: existing, 1: added).
_DELETED_ENTRY = 2


def encrypted(jtable) -> bool:
    """Whether the table's metadata files are encrypted: then only Iceberg's own readers (which decrypt) read them."""
    return str(jtable.encryption().getClass().getName()) != "org.apache.iceberg.encryption.PlaintextEncryptionManager"


def delete_file_records(jtable, snapshot) -> list[dict[str, Any]]:
    """The live delete files of ``snapshot`` as plain values, by the manifest's own field names (``file_path``,
    ``file_format``, ``referenced_data_file``, ``content_offset``, ``record_count``; more where read from the
    manifest), for checks that only read them. Each delete manifest in one round trip (Avro's generic reader
    over the file, each entry's JSON joined in the JVM), not several per file as :func:`live_delete_files`
    takes; through that where this reading does not apply (an encrypted table, a runtime without the
    relocated Avro)."""
    texts = _delete_manifest_texts(jtable, snapshot)
    if texts is None:
        return [{"file_path": str(f.location()), "file_format": str(f.format()),
                 "referenced_data_file": None if f.referencedDataFile() is None else str(f.referencedDataFile()),
                 "content_offset": None if f.contentOffset() is None else int(f.contentOffset()),
                 "record_count": int(f.recordCount())} for f in live_delete_files(jtable, snapshot)]
    records = []
    for text in texts:
        for line in text.split("\u0000") if text else ():
            entry = json.loads(line)
            if entry["status"] != _DELETED_ENTRY:
                records.append(entry["data_file"])
    return records


def _delete_manifest_texts(jtable, snapshot) -> list[str] | None:
    """Each delete manifest's entries as Avro's JSON, NUL-joined; ``None`` where that cannot be read."""
    if encrypted(jtable):
        return None
    io = jtable.io()
    try:
        stream_of = java_class(jtable, _AVRO + "file.DataFileStream")
        generic = java_class(jtable, _AVRO + "generic.GenericDatumReader")
        joiner = java_class(jtable, "org.apache.iceberg.relocated.com.google.common.base.Joiner").on("\u0000")
        paths = [path for path, _, _ in with_paths(jtable, snapshot.deleteManifests(io))]

        def read(path: str) -> str:
            stream = stream_of(io.newInputFile(path).newStream(), generic())
            try:
                return str(joiner.join(stream))  # Avro's JSON escapes control characters: no NUL inside
            finally:
                stream.close()

        with ThreadPoolExecutor(_READING_THREADS) as pool:
            return list(pool.map(read, paths))
    except Exception as error:
        if "Py4J" not in type(error).__name__:  # py4j: no such class in this runtime
            raise
        return None


def delete_files_of(jtable, manifests: Iterable[Any]) -> Iterator[Any]:
    """The live delete files (Java ``DeleteFile``s, each its own copy) of the delete ``manifests``."""
    io, specs = jtable.io(), jtable.specs()
    readers = java_class(jtable, "org.apache.iceberg.ManifestFiles")
    for manifest in manifests:
        reader = readers.readDeleteManifest(manifest, io, specs)
        try:
            files = reader.iterator()  # live entries only
            while files.hasNext():
                yield files.next().copy()
        finally:
            reader.close()


def applied_delete_files(jtable, snapshot_id: int) -> set[tuple[str, int | None]]:
    """(location, content offset) of every delete file Iceberg's own planner attaches to a live data file
    of the snapshot: the deletes some reader applies. In two round trips (Iceberg's JSON of the scan
    tasks, which lists each delete file once), not several per data file."""
    tasks = jtable.newScan().useSnapshot(snapshot_id).planFiles()
    try:
        planned = java_class(jtable, "org.apache.iceberg.relocated.com.google.common.collect.Lists").newArrayList(tasks)
    finally:
        tasks.close()
    deletes = scan_tasks_document(jtable, planned).get("delete-files") or []
    return {(d["file-path"], d.get("content-offset")) for d in deletes}


def scan_tasks_document(jtable, tasks) -> dict[str, Any]:
    """File scan tasks (a Java collection) as Iceberg's own JSON, in one round trip: ``file-scan-tasks``
    (each with its ``data-file`` and the indexes of its ``delete-file-references``) and ``delete-files``."""
    responses = "org.apache.iceberg.rest.responses."
    response = java_class(jtable, responses + "FetchScanTasksResponse").builder(jtable.specs()).withFileScanTasks(
        tasks).build()
    return json.loads(str(java_class(jtable, responses + "FetchScanTasksResponseParser").toJson(response)))


def summary(snapshot) -> dict[str, str]:
    return string_map(snapshot.summary())


def java_class(anchor, name: str):
    """The Java class ``name`` on the JVM of ``anchor`` (a Java object, or :func:`gateway`), without
    py4j's lookups: ``jvm.org.apache...`` asks the JVM about each package on the way, each a failed
    class search through the whole class path (some 300 jars)."""
    from py4j.java_gateway import JavaClass  # type: ignore[import-untyped]

    return JavaClass(name, anchor._gateway_client)


def recorder(anchor):
    """A Java ``Consumer<String>`` that keeps what it is given, in order (a ``Stream.Builder``: no py4j
    callback). Not thread-safe: for Iceberg code that calls it on the caller's thread."""
    return java_class(anchor, "java.util.stream.Stream").builder()


def recorded(anchor, kept) -> list[str]:
    """What :func:`recorder` ``kept`` was given, in one round trip."""
    return strings(kept.build().collect(java_class(anchor, "java.util.stream.Collectors").toList()))


#: Python threads that have Iceberg read manifest lists and manifests: each calls through its own py4j
#: connection and Java thread, so the JVM decodes on every core while a thread waits for its answer.
_READING_THREADS = 4
#: Manifests one thread hands Iceberg at a time.
_MANIFESTS_PER_CALL = 256


def manifests_of(jtable, snapshots: Iterable[Any], *, detached: bool = False) -> Any:
    """Every manifest ``snapshots`` list, each once though every later snapshot lists it: a Java set of
    ``ManifestFile``.

    ``detached``: read each manifest list through a copy of its snapshot (Iceberg's own JSON of it). A
    snapshot keeps the manifests it read for its life, and the table's snapshots live as long as the
    table: a history of n commits of one manifest each would hold n²/2 manifest entries (about 500,000
    at 1,000 commits, a 1 GB driver's heap); the copies are dropped as soon as they are read."""
    io = jtable.io()
    unique = java_class(jtable, "java.util.concurrent.ConcurrentHashMap").newKeySet()
    parser = java_class(jtable, "org.apache.iceberg.SnapshotParser")

    def add(snapshot) -> None:
        unique.addAll((parser.fromJson(parser.toJson(snapshot)) if detached else snapshot).allManifests(io))

    with ThreadPoolExecutor(_READING_THREADS) as pool:
        list(pool.map(add, snapshots))
    return unique


def all_manifests(jtable) -> Any:
    """Every manifest some snapshot of the table lists, each once: a Java set of ``ManifestFile``.

    Each manifest list is read by Iceberg's own reader (``InternalData``, as ``ManifestLists`` reads it)
    without the manifests' partition summaries, most of a list's entry and nothing a reader of the
    manifest needs, and without keeping it on the snapshot (:func:`manifests_of`'s ``detached``): half
    the time of reading whole lists on the whole-run benchmark's 986 lists. Lists on the reading threads.
    An encrypted table, or one with a snapshot that has no manifest list (format v1's oldest), is read
    through copies of its snapshots."""
    snapshots = jtable.snapshots()
    lists = strings(java_class(jtable, "org.apache.iceberg.ReachableFileUtil").manifestListLocations(jtable))
    if encrypted(jtable) or len(lists) != snapshots.size():
        return manifests_of(jtable, [snapshots.get(i) for i in range(snapshots.size())], detached=True)
    manifest = java_class(jtable, "org.apache.iceberg.ManifestFile")
    types = java_class(jtable, "org.apache.iceberg.types.TypeUtil")
    summaries = java_class(jtable, "java.util.HashSet")(types.getProjectedIds(manifest.PARTITION_SUMMARIES.type()))
    summaries.add(manifest.PARTITION_SUMMARIES.fieldId())  # the field and every field inside it
    schema = types.selectNot(manifest.schema(), summaries)
    loader = jtable.getClass().getClassLoader()
    generic = java_class(jtable, "java.lang.Class").forName("org.apache.iceberg.GenericManifestFile", True, loader)
    avro, io = java_class(jtable, "org.apache.iceberg.FileFormat").AVRO, jtable.io()
    read = java_class(jtable, "org.apache.iceberg.InternalData").read
    unique = java_class(jtable, "java.util.concurrent.ConcurrentHashMap").newKeySet()
    add_all = java_class(jtable, "org.apache.iceberg.relocated.com.google.common.collect.Iterables").addAll

    def add(location: str) -> None:
        entries = read(avro, io.newInputFile(location)).project(schema).setRootType(generic).build()
        try:
            add_all(unique, entries)
        finally:
            entries.close()

    with ThreadPoolExecutor(_READING_THREADS) as pool:
        list(pool.map(add, lists))
    return unique


#: ``ManifestContent.id()`` of a data manifest (1: delete files).
DATA_MANIFEST = 0


def with_paths(jtable, manifests) -> list[tuple[str, int, Any]]:
    """(path, content ID, the ``ManifestFile``) of each of ``manifests``, a Java collection."""
    listed = java_class(jtable, "org.apache.iceberg.relocated.com.google.common.collect.Lists").newArrayList(manifests)
    found = []
    for index in range(listed.size()):
        manifest = listed.get(index)
        found.append((str(manifest.path()), int(manifest.content().id()), manifest))
    return found


def manifest_contents(jtable, manifests, *, by_content: bool = True) -> tuple[list[str], dict[str, list[str]]]:
    """The paths of ``manifests`` (a Java collection of ``ManifestFile``), and of the live files they list:
    ``{"data": [...], "deletes": [...]}``, or with ``by_content=False`` all of them as ``{"live": [...]}``
    (two py4j round trips less per manifest: its content is not asked).

    Iceberg reads a batch of manifests one after another inside one call (``ManifestFiles.readPaths`` of
    each, concatenated; a manifest costs a few round trips, not one per file it lists), batches side by
    side on the reading threads."""
    io, specs = jtable.io(), jtable.specs()
    read = java_class(jtable, "org.apache.iceberg.ManifestFiles")
    concat = java_class(jtable, "org.apache.iceberg.io.CloseableIterable").concat
    lists = java_class(jtable, "org.apache.iceberg.relocated.com.google.common.collect.Lists")
    listed = lists.newArrayList(manifests)
    size = listed.size()

    def batch(start: int) -> tuple[list[str], dict[str, list[str]]]:
        sub = listed.subList(start, min(start + _MANIFESTS_PER_CALL, size))
        readers = {kind: java_class(jtable, "java.util.ArrayList")()
                   for kind in (("data", "deletes") if by_content else ("live",))}
        paths = []
        for index in range(sub.size()):
            manifest = sub.get(index)
            paths.append(str(manifest.path()))
            kind = ("data" if int(manifest.content().id()) == DATA_MANIFEST else "deletes") if by_content else "live"
            readers[kind].add(read.readPaths(manifest, io, specs))  # opened when the concatenation reaches it
        found = {}
        for kind, kind_readers in readers.items():
            files = concat(kind_readers)
            try:
                found[kind] = strings(files)
            finally:
                files.close()
        return paths, found

    manifest_paths: list[str] = []
    files: dict[str, list[str]] = {}
    with ThreadPoolExecutor(_READING_THREADS) as pool:
        for paths, found in pool.map(batch, range(0, size, _MANIFESTS_PER_CALL)):
            manifest_paths += paths
            for kind, kind_files in found.items():
                files.setdefault(kind, []).extend(kind_files)
    return manifest_paths, files


def implements(obj, interface: str) -> bool:
    """Whether Java object ``obj`` implements ``interface``, looked up in the loader that loaded ``obj``'s
    class (Iceberg's classes live in Spark's loader under spark-submit, not the system one)."""
    loaded = java_class(obj, "java.lang.Class").forName(interface, True, obj.getClass().getClassLoader())
    return bool(loaded.isInstance(obj))


def string_map(java_map) -> dict[str, str]:
    """A Java ``Map`` of strings as a dict, in one round trip (Iceberg's JSON): iterated over py4j it
    costs two per entry, and under PySpark the iterator's end is an exception inspected in 70 more."""
    mapper = java_class(java_map, "org.apache.iceberg.util.JsonUtil").mapper()
    return json.loads(str(mapper.writeValueAsString(java_map)))


def rewrite_group_namer(spark, jtable):
    """``name(spec_id, partition) -> path``: the rewrite file group a data file belongs to.

    The one owner of partition identity in the rewrite job. Iceberg's rewrite planner groups
    files by the *current* spec: a file of the current spec by its own partition, a file of
    any older spec under the current spec's all-null partition (``ts_hour=null/...``), since
    its rows may belong to several current partitions. Naming the files a commit removed any
    other way (by their own spec) never matches the groups. The all-null path is computed
    once: this runs once per rewritten file.
    """
    spec = jtable.spec()
    current = int(spec.specId())
    if spec.isUnpartitioned():
        return lambda spec_id, partition: ""
    empty = java_class(jtable, "org.apache.iceberg.data.GenericRecord").create(spec.partitionType())
    all_null = str(spec.partitionToPath(empty))

    def name(spec_id: int, partition) -> str:
        return str(spec.partitionToPath(partition)) if int(spec_id) == current else all_null

    return name


def strings(java_strings) -> list[str]:
    """A Java ``Iterable`` of strings as a Python list, in one round trip (iterating it over py4j
    costs two per element): joined in the JVM on a character no path holds, split here."""
    joined = str(java_class(java_strings, "java.lang.String").join("\u0000", java_strings))
    return joined.split("\u0000") if joined else []


def java_map(spark, values: dict[str, str]):
    """A Java ``HashMap`` of ``values`` (as strings), for Iceberg's options and snapshot properties."""
    mapping = java_class(gateway(spark), "java.util.HashMap")()
    for key, value in values.items():
        mapping.put(key, str(value))
    return mapping


def bin_pack_groups(spark, jtable, expression, start_snapshot_id: int, options: dict[str, str]) -> list[Any]:
    """The file groups Iceberg's ``BinPackRewriteFilePlanner`` makes from ``start_snapshot_id`` with
    ``options`` (those it takes; the others are left out): the groups the Spark action rewrites."""
    if expression is None:
        expression = java_class(jtable, "org.apache.iceberg.expressions.Expressions").alwaysTrue()
    planner = java_class(jtable, "org.apache.iceberg.actions.BinPackRewriteFilePlanner")(
        jtable, expression, start_snapshot_id, True)
    valid = set(strings(planner.validOptions()))
    planner.init(java_map(spark, {k: v for k, v in options.items() if k in valid}))
    groups = []
    planned = planner.plan().groups()
    try:
        iterator = planned.iterator()
        while iterator.hasNext():
            groups.append(iterator.next())
    finally:
        planned.close()
    return groups


def java_array(spark, element_type: str, values: list[Any]):
    """A Java array of ``element_type`` (``"long"``, ``"java.lang.String"``): py4j hands a Python list
    over as a ``List``, and small ints as ``Integer`` where Iceberg wants ``long``."""
    py4j = gateway(spark)
    array = py4j.new_array(java_class(py4j, element_type), len(values))
    for index, value in enumerate(values):
        array[index] = value
    return array


def with_properties(action, properties: dict[str, str]):
    for key, value in properties.items():
        action = action.snapshotProperty(key, str(value))
    return action


def file_factory(spark, jtable, file_format: str, operation_id: str):
    """Iceberg's ``OutputFileFactory`` for the delete files a job writes (``PARQUET`` or ``PUFFIN``), named by
    the job's ``operation_id``."""
    jvm = spark.sparkContext._jvm
    return (jvm.org.apache.iceberg.io.OutputFileFactory.builderFor(jtable, 0, 0)
            .format(getattr(jvm.org.apache.iceberg.FileFormat, file_format))
            .operationId(operation_id).suffix("deletes").build())


class _NoPreviousDeletes:
    """``java.util.function.Function<String, PositionDeleteIndex>`` answering null (py4j callback).

    The positions a job writes already include what a file's old deletion vector deleted, so the DV
    writer must not merge it again; the old DV is removed in the same commit instead.
    """

    def apply(self, path):
        return None

    class Java:
        implements = ["java.util.function.Function"]


def deletion_vector_writer(spark, jtable, operation_id: str):
    """Iceberg's ``BaseDVFileWriter`` (one Puffin file, one DV per data file), merging no earlier DV."""
    from pyspark.java_gateway import ensure_callback_server_started

    ensure_callback_server_started(spark.sparkContext._gateway)
    return spark.sparkContext._jvm.org.apache.iceberg.deletes.BaseDVFileWriter(
        file_factory(spark, jtable, "PUFFIN", operation_id), _NoPreviousDeletes())
