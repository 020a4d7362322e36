"""Put a quarantine run's files back: the undo of the clean step's orphan removal.

Also runnable by hand, outside any DAG, with the Airflow connections of the environment::

    python -m airflow_lake_provider.operators.restore db.events 20261123T211530123Z-lake_maintenance.clean-1a2b3c4d

(``--quarantine-location URI`` when the clean step had one, ``--lake-conn-id``; no run: list the runs).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from airflow_lake_provider.operators.base import LakeMaintenanceOperator
from airflow_lake_provider.steps.restore import RestoreQuarantineStep


class IcebergRestoreQuarantineOperator(LakeMaintenanceOperator):
    """Restored files count as new for the orphan floor."""

    step_class = RestoreQuarantineStep
    emits_table_events = False  # files come back; the table's metadata does not change


def main(argv: Sequence[str] | None = None) -> int:
    """The hand way: ``python -m airflow_lake_provider.operators.restore TABLE [RUN]``; prints the result."""
    parser = argparse.ArgumentParser(prog="python -m airflow_lake_provider.operators.restore",
                                     description="Move a quarantine run's files back (no run: list the runs).")
    parser.add_argument("table", help="namespace.table")
    parser.add_argument("quarantine_run", nargs="?", help="the run key, or its manifest.json location")
    parser.add_argument("--quarantine-location", help="the clean step's quarantine_location, if it had one")
    parser.add_argument("--lake-conn-id", help="the iceberg_lake connection (default: lake_default)")
    parser.add_argument("--spark-conn-id", help="the apache-spark connection (default: spark_default)")
    given = parser.parse_args(argv)
    connections = {key: value for key, value in (("lake_conn_id", given.lake_conn_id),
                                                 ("spark_conn_id", given.spark_conn_id)) if value}
    result = IcebergRestoreQuarantineOperator(
        task_id="restore_quarantine", table=given.table, quarantine_run=given.quarantine_run,
        quarantine_location=given.quarantine_location, **connections).execute({})
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
