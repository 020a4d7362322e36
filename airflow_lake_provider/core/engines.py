"""Where a step's work runs: ``pyiceberg`` in the Airflow worker (no JVM), ``spark`` in its Spark
job, ``auto`` chosen per table by the step (the worker for small tables, Spark for large ones and
for what the worker does not do). One name for the choice on every step that offers it."""

from __future__ import annotations

from typing import Annotated

from airflow_lake_provider.core.coercion import OneOf

ENGINES = ("auto", "pyiceberg", "spark")
Engine = Annotated[str, OneOf(ENGINES)]
