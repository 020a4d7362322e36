"""The restore job: move one quarantine run's files back where the clean step found them.

Args: :class:`~airflow_lake_provider.core.contracts.RestoreQuarantineJobArgs`; result:
:class:`~airflow_lake_provider.core.contracts.RestoreQuarantineResult`.

Every file of the run's manifest goes back to its exact original path, unless that path exists
again (nothing is ever overwritten) or the file is not in quarantine (the clean job stopped
before moving it, or it was restored already): those are skipped, each with its reason, so the
job can be run again safely. A restored file gets the current time as its modification time on
the local file system (an object store's copy already has it), so the next clean leaves it a
whole orphan floor's time: the writer it belongs to gets a chance to commit it. Without a run,
the job lists the table's runs and restores nothing.
"""

from __future__ import annotations

import time
from typing import Any

from airflow_lake_provider.core.contracts import RestoreQuarantineJobArgs, RestoreQuarantineResult
from airflow_lake_provider.core.quarantine import manifest_location, quarantine_root, run_reference
from airflow_lake_provider.exceptions import LakeConfigError
from airflow_lake_provider.jobs import iceberg
from airflow_lake_provider.jobs.quarantine import Storage, each_in_parallel, list_runs, read_manifest

NOT_OVERWRITTEN = "the original path exists again: left in quarantine, nothing overwritten"
NOT_IN_QUARANTINE = "not in quarantine: the clean job stopped before moving it, or it was restored already"


def run(spark, catalog: str, raw_args: dict[str, Any]) -> dict[str, Any]:
    args = RestoreQuarantineJobArgs.from_json(raw_args).validate()
    storage = Storage(spark)
    if args.quarantine_run is None:
        root = _root(spark, catalog, args)
        runs = {key: ({"moved_at": m.moved_at, "files": len(m.files), "manifest": manifest_location(root, key),
                       "airflow_run": m.airflow_run.to_json() if m.airflow_run else None} if m else
                      {"manifest": None}) for key, m in list_runs(storage, root).items()}
        return RestoreQuarantineResult(table=args.table, runs=runs).to_json()

    key, manifest_uri = run_reference(args.quarantine_run)
    if manifest_uri is None:
        manifest_uri = manifest_location(_root(spark, catalog, args), key)
    manifest = read_manifest(storage, manifest_uri)
    if manifest is None:
        raise LakeConfigError(f"No quarantine manifest of run {key} at {manifest_uri}: check quarantine_run and "
                              f"quarantine_location (the clean step's).")
    if manifest.table != args.table:
        raise LakeConfigError(f"Quarantine run {key} belongs to table {manifest.table}, not {args.table}.")
    now_ms = int(time.time() * 1000)

    def restore(entry) -> str | None:
        """Why ``entry`` stays where it is, or ``None`` once it is back."""
        if storage.exists(entry.original_path):
            return NOT_OVERWRITTEN
        if not storage.exists(entry.quarantined_path):
            return NOT_IN_QUARANTINE
        storage.move(entry.quarantined_path, entry.original_path, target_checked=True)  # checked just above
        storage.touch(entry.original_path, now_ms)
        return None

    outcomes = each_in_parallel(restore, manifest.files)
    restored = [entry.original_path for entry, why in zip(manifest.files, outcomes, strict=True) if why is None]
    skipped = {entry.original_path: why for entry, why in zip(manifest.files, outcomes, strict=True) if why is not None}
    return RestoreQuarantineResult(
        table=args.table, quarantine_run=key, quarantine_manifest=manifest_uri,
        restored=restored[:RestoreQuarantineResult.RESTORED_LISTED], restored_count=len(restored),
        skipped=dict(list(skipped.items())[:RestoreQuarantineResult.RESTORED_LISTED]), skipped_count=len(skipped),
    ).to_json()


def _root(spark, catalog: str, args: RestoreQuarantineJobArgs) -> str:
    location = str(iceberg.load_table(spark, catalog, args.table).location())
    return quarantine_root(location, args.table, args.quarantine_location)
