"""The pure floor: every maintenance decision, with no Airflow and no Spark import.

Planning (which files to rewrite), health (is a table worth the work), retention (which
snapshots and files to keep), interval scoping, snapshot lineage, the partition-filter
translation, table identifiers, the step contracts and the coercion of rendered values live
here. PyIceberg is imported only inside the functions that read a table, so the rules can be
unit-tested on plain values. The PySpark jobs import these modules on the Spark driver (the job
hook ships them), and the Airflow faces import them in the worker.
"""
