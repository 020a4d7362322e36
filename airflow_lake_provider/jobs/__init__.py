"""The PySpark applications of this provider.

They run on a Spark driver where Airflow is not installed: modules here import only the
standard library, PySpark and each other. Each job is a module with a
``run(spark, catalog, args) -> dict`` function; :mod:`airflow_lake_provider.jobs.main` is the
application that spark-submit starts, and it reads a JSON spec and writes a JSON result.
The jobs, with the contracts they take and return, are listed in
:mod:`airflow_lake_provider.core.job_registry`; a spec naming any other job is refused.
"""
