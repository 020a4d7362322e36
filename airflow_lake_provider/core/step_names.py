"""Each maintenance step's name, spelled once.

A step and the Spark job it runs share the name: the job is ``jobs/<name>.py``, registered under
it in ``core/job_registry.py``; the step object says it in summaries, asset events and lineage;
the task group gives the step's task that ID; the contracts' messages call the step by it. Pure:
no imports, so any layer (a DAG file too) can take the names from here.
"""

from __future__ import annotations

PLAN = "plan"
REWRITE = "rewrite"
EXPIRE = "expire"
CLEAN = "clean"
CONVERT_EQUALITY_DELETES = "convert_equality_deletes"
RESTORE_QUARANTINE = "restore_quarantine"
REPAIR_DELETION_VECTORS = "repair_deletion_vectors"

#: Every step, each with a Spark job of the same name.
STEPS = (PLAN, REWRITE, EXPIRE, CLEAN, CONVERT_EQUALITY_DELETES, RESTORE_QUARANTINE, REPAIR_DELETION_VECTORS)
#: The steps that delete files, which an approval gate may guard.
DELETING_STEPS = (EXPIRE, CLEAN)

#: Jobs that are no step: Spark SQL run by hand, and several tables' jobs in one Spark application.
SQL = "sql"
BATCH = "batch"
