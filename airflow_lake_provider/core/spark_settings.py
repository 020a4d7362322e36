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

DEFAULT_SPARK_CONN_ID = "spark_default"


@dataclasses.dataclass(frozen=True, kw_only=True)
class SparkSettings:
    """The launch settings of one Spark application of this provider.

    :param spark_conn_id: the apache-spark connection (master, deploy mode, queue...); when it
        does not exist the job runs on ``local[*]``.
    :param spark_conf: Spark configuration over the lake connection's ``spark_conf``; keys that
        look secret travel in the job's spec file, the others on the command line.
    :param jars: extra jar paths, added to those the catalog needs.
    :param packages: extra Maven coordinates for ``--packages`` (where Maven is reachable).
    :param driver_memory: spark-submit ``--driver-memory``.
    :param executor_memory: spark-submit ``--executor-memory``.
    :param executor_cores: spark-submit ``--executor-cores``.
    :param num_executors: spark-submit ``--num-executors``.
    :param deploy_mode: ``client`` or ``cluster``; ``None``: the Spark connection's ``deploy-mode``
        extra, else ``client``.
    :param result_location: where the job writes its result; a shared directory URI both sides
        reach, required in cluster mode (default: a private local directory).
    :param iceberg_runtime_provided: the cluster's image has the Iceberg Spark runtime, so none is
        shipped; ``None``: the lake connection's ``iceberg_runtime_provided`` extra decides.
    :param env_vars: environment for the application, placed as SparkSubmitHook places it (the
        spark-submit process; on YARN and Kubernetes also the driver's environment).
    :param verbose: spark-submit ``--verbose``.
    """

    spark_conn_id: str = DEFAULT_SPARK_CONN_ID
    spark_conf: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    jars: tuple[str, ...] = ()
    packages: tuple[str, ...] = ()
    driver_memory: str | None = None
    executor_memory: str | None = None
    executor_cores: int | None = None
    num_executors: int | None = None
    deploy_mode: str | None = None
    result_location: str | None = None
    iceberg_runtime_provided: bool | None = None
    env_vars: Mapping[str, str] = dataclasses.field(default_factory=dict)
    verbose: bool = False

    def __post_init__(self) -> None:
        # Lists and ``None`` as the operators receive them; stored as values that cannot change.
        object.__setattr__(self, "spark_conf", dict(self.spark_conf or {}))
        object.__setattr__(self, "env_vars", {str(k): str(v) for k, v in (self.env_vars or {}).items()})
        object.__setattr__(self, "jars", tuple(self.jars or ()))
        object.__setattr__(self, "packages", tuple(self.packages or ()))

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def of(cls, source: Any) -> SparkSettings:
        """The settings named by ``source``'s attributes of the same names (an operator's parameters)."""
        return cls(**{name: getattr(source, name) for name in cls.field_names() if hasattr(source, name)})

    def with_conf(self, conf: Mapping[str, Any]) -> SparkSettings:
        """These settings with ``conf`` under ``spark_conf`` (``spark_conf``'s own values win)."""
        return dataclasses.replace(self, spark_conf={**conf, **self.spark_conf})
