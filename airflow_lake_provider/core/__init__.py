"""The pure floor: every maintenance decision, with no Airflow and no Spark import.

``contracts`` (what every step takes and returns), ``coercion`` (rendered values to typed
ones), ``planning`` (which files to rewrite), ``health`` (is a table worth the work),
``retention`` (which snapshots and files to keep), ``scoping`` (a data interval to
partitions), ``snapshots`` (lineage), ``partitions`` (partition identity and values),
``partition_sql`` (the partition-filter translation) and ``identifiers`` (table names).
PyIceberg is imported only inside the functions that read a table, so the rules can be
unit-tested on plain values. The PySpark jobs import these modules on the Spark driver (the job
hook ships them), and the Airflow faces import them in the worker.
"""
