"""What every maintenance operator shares: the two hooks, Airflow run tags, table checks."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Mapping, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowSkipException

from airflow_lake_provider.assets import announce_table_change, maintenance_alias
from airflow_lake_provider.core.coercion import coerce_rendered_fields, flag
from airflow_lake_provider.core.contracts import AirflowRun, Contract
from airflow_lake_provider.core.health_page import SUMMARY_XCOM_KEY
from airflow_lake_provider.core.identifiers import TableIdentifier
from airflow_lake_provider.core.lease import step_lease
from airflow_lake_provider.core.settings import param_lines, settings_of, takes_settings, with_params
from airflow_lake_provider.core.spark_settings import SparkSettings
from airflow_lake_provider.exceptions import LakeConfigError
from airflow_lake_provider.hooks.lake import IcebergLakeHook
from airflow_lake_provider.hooks.lease import HeldLeases, TableLeaseHook, renewed_while_running
from airflow_lake_provider.hooks.spark_job import LakeSparkJobHook
from airflow_lake_provider.lineage import operator_lineage, spark_parent_properties
from airflow_lake_provider.links import SparkHistoryLink
from airflow_lake_provider.steps.base import Step, StepFailed
from airflow_lake_provider.steps.runner import run_step

if TYPE_CHECKING:
    from airflow.sdk import Context
    from pyiceberg.table import Table

    from airflow_lake_provider.core.table_digest import TableDigest

#: The XCom key where a step whose job ran but failed the task leaves what it did (the rewrite's
#: committed groups when others were dropped).
PARTIAL_RESULT_XCOM_KEY = "partial_result"


def airflow_run(context: Any) -> AirflowRun | None:
    """The task try running a step (``None`` when ``execute`` is called without a task instance)."""
    ti = context.get("ti") if context else None
    return AirflowRun.of_task_instance(ti) if ti is not None else None


def task_run(context: Any) -> AirflowRun:
    """The task try running this operator, for what only a task has (a lease holder's name)."""
    run = airflow_run(context)
    if run is None:
        raise LakeConfigError("This operator needs the context of a running task: it has no task instance.")
    return run


class LakeSparkOperator(BaseOperator):
    """What an operator needs to run this provider's Spark jobs: the catalog and Spark connections,
    the Spark settings, one job at a time with its application linked from the task.

    :param lake_conn_id: the ``iceberg_lake`` connection; ``lake_default`` falls back to the embedded lake (templated).

    Every launch setting of :class:`~airflow_lake_provider.core.spark_settings.SparkSettings` is a
    keyword argument too (``spark_conn_id`` and ``spark_conf`` templated):
    """

    template_fields: Sequence[str] = ("lake_conn_id", "spark_conn_id", "spark_conf")
    template_fields_renderers: ClassVar[dict[str, str]] = {"spark_conf": "json"}
    ui_color = "#cfe8fc"
    operator_extra_links = (SparkHistoryLink(),)

    @takes_settings(settings_of(SparkSettings))
    def __init__(self, *, lake_conn_id: str = IcebergLakeHook.default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.lake_conn_id = lake_conn_id
        self._job_hook: LakeSparkJobHook | None = None
        self.spark_application_url: str | None = None
        self._context: Any = None

    def coerce_rendered_fields(self) -> None:
        """Turn the rendered templated fields into the types ``__init__`` declares (first line of ``execute``).

        The one place rendered text is read (:mod:`airflow_lake_provider.core.coercion`): a
        templated ``"False"`` is False, ``"None"`` is None for an optional field, ``"5"`` is 5.
        """
        coerce_rendered_fields(self)

    @cached_property
    def lake_hook(self) -> IcebergLakeHook:
        return IcebergLakeHook(self.lake_conn_id)

    def pre_execute(self, context: Any) -> None:
        super().pre_execute(context)
        self._context = context  # the Spark job's OpenLineage parent is this task's run

    def spark_settings(self) -> SparkSettings:
        """This operator's Spark settings, with its task as the OpenLineage parent of the job."""
        return SparkSettings.of(self).with_conf(spark_parent_properties(self._context))

    @cached_property
    def leases(self) -> HeldLeases:
        """The maintenance leases this task holds, renewed while its job runs (see
        :func:`~airflow_lake_provider.hooks.lease.renewed_while_running`)."""
        return HeldLeases(TableLeaseHook(self.lake_hook), self.log)

    def run_job(self, args: Contract) -> Any:
        """Submit the job that takes ``args`` and return its result contract; the task's extra link
        points at the application."""
        self._job_hook = LakeSparkJobHook(lake_hook=self.lake_hook, settings=self.spark_settings())
        with renewed_while_running(self.leases.hook, self.leases.held, self.leases.keep, self.on_kill, self.log):
            result = self._job_hook.run(args)
        self._job_hook.log_where_it_ran(self.log, args.what)
        self.spark_application_url = self._job_hook.application_url()  # read by SparkHistoryLink
        return result

    def on_kill(self) -> None:
        if self._job_hook is not None:
            self._job_hook.on_kill()


LakeSparkOperator.__doc__ = with_params(LakeSparkOperator.__doc__, settings_of(SparkSettings))


class LakeMaintenanceOperator(LakeSparkOperator):
    """Base of the maintenance operators: one table, its lease, its asset events and lineage.

    :param table: the table, ``namespace.table`` (templated).
    :param lease: the table's maintenance lease this run holds (the acquire task's result, e.g.
        ``acquire.output``; templated). Before doing anything the step checks the lease is still
        this run's and renews it (moving its tags to the current snapshot), and refuses with a
        sentence when another run holds it; while the step's Spark job runs the lease is renewed
        every third of its ttl, and the job is killed if the lease was lost. See docs/lease.md.
    :param require_lease: the step belongs to a leased group: without a lease (its acquire task
        skipped because another run held the table) it skips itself instead of running unleased.
    :param settings: more of the step's settings as one mapping, templated as a whole (the
        ``lake_maintenance`` form's "more settings" fields: ``"{{ params.rewrite_settings }}"``);
        checked when the task runs, and a setting given both by name and here is refused.

    The connection and Spark parameters are :class:`LakeSparkOperator`'s.
    """

    template_fields: Sequence[str] = ("table", *LakeSparkOperator.template_fields, "lease", "settings")
    template_fields_renderers: ClassVar[dict[str, str]] = {
        **LakeSparkOperator.template_fields_renderers, "lease": "json", "settings": "json"
    }
    #: The step this operator runs: its settings become the operator's keyword arguments and templated
    #: fields, and its docstring and settings' docs the operator's docstring (``__init_subclass__``).
    step_class: ClassVar[type[Step] | None] = None
    #: Declares the maintenance asset alias and, after a run that changed the table, emits an event
    #: for the table's Asset (docs/assets.md). Steps that only read (the plan) or restore set False.
    emits_table_events: bool = True

    def __init__(
        self,
        *,
        table: str,
        lease: dict[str, Any] | None = None,
        require_lease: bool = False,
        settings: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.settings = settings
        self._named_settings: frozenset[str] = frozenset()
        self.lease = lease
        self.require_lease = require_lease
        self.table = table
        self._table_states: tuple[dict[str, Any], dict[str, Any]] | None = None
        self._table_location: str | None = None
        self._result: Any = None
        if self.emits_table_events:
            self.outlets = [*self.outlets, maintenance_alias()]

    def pre_execute(self, context: Any) -> None:
        """A leased step first makes sure its run still holds the table's lease, and renews it,
        before it reads the table."""
        super().pre_execute(context)
        lease = step_lease(self.lease, self.table_identifier.dotted, self.task_id)
        if lease is None:
            if flag(self.require_lease, "require_lease"):
                raise AirflowSkipException(
                    f"This run holds no maintenance lease on {self.table} (its acquire task skipped or did not run), "
                    f"so {self.task_id} does nothing.")
            return
        if not lease.needed:  # a dry run changes nothing and took no lease: it runs beside anyone
            return
        renewed = self.leases.renew(lease)
        self.log.info("This run holds the maintenance lease on %s until %s (renewed).", lease.table, renewed.expires_at)

    @property
    def step_label(self) -> str:
        """The step's name in asset events and lineage: the task id without its group's prefix."""
        return self.task_id.rsplit(".", 1)[-1]

    @property
    def table_identifier(self) -> TableIdentifier:
        return TableIdentifier.parse(self.table)

    def load_table(self) -> Table:
        """The PyIceberg table (validates the name first; no JVM)."""
        return self.lake_hook.load_table(self.table_identifier)

    def read_digest(self) -> TableDigest:
        """The table's metadata read lean (:meth:`IcebergLakeHook.read_table_digest`): for steps that
        decide from the history alone, so the worker's memory does not grow with it (no JVM)."""
        digest = self.lake_hook.read_table_digest(self.table_identifier)
        self._table_location = digest.location
        return digest

    # -- the step: its settings are this operator's parameters ----------------------------------
    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        step_class = cls.__dict__.get("step_class")
        if step_class is not None:
            _derive_from_step(cls, step_class)

    def step(self, context: Context) -> Step:
        """The step this operator runs, from its (rendered) settings."""
        step_class = self.step_class
        assert step_class is not None, f"{type(self).__name__} names no step_class"
        values = {name: getattr(self, name) for name in step_class.parameter_names()}
        values = step_class.with_more(values, self.settings, named=self._named_settings, where=self.task_id)
        return step_class.build(table=self.table, log=self.log, **values)

    def execute(self, context: Context) -> Any:
        self.coerce_rendered_fields()
        return self.run_step(self.step(context), context)

    def run_step(self, step: Step, context: Context) -> Any:
        """Run ``step`` (:func:`~airflow_lake_provider.steps.runner.run_step`: it reads the table through this
        operator, which keeps the location for lineage; its job while the lease is renewed), and keep the
        result and the table's states for the asset event and lineage."""
        try:
            ran = run_step(step, self, airflow_run(context), self.run_job)
        except StepFailed as failure:
            context["ti"].xcom_push(key=PARTIAL_RESULT_XCOM_KEY, value=failure.partial_result.to_json())
            raise
        finally:
            if step.said and context.get("ti") is not None:  # a script's execute({}) has no task instance
                context["ti"].xcom_push(key=SUMMARY_XCOM_KEY, value=step.said)
        if ran.after is not None:
            self._table_states = (ran.before, ran.after)
        self._result = ran.result.to_json()
        return self._result

    def post_execute(self, context: Any, result: Any = None) -> None:
        """After a run that changed the table, an event for its Asset carrying the step's figures."""
        super().post_execute(context, result)
        result = self._result if result is None else result
        if not self.emits_table_events or self._table_states is None:
            return
        announce_table_change(context, self.lake_hook, self.step_label, self.table_identifier.dotted,
                              *self._table_states, result, self.log)

    # -- OpenLineage (docs/lineage.md; nothing happens without the provider) -------------------
    def _lineage(self, *, with_figures: bool):
        # OpenLineage emits from a forked process with a timeout (10 s by default): reuse the
        # location the step already read rather than asking the catalog again.
        if self._table_location is None:
            self._table_location = self.read_digest().location
        figures = {"result": self._result, "states": self._table_states} if with_figures else {}
        return operator_lineage(step=self.step_label, location=self._table_location, table=self.table_identifier.dotted,
                                catalog_uri=self.lake_hook.config.uri, changes_table=self.emits_table_events, **figures)

    def get_openlineage_facets_on_start(self):
        return self._lineage(with_figures=False)

    def get_openlineage_facets_on_complete(self, task_instance):
        return self._lineage(with_figures=True)

    def get_openlineage_facets_on_failure(self, task_instance):
        return self._lineage(with_figures=False)


def _derive_from_step(cls: type[LakeMaintenanceOperator], step_class: type[Step]) -> None:
    """Give ``cls`` the step's settings as keyword-only parameters, templated fields and docs."""
    settings = step_class.settings()
    cls.template_fields = (*LakeMaintenanceOperator.template_fields, *(s.name for s in settings))
    cls.template_fields_renderers = {**LakeMaintenanceOperator.template_fields_renderers,
                                     **{s.name: s.renderer for s in settings if s.renderer}}
    # The operator's own parameters, if it has an __init__, else its base's.
    own_init = cls.__dict__.get("__init__") or (lambda self, **kwargs: super(cls, self).__init__(**kwargs))
    init = takes_settings(settings)(own_init)

    @functools.wraps(init)
    def __init__(self: LakeMaintenanceOperator, **kwargs: Any) -> None:
        init(self, **kwargs)
        named = {s.name: kwargs[s.name] for s in settings if s.name in kwargs}
        self._named_settings = frozenset(named)
        step_class.check(named, where=self.task_id, wired_ok=True)  # values given as they are: checked at parse
        if isinstance(self.settings, Mapping):
            step_class.check(self.settings, where=f"{self.task_id}: settings")

    __init__.__qualname__ = f"{cls.__qualname__}.__init__"
    cls.__init__ = __init__  # type: ignore[method-assign]
    cls.__doc__ = "\n\n".join(part for part in (
        inspect.cleandoc(step_class.__doc__ or ""), inspect.cleandoc(cls.__doc__ or ""),
        param_lines(settings),
        ("The table, lease, connection and Spark parameters are :class:`LakeMaintenanceOperator`'s. Every "
         "parameter is templated."),
    ) if part)
