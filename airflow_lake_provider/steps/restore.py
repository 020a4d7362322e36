"""The restore step: one clean run's quarantined files moved back to their exact original paths."""

from __future__ import annotations

import dataclasses
import json
from typing import ClassVar

from airflow_lake_provider.core.contracts import AirflowRun, RestoreQuarantineJobArgs, RestoreQuarantineResult
from airflow_lake_provider.core.quarantine import quarantine_root, run_reference
from airflow_lake_provider.core.snapshots import table_state
from airflow_lake_provider.steps.base import Outcome, Prepared, Step, TableReader


@dataclasses.dataclass(kw_only=True)
class RestoreQuarantineStep(Step[RestoreQuarantineJobArgs, RestoreQuarantineResult]):
    """Restore a quarantine run, or list the table's runs without ``quarantine_run`` (the parameters
    are :class:`~airflow_lake_provider.operators.restore.IcebergRestoreQuarantineOperator`'s)."""

    name: ClassVar[str] = "restore_quarantine"

    quarantine_run: str | None = None
    quarantine_location: str | None = None

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
