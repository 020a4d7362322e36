"""The restore step: one clean run's quarantined files moved back to their exact original paths."""

from __future__ import annotations

import dataclasses
import json
from typing import ClassVar

from airflow_lake_provider.core import step_names as names
from airflow_lake_provider.core.contracts import AirflowRun, RestoreQuarantineJobArgs, RestoreQuarantineResult
from airflow_lake_provider.core.quarantine import quarantine_root, run_reference
from airflow_lake_provider.core.settings import setting
from airflow_lake_provider.core.snapshots import table_state
from airflow_lake_provider.steps.base import Outcome, Prepared, Step, TableReader


@dataclasses.dataclass(kw_only=True)
class RestoreQuarantineStep(Step[RestoreQuarantineJobArgs, RestoreQuarantineResult]):
    """Move the files of one clean run's quarantine back to their exact original paths.

    For an orphan taken wrongly (say a slow writer's file older than the orphan floor, committed
    after the clean step moved it). A file whose original path exists again, or that is not in
    quarantine, is skipped with the reason; nothing is ever overwritten, so running it twice is
    safe. Without ``quarantine_run`` the table's runs are listed (``runs``) and nothing moves.
    Returns :class:`~airflow_lake_provider.core.contracts.RestoreQuarantineResult`
    (docs/operators/restore.md).
    """

    name: ClassVar[str] = names.RESTORE_QUARANTINE

    quarantine_run: str | None = setting(None, doc=(
        "The run key (the clean result's ``quarantine_run``) or its manifest's location "
        "(``quarantine_manifest``); ``None``: list the table's runs, move nothing."))
    quarantine_location: str | None = setting(None, doc=(
        "The clean step's ``quarantine_location`` (``None``: beside the table)."))

    def prepare(self, reader: TableReader, run: AirflowRun | None) -> Prepared:
        args = RestoreQuarantineJobArgs(table=self.dotted, quarantine_run=self.quarantine_run,
                                        quarantine_location=self.quarantine_location).validate()
        table = reader.load_table()
        if self.quarantine_run is None or run_reference(self.quarantine_run)[1] is None:
            quarantine_root(table.location(), self.dotted, self.quarantine_location)  # a bad location, before any JVM
        return Prepared(table_state(table), args=args)

    def finish(self, prepared: Prepared, result: RestoreQuarantineResult) -> Outcome:
        if self.quarantine_run is None:
            self.log.info("Quarantine runs of %s: %s", self.dotted,
                          json.dumps(result.runs, indent=1) if result.runs else "none")
            return Outcome(result, None, changed=False)
        for path, reason in result.skipped.items():
            self.log.warning("Not restored: %s: %s.", path, reason)
        return Outcome(result, f"restored {result.restored_count} files of quarantine run {result.quarantine_run} "
                               f"({result.skipped_count} skipped)", changed=False)
