"""What the orphan scan found but must never be taken: files something else still names.

Iceberg's ``DeleteOrphanFiles`` knows only the table it scans. Before the clean step takes a
candidate, :func:`never_orphans` names the candidates that are still referenced elsewhere:

* by another table of the catalog (tables made by ``snapshot``, ``register_table``, ``add_files``
  or copied with ``rewrite_table_path`` share files): anything reachable from any of its
  snapshots, tags or branches (data and delete files, deletion vectors, manifests, manifest
  lists), its current metadata file and metadata log, its statistics and partition-statistics files;
* by the table itself beyond what the action counts: the current metadata file and the metadata
  log, statistics (Puffin) and partition-statistics files, the version hint. Iceberg 1.10's action
  already treats these as reachable; the check is kept anyway (belt and braces: an earlier
  Iceberg, or another engine's cleaner, took statistics files for orphans, Amoro #1959).

The other tables' files are read as the orphan listing reads the table's own
(``jobs/orphan_listing.py``: in the driver's JVM, no Spark application), except a table large
enough for Spark's executors (``iceberg.needs_the_spark_action``): for those Spark reads the
``all_files`` and ``all_manifests`` metadata tables and keeps the rows whose file name is a
candidate's, so the driver receives a handful of rows (one Spark job per :data:`TABLES_PER_JOB`
tables). The metadata files and statistics of each table are in its metadata, which loading it
already read.

A table (or namespace) that cannot be read leaves the answer unknown: then no candidate is
taken, each kept with a sentence naming what could not be read (conservative: a dropped-
meanwhile or unreadable table must not let the check pass silently). Tables created after the
check started are not seen; the orphan floor (files younger than it are never candidates) is
what covers a copy made during the run.
"""

from __future__ import annotations

from airflow_lake_provider.core.orphan_guard import (
    CONTENT_KINDS,
    CandidateIndex,
    own_table_guard,
    referenced_by,
    unchecked,
    unknown_namespace,
)
from airflow_lake_provider.jobs.iceberg import gateway, iceberg_catalog, java_array, java_class, needs_the_spark_action
from airflow_lake_provider.jobs.orphan_listing import reachable_files


def never_orphans(spark, catalog: str, jtable, candidates: list[str], *,
                  reference_namespaces: list[str] | None = None) -> dict[str, str]:
    """Of ``candidates``, those that must not be taken, each with the reason (one sentence).

    ``reference_namespaces``: the namespaces whose tables (and nested namespaces' tables) are
    checked for references (``None``: every namespace of the catalog; ``[]``: no other table).
    """
    if not candidates:
        return {}
    kept = own_files(jtable, candidates)
    rest = [path for path in candidates if path not in kept]
    if rest:
        for path, reason in other_tables_references(spark, catalog, jtable, rest, reference_namespaces).items():
            kept.setdefault(path, reason)
    return kept


def own_files(jtable, candidates: list[str]) -> dict[str, str]:
    """The table's own metadata files, statistics and version hint among ``candidates``."""
    jtable.refresh()
    metadata = jtable.operations().current()
    return own_table_guard(
        candidates,
        current_metadata=str(metadata.metadataFileLocation()),
        metadata_log=[str(entry.file()) for entry in metadata.previousFiles()],
        statistics={str(f.path()): int(f.snapshotId()) for f in jtable.statisticsFiles()},
        partition_statistics={str(f.path()): int(f.snapshotId()) for f in jtable.partitionStatisticsFiles()},
    )


def other_tables_references(spark, catalog: str, jtable, candidates: list[str],
                            reference_namespaces: list[str] | None) -> dict[str, str]:
    """The candidates other tables of ``reference_namespaces`` reference (see :func:`never_orphans`)."""
    index = CandidateIndex(candidates)
    kept: dict[str, str] = {}
    icatalog = iceberg_catalog(spark, catalog)
    namespaces, refusal = _namespaces(spark, icatalog, catalog, reference_namespaces)
    tables = []
    for namespace in namespaces if refusal is None else ():
        try:
            identifiers = list(icatalog.listTables(namespace))
        except Exception as error:  # noqa: BLE001 - any failure leaves the answer unknown
            refusal = unchecked(f"namespace {namespace}", _message(error))
            break
        # The table itself is skipped by name (a name spelt otherwise only costs a needless read:
        # its own live files are never candidates).
        tables += [ident for ident in identifiers if f"{catalog}.{ident}" != str(jtable.name())]

    by_spark = []
    for ident in tables if refusal is None else ():
        try:
            other = icatalog.loadTable(ident)
            _match_metadata(other, str(ident), index, kept)
            if needs_the_spark_action(spark, other):
                by_spark.append(ident)
            else:
                _match_files(reachable_files(other), str(ident), index, kept)
        except Exception as error:  # noqa: BLE001
            refusal = unchecked(f"table {ident}", _message(error))
            break
    if refusal is None and by_spark:
        refusal = _match_content(spark, catalog, by_spark, index, kept)
    if refusal is not None:
        for path in candidates:
            kept.setdefault(path, refusal)
    return kept


