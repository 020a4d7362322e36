"""How a job's Spark application is launched: one object from the operator to spark-submit.

An operator's Spark parameters, the fleet's, and the job hook all carry this one value, so a new
setting is a field here and the line of the hook that uses it. What the connections add (the Spark
connection's master and ``deploy-mode`` extra, the lake connection's ``spark_conf``, jars and
packages) is resolved by the job hook at submit time, over these settings.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from airflow_lake_provider.core.settings import read_settings, setting

DEFAULT_SPARK_CONN_ID = "spark_default"


@dataclasses.dataclass(frozen=True, kw_only=True)
class SparkSettings:
    """The launch settings of one Spark application of this provider (every Spark step's operator
    takes each as a keyword argument)."""

    spark_conn_id: str = setting(DEFAULT_SPARK_CONN_ID, doc=(
        "The apache-spark connection (master, deploy mode, queue...); when it does not exist the job runs on "
        "``local[*]``."))
    spark_conf: Mapping[str, Any] = setting(default_factory=dict, doc=(
        "Spark configuration over the lake connection's ``spark_conf``; keys that look secret travel in the "
        "job's spec file, the others on the command line."))
    jars: tuple[str, ...] = setting((), doc="Extra jar paths, added to those the catalog needs.")
    packages: tuple[str, ...] = setting((), doc=(
        "Extra Maven coordinates for ``--packages`` (where Maven is reachable)."))
    driver_memory: str | None = setting(None, doc="spark-submit ``--driver-memory``.")
    executor_memory: str | None = setting(None, doc="spark-submit ``--executor-memory``.")
    executor_cores: int | None = setting(None, doc="spark-submit ``--executor-cores``.")
    num_executors: int | None = setting(None, doc="spark-submit ``--num-executors``.")
    deploy_mode: str | None = setting(None, doc=(
        "``client`` or ``cluster`` (then set ``result_location``); ``None``: the Spark connection's "
        "``deploy-mode`` extra, else ``client``."))
    result_location: str | None = setting(None, doc=(
        "Where the job writes its result: a shared directory URI both sides reach, required in cluster mode "
        "(default: a private local directory)."))
    iceberg_runtime_provided: bool | None = setting(None, doc=(
        "The cluster's image has the Iceberg Spark runtime, so none is shipped; ``None``: the lake connection's "
        "``iceberg_runtime_provided`` extra decides."))
    env_vars: Mapping[str, str] = setting(default_factory=dict, doc=(
        "Environment for the application, placed as SparkSubmitHook places it (the spark-submit process; on YARN "
        "and Kubernetes also the driver's environment)."))
    verbose: bool = setting(False, doc="spark-submit ``--verbose``.")

    def __post_init__(self) -> None:
        # Lists and ``None`` as the operators receive them; stored as values that cannot change.
        object.__setattr__(self, "spark_conf", dict(self.spark_conf or {}))
        object.__setattr__(self, "env_vars", {str(k): str(v) for k, v in (self.env_vars or {}).items()})
        object.__setattr__(self, "jars", tuple(self.jars or ()))
        object.__setattr__(self, "packages", tuple(self.packages or ()))

    @classmethod
    def of(cls, source: Any) -> SparkSettings:
        """The settings named by ``source``'s attributes of the same names (an operator's parameters)."""
        return read_settings(cls, source)

    def with_conf(self, conf: Mapping[str, Any]) -> SparkSettings:
        """These settings with ``conf`` under ``spark_conf`` (``spark_conf``'s own values win)."""
        return dataclasses.replace(self, spark_conf={**conf, **self.spark_conf})
