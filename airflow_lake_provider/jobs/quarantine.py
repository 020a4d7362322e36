"""The quarantine's storage side: moving, listing and purging files through Hadoop's FileSystem.

The clean job moves orphans into a table's quarantine and purges runs past their days; the
restore job moves a run's files back. Both go through the Hadoop ``FileSystem`` of the Spark
driver, the one the table's own ``HadoopFileIO`` uses, so whatever store holds the table
(``file:``, ``s3a://`` or ``s3://`` served by S3A, ...) holds its quarantine too, with the same
credentials. On an object store a move is a copy then a delete (a file's modification time is
therefore kept in the manifest, read before the move). On the local file system Hadoop's
checksum side files (``.NAME.crc``) move with their file, so none is left behind. Every decision
(where, which runs) is :mod:`airflow_lake_provider.core.quarantine`'s.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar
from urllib.parse import urlsplit

from airflow_lake_provider.core.quarantine import (
    FILES_DIR_NAME,
    QuarantinedFile,
    QuarantineManifest,
    access_denied,
    is_run_key,
    manifest_location,
    quarantined_path,
    run_directory,
    run_key,
    runs_to_purge,
)
from airflow_lake_provider.exceptions import LakeConfigError
from airflow_lake_provider.jobs.session import hadoop_configuration

T = TypeVar("T")
R = TypeVar("R")

# A move or a status read on an object store waits on a few requests of a few milliseconds each
# (1,000 orphans moved one after the other added about 5 s to a clean task on S3); py4j gives each Python thread
# its own connection to the driver and Hadoop's file systems are thread-safe, so they overlap.
PARALLEL_REQUESTS = 16


def each_in_parallel(fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
    """``[fn(item) for item in items]`` on up to ``PARALLEL_REQUESTS`` threads, results in order.

    The first error is raised once the calls already running have ended; calls not yet started
    never start (a move half done is what the quarantine manifest, written first, is for).
    """
    if len(items) <= 1:
        return [fn(item) for item in items]
    pool = ThreadPoolExecutor(min(PARALLEL_REQUESTS, len(items)), thread_name_prefix="lake-storage")
    futures = [pool.submit(fn, item) for item in items]
    try:
        return [future.result() for future in futures]
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


class Storage:
    """Hadoop's ``FileSystem`` by URI, on the driver (py4j).

    Every py4j call is a round trip to the JVM (a fraction of a millisecond, more under load): the
    ``Path`` class and each file system (one per scheme and authority) are looked up once, and a
    file's status is one call, so moving 1,000 orphans costs a few thousand round trips, not tens
    of thousands.
    """

    def __init__(self, spark) -> None:
        self._jvm = spark._jvm  # a DeferredSparkSession's, without starting Spark
        self._conf = hadoop_configuration(spark)
        self._path_class = self._jvm.org.apache.hadoop.fs.Path  # each lookup through the JVM view is a round trip
        self._file_systems: dict[str, tuple[Any, str]] = {}  # "scheme://authority" -> (FileSystem, its scheme)

    def _resolve(self, uri: str) -> tuple[Any, Any, str, str]:
        """``(Path, FileSystem, "scheme://authority", the file system's scheme)`` of ``uri``."""
        path = self._path_class(uri)
        split = urlsplit(uri)
        store = f"{split.scheme}://{split.netloc}"
        known = self._file_systems.get(store)
        if known is None:
            fs = path.getFileSystem(self._conf)
            known = self._file_systems.setdefault(store, (fs, str(fs.getScheme())))
        return path, known[0], store, known[1]

    def _located(self, uri: str) -> tuple[Any, Any]:
        """``(Path, FileSystem)`` of ``uri``."""
        path, fs, _, _ = self._resolve(uri)
        return path, fs

    def status(self, uri: str) -> tuple[int, int] | None:
        """``(size, modification time in epoch ms)``, or ``None`` when there is no such file."""
        path, fs = self._located(uri)
        try:
            status = fs.getFileStatus(path)
        except Exception as error:  # py4j's error for java.io.FileNotFoundException: no such file
            if "java.io.FileNotFoundException" in str(error):
                return None
            raise
        return int(status.getLen()), int(status.getModificationTime())

    def exists(self, uri: str) -> bool:
        path, fs = self._located(uri)
        return bool(fs.exists(path))

    def move(self, source: str, target: str, *, target_checked: bool = False) -> None:
        """Move one file; refuses to replace an existing one (``target_checked``: the caller has
        made sure, e.g. the target's directory is new). The local file system needs the target's
        directory first (an object store has none to make); another store or bucket gets a copy then a delete."""
        src, src_fs, src_store, _ = self._resolve(source)
        dst, dst_fs, dst_store, dst_scheme = self._resolve(target)
        if not target_checked and dst_fs.exists(dst):
            raise FileExistsError(f"Will not move {source} over the existing {target}.")
        if dst_scheme == "file":
            dst_fs.mkdirs(dst.getParent())
        if src_store == dst_store:
            moved = src_fs.rename(src, dst)
        else:
            moved = self._jvm.org.apache.hadoop.fs.FileUtil.copy(src_fs, src, dst_fs, dst, True, self._conf)
        if not moved:
            raise OSError(f"Could not move {source} to {target}.")

    def touch(self, uri: str, when_ms: int) -> None:
        """Set a file's modification time (a no-op on object stores, where a copy already made it new)."""
        path, fs = self._located(uri)
        fs.setTimes(path, when_ms, -1)

    def write_text(self, uri: str, text: str) -> None:
        """Write ``uri`` whole or not at all: a temporary file first, then a move to its name."""
        temporary = f"{uri}.tmp"
        path, fs = self._located(temporary)
        out = fs.create(path, True)
        try:
            out.write(bytearray(text.encode("utf-8")))
        finally:
            out.close()
        self.move(temporary, uri)

    def read_text(self, uri: str) -> str | None:
        """The file's text, or ``None`` when it does not exist.

        Read past Hadoop's checksum layer on the local file system: a manifest someone edited by
        hand (its ``.crc`` side file then stale) still reads.
        """
        path, fs = self._located(uri)
        if not fs.exists(path):
            return None
        if self._jvm.java.lang.Class.forName("org.apache.hadoop.fs.ChecksumFileSystem").isInstance(fs):
            fs = fs.getRawFileSystem()
        stream = fs.open(path)
        try:
            return str(self._jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8"))
        finally:
            stream.close()

    def directories(self, uri: str) -> list[str]:
        """Names of the directories directly under ``uri`` (none when it does not exist)."""
        path, fs = self._located(uri)
        if not fs.exists(path):
            return []
        return sorted(str(s.getPath().getName()) for s in fs.listStatus(path) if s.isDirectory())

    def count_files(self, uri: str) -> int:
        """Files under ``uri``, recursively (checksum side files not counted)."""
        path, fs = self._located(uri)
        if not fs.exists(path):
            return 0
        listing, count = fs.listFiles(path, True), 0
        while listing.hasNext():
            listing.next()
            count += 1
        return count

    def delete_tree(self, uri: str) -> None:
        path, fs = self._located(uri)
        fs.delete(path, True)


def read_manifest(storage: Storage, uri: str) -> QuarantineManifest | None:
    """The manifest at ``uri``; ``None`` when it is missing or unreadable (a job killed while writing it)."""
    text = storage.read_text(uri)
    if text is None:
        return None
    try:
        return QuarantineManifest.from_json(json.loads(text))
    except (ValueError, LakeConfigError):
        return None


def list_runs(storage: Storage, root: str) -> dict[str, QuarantineManifest | None]:
    """The runs under a table's quarantine root, by key, each with its manifest (``None``: none readable)."""
    return {key: read_manifest(storage, manifest_location(root, key))
            for key in storage.directories(root) if is_run_key(key)}


def no_hadoop_file_system(error: Exception) -> bool:
    """Whether Hadoop has no file system for the path's scheme: the table is read through a FileIO of
    Iceberg's own (``S3FileIO``) and S3A is not configured, so nothing reaches the store through Hadoop."""
    return "No FileSystem for scheme" in str(error)


def purge(storage: Storage, root: str, quarantine_days: float, *, dry_run: bool,
          default_root: bool = False) -> tuple[list[str], int]:
    """Delete the runs past ``quarantine_days`` (dry run: only name them): ``(run keys, files in them)``.

    ``default_root``: the root beside the table, not one the user chose. A store may refuse even
    to list it (a table bucket such as S3 Tables answers 403 for keys that are not table files):
    then nothing can have been quarantined there, and the purge has nothing to do. The same holds
    when Hadoop has no file system for the root's scheme: quarantines are moved through Hadoop.
    """
    try:
        runs = list_runs(storage, root)
    except Exception as error:
        if not (default_root and (access_denied(error) or no_hadoop_file_system(error))):
            raise
        why = "access denied" if access_denied(error) else "no Hadoop file system for it"
        print(f"Quarantine root {root} cannot be listed ({why}): nothing to purge there.", file=sys.stderr)
        return [], 0
    due = runs_to_purge({key: m.moved_at_ms if m else None for key, m in runs.items()}, quarantine_days,
                        int(time.time() * 1000))
    files = 0
    for key in due:
        files += storage.count_files(f"{run_directory(root, key)}/{FILES_DIR_NAME}")
        if not dry_run:
            storage.delete_tree(run_directory(root, key))
    return due, files


def quarantine(storage: Storage, *, root: str, table: str, table_location: str, paths: list[str],
               airflow_run) -> QuarantineManifest | None:
    """Move ``paths`` into a new run of the table's quarantine; its manifest (or ``None``: nothing moved).

    The manifest lists every file, with its size and modification time, before the first one
    moves: a job killed half way leaves a manifest naming each file it may have moved, and the
    restore skips those still at their original path. A file gone since the listing is left out.
    """
    now_ms = int(time.time() * 1000)
    key = run_key(now_ms, airflow_run)
    files = [QuarantinedFile(original_path=path, size=status[0], modified_ms=status[1],
                             quarantined_path=quarantined_path(root, key, table_location, path))
             for path, status in zip(paths, each_in_parallel(storage.status, paths), strict=True) if status is not None]
    if not files:
        return None
    if storage.exists(run_directory(root, key)):  # its files cannot exist either: the moves need not check each
        raise FileExistsError(f"Quarantine run {key} already exists under {root}; nothing was moved.")
    manifest = QuarantineManifest.new(table=table, table_location=table_location, run_key=key, moved_at_ms=now_ms,
                                      airflow_run=airflow_run, files=files)
    try:
        storage.write_text(manifest_location(root, key), json.dumps(manifest.to_json(), indent=1))
    except Exception as error:
        if not access_denied(error):
            raise
        raise LakeConfigError(
            f"The store refuses the quarantine manifest at {manifest_location(root, key)} (access denied; a table "
            f"bucket such as S3 Tables takes table files only). No orphan was moved. Set quarantine_location to a "
            f"location the Spark job can write, or quarantine_days=0 to delete orphans at once.") from None
    each_in_parallel(lambda entry: storage.move(entry.original_path, entry.quarantined_path, target_checked=True),
                     files)
    return manifest
