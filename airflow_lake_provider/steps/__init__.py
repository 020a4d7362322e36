"""The maintenance steps as plain objects, without Airflow (see :mod:`airflow_lake_provider.steps.base`)."""
