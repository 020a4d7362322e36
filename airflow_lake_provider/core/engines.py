"""Where a step's work runs: ``pyiceberg`` in the Airflow worker (no JVM), ``spark`` in its Spark
job, ``auto`` chosen per table by the step (the worker for small tables, Spark for large ones and
for what the worker does not do). One name for the choice on every step that offers it."""

from __future__ import annotations

from typing import Annotated

from airflow_lake_provider.core.coercion import OneOf

ENGINES = ("auto", "pyiceberg", "spark")
Engine = Annotated[str, OneOf(ENGINES)]

#: The expire and clean jobs do their metadata work (expiry, the orphan listing) with Iceberg's own
#: code in the driver's JVM, with no Spark application, except on a cluster for a table with this many
#: live files (data and delete files of the current snapshot): there Iceberg's Spark actions spread the
#: manifests and the listing over the executors.
SPARK_ACTION_MIN_FILES = 100_000