def _namespaces(spark, icatalog, catalog: str, listed: list[str] | None):
    """The namespaces to check, nested ones included, and a refusal sentence if one is unknown."""
    Namespace = java_class(gateway(spark), "org.apache.iceberg.catalog.Namespace")
    queue = [Namespace.empty()] if listed is None else []  # None: from the catalog's root
    found, seen = [], set()
    try:
        for name in listed or ():
            namespace = Namespace.of(java_array(spark, "java.lang.String", name.split(".")))
            if not icatalog.namespaceExists(namespace):
                return [], unknown_namespace(name, catalog)
            queue.append(namespace)
        while queue:
            namespace = queue.pop()
            if str(namespace) in seen:
                continue
            seen.add(str(namespace))
            if not namespace.isEmpty():
                found.append(namespace)
            queue += list(icatalog.listNamespaces(namespace))
    except Exception as error:  # noqa: BLE001
        return [], unchecked(f"the namespaces of catalog {catalog}", _message(error))
    return found, None


def _match_metadata(other, name: str, index: CandidateIndex, kept: dict[str, str]) -> None:
    """Candidates among ``other``'s metadata files, manifest lists and statistics (all in its metadata)."""
    metadata = other.operations().current()
    references = [(str(metadata.metadataFileLocation()), "metadata")]
    references += [(str(entry.file()), "metadata") for entry in metadata.previousFiles()]
    references += [(str(snapshot.manifestListLocation()), "manifest_list") for snapshot in other.snapshots()]
    references += [(str(f.path()), "statistics") for f in other.statisticsFiles()]
    references += [(str(f.path()), "partition_statistics") for f in other.partitionStatisticsFiles()]
    for path, kind in references:
        for candidate in index.match(path):
            kept.setdefault(candidate, referenced_by(name, kind))


def _match_files(files: dict[str, str], name: str, index: CandidateIndex, kept: dict[str, str]) -> None:
    """Candidates among ``files`` (location -> kind) of table ``name``."""
    for path, kind in files.items():
        for candidate in index.match(path):
            kept.setdefault(candidate, referenced_by(name, kind))


def _message(error: Exception) -> str:
    """The Java exception behind a py4j error (its own message only says which call failed)."""
    java = getattr(error, "java_exception", None)
    return str(java.toString()) if java is not None else str(error)


def _quoted(catalog: str, ident, metadata_table: str) -> str:
    parts = [catalog, *[str(level) for level in ident.namespace().levels()], str(ident.name()), metadata_table]
    return ".".join("`" + part.replace("`", "``") + "`" for part in parts)


def _content_references(spark, catalog: str, idents):
    """One DataFrame (table, kind, path, name) over the ``all_files`` and ``all_manifests`` of ``idents``."""
    from pyspark.sql import functions as F

    frames = []
    for ident in idents:
        name = F.lit(str(ident))
        files = spark.table(_quoted(catalog, ident, "all_files"))
        kind = F.coalesce(*[F.when(files.content == code, F.lit(kind)) for code, kind in CONTENT_KINDS.items()],
                          F.lit("data"))
        frames.append(files.select(name.alias("table"), kind.alias("kind"), files.file_path.alias("path")))
        manifests = spark.table(_quoted(catalog, ident, "all_manifests"))
        frames.append(manifests.select(name.alias("table"), F.lit("manifest").alias("kind"),
                                       manifests.path.alias("path")))
    union = frames[0]
    for frame in frames[1:]:
        union = union.unionByName(frame)
    return union.withColumn("name", F.element_at(F.split("path", "/"), -1))


def _collect_matches(spark, catalog: str, idents, index: CandidateIndex):
    from pyspark.sql import functions as F

    names = spark.createDataFrame([(name,) for name in index.names()], "name string")
    rows = (_content_references(spark, catalog, idents).join(F.broadcast(names), on="name", how="left_semi")
            .select("table", "kind", "path").distinct().collect())
    return [(row["table"], row["kind"], row["path"]) for row in rows]


#: Tables read per Spark job: a union of thousands of metadata-table scans would take Spark's
#: analyser longer than the scans themselves.
TABLES_PER_JOB = 50


def _match_content(spark, catalog: str, idents, index: CandidateIndex, kept: dict[str, str]) -> str | None:
    """Candidates among the other tables' data and delete files and manifests, of every snapshot.

    One Spark job per :data:`TABLES_PER_JOB` tables; if one fails, one per table, to name the
    table that cannot be read. Returns the refusal sentence, or ``None`` when every table was read.
    """
    matches = []
    for start in range(0, len(idents), TABLES_PER_JOB):
        chunk = idents[start:start + TABLES_PER_JOB]
        try:
            matches += _collect_matches(spark, catalog, chunk, index)
        except Exception:  # noqa: BLE001 - find which table
            for ident in chunk:
                try:
                    matches += _collect_matches(spark, catalog, [ident], index)
                except Exception as error:  # noqa: BLE001
                    return unchecked(f"table {ident}", _message(error))
    for table, kind, path in matches:
        for candidate in index.match(path):
            kept.setdefault(candidate, referenced_by(table, kind))
    return None
