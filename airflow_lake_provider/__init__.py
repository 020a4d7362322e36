"""Apache Airflow provider for Apache Iceberg lake maintenance.

Kept import-light on purpose: the PySpark applications under ``jobs/`` ship this
package to Spark drivers, where Airflow is not installed.
"""

__version__ = "0.1.0"
