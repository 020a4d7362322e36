"""Build the maintenance DAG (plan >> rewrite >> expire >> clean) for manual or scheduled use.

``dags/lake_maintenance.py`` builds the manual one (the table is a required param: trigger it
from the UI form or the REST API); ``dags/lake_maintenance_daily.py`` a scheduled one whose
runs, and backfills, compact the partitions of their own data interval.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pendulum
from airflow.sdk import DAG, Param, task

from airflow_lake_provider.core.lease import DEFAULT_WAIT_TIMEOUT_SECONDS, ON_BUSY_MODES
from airflow_lake_provider.core.retention_settings import (
    DEFAULT_CLEAN_POLICY,
    DEFAULT_CLEAN_RETAINED,
    DEFAULT_ORPHAN_OLDER_THAN_HOURS,
    ORPHAN_FLOOR_HOURS,
    CleanPolicy,
)
from airflow_lake_provider.core.run_conf import unknown_conf_keys
from airflow_lake_provider.core.scoping import before_first_day
from airflow_lake_provider.exceptions import LakeConfigError
from airflow_lake_provider.steps.base import Step
from airflow_lake_provider.steps.clean import CleanStep
from airflow_lake_provider.steps.expire import ExpireStep
from airflow_lake_provider.steps.plan import PlanStep
from airflow_lake_provider.steps.reference import form_schema
from airflow_lake_provider.steps.rewrite import RewriteStep
from airflow_lake_provider.task_group import (
    LakeMaintenanceGroup,
    lake_maintenance_group,
)

#: Airflow's own start date of the maintenance DAGs. Airflow creates no task for a manual run
#: dated before a DAG's start date (the run "succeeds" with nothing run), so it lies far back:
#: every run reaches its tasks. Where a scheduled DAG's days begin is its ``first_day``, checked
#: by its first task, which refuses earlier runs with a sentence. Catchup is off, so no past run
#: is ever scheduled from this date.
AIRFLOW_START_DATE = pendulum.datetime(1970, 1, 1, tz="UTC")

TABLE_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+$"
#: The form's ``older_than``: a duration as ``older_than`` reads it (``7d``, ``36h``, ``P3D``).
OLDER_THAN_PATTERN = r"^\s*(\d+(\.\d+)?\s*[wdhmsWDHMS]|[Pp][0-9WDTHMSwdthms.]+)\s*$"


#: The form's fields of each step, as the group's step mappings take them (each a ``{{ params.x }}``);
#: the rest of a step's settings go in the step's "more settings" field (:func:`more_settings_param`).
FORM_FIELDS: dict[str, dict[str, Any]] = {
    "plan": {"target_file_size_bytes": "{{ params.target_file_size_bytes }}",
             "min_input_files": "{{ params.min_input_files }}", "partition_filter": "{{ params.partition_filter }}"},
    "rewrite": {"strategy": "{{ params.strategy }}", "sort_order": "{{ params.sort_order }}",
                "zorder_columns": "{{ params.zorder_columns }}"},
    "expire": {"override_table_retention": "{{ params.override_table_retention }}",
               "older_than": "{{ params.older_than }}", "retain_last": "{{ params.retain_last }}"},
    "clean": {"override_table_retention": "{{ params.override_table_retention }}", "policy": "{{ params.policy }}",
              "retained": "{{ params.retained }}", "remove_orphans": "{{ params.remove_orphans }}",
              "orphan_older_than_hours": "{{ params.orphan_older_than_hours }}"},
}
#: The step behind each of the group's step mappings.
STEPS: dict[str, type[Step]] = {"plan": PlanStep, "rewrite": RewriteStep, "expire": ExpireStep, "clean": CleanStep}
#: An example for each step's "more settings" field.
MORE_SETTINGS_EXAMPLES = {
    "plan": '{"max_files": 50000, "engine": "spark"}',
    "rewrite": '{"options": {"partial-progress.enabled": "true"}, "rewriter": "iceberg"}',
    "expire": '{"snapshot_ids": [123]}',
    "clean": '{"quarantine_days": 0, "reference_namespaces": ["sales"]}',
}


def more_settings_param(step: str) -> Param:
    """A step's "more settings" field: every setting of the step without a field of its own, as JSON,
    checked by the form against the step's declarations (an unknown name or a wrong type is refused)."""
    schema = form_schema(STEPS[step], leave_out=[*FORM_FIELDS[step], "dry_run"])
    return Param({}, **schema, title=f"More {step} settings",
                 description=f"Any other setting of the {step} step, as JSON, e.g. {MORE_SETTINGS_EXAMPLES[step]}. "
                 f"Each setting is described in the docs: operators/{step}.md#settings.")


def table_param(table_default: str | None = None) -> Param:
    """The form's table field (required when there is no default), checked against TABLE_PATTERN."""
    text: dict[str, Any] = {"type": "string", "pattern": TABLE_PATTERN, "title": "Table",
            "description": "The table to maintain, as namespace.table (for example demo.events)."}
    return Param(table_default, **text) if table_default else Param(**text)


def maintenance_params(table_default: str | None = None) -> dict[str, Param]:
    """The params form: what an operator sees at 2 a.m. when triggering a run by hand."""
    return {
        "table": table_param(table_default),
        "target_file_size_bytes": Param(
            None, type=["null", "integer"], minimum=1024 * 1024, maximum=16 * 1024**3,
            title="Target file size (bytes)",
            description="Size the rewrite aims for. Empty: the table's write.target-file-size-bytes "
            "(512 MiB by default).",
        ),
        "min_input_files": Param(
            5, type="integer", minimum=1, maximum=100000, title="Minimum input files",
            description="A partition's group of small files is compacted only when it has at least this many files.",
        ),
        "partition_filter": Param(
            None, type=["null", "string"], title="Partition filter",
            description="Only plan these rows, as a PyIceberg filter, e.g. day = '2026-01-01'. Empty: whole table "
            "(a run with a data interval, such as a scheduled, backfill or dated run, is scoped to it in any case).",
        ),
        "strategy": Param("binpack", enum=["binpack", "sort", "zorder"], title="Rewrite strategy",
                          description="binpack: combine files as they are; sort: sort rows by the sort order below "
                          "(empty: the table's); zorder: interleave the Z-order columns below."),
        "sort_order": Param(
            None, type=["null", "string"], title="Sort order (strategy sort)",
            description="e.g. event_ts DESC NULLS LAST, customer_id. Empty: the table's own sort order.",
        ),
        "zorder_columns": Param(
            [], type="array", items={"type": "string"}, title="Z-order columns (strategy zorder)",
            description="Columns to cluster by together, e.g. customer_id and region (one per line).",
        ),
        **retention_params(),
        "policy": Param(
            DEFAULT_CLEAN_POLICY.value, enum=[p.value for p in CleanPolicy], title="Clean policy",
            description="Which snapshots the clean step keeps: the last N commits, the last N versions of every "
            "partition, or everything current in the last N hours.",
        ),
        "retained": Param(
            DEFAULT_CLEAN_RETAINED, type="integer", minimum=1, maximum=100000, title="Clean policy N",
            description="N for the clean policy (commits, versions or hours). It never removes a snapshot the "
            "table's own retention keeps, unless 'Override the table's retention' is ticked.",
        ),
        "remove_orphans": Param(
            True, type="boolean", title="Remove orphan files",
            description="Also delete (quarantine) files under the table no snapshot, tag or branch references.",
        ),
        "orphan_older_than_hours": Param(
            DEFAULT_ORPHAN_OLDER_THAN_HOURS, type="integer", minimum=ORPHAN_FLOOR_HOURS, maximum=24 * 3650,
            title="Orphan files older than (hours)",
            description=f"Unreferenced files younger than this are never deleted ({ORPHAN_FLOOR_HOURS} h at least: "
            "writers in flight own them).",
        ),
        "dry_run": Param(
            False, type="boolean", title="Dry run",
            description="Plan and report what expiry and clean would remove; change nothing.",
        ),
        **{f"{step}_settings": more_settings_param(step) for step in FORM_FIELDS},
        "lease_on_busy": Param(
            "wait", enum=list(ON_BUSY_MODES), title="While another run maintains the table",
            description=f"One maintenance run per table at a time, across DAGs and Airflow deployments. wait: start "
            f"when the other run is done (up to {DEFAULT_WAIT_TIMEOUT_SECONDS // 3600} hours, then fail); skip: skip "
            "this run; fail: fail this run.",
        ),
    }


def retention_params() -> dict[str, Param]:
    """The form's retention fields: the table's own settings unless the override is ticked.

    Empty fields mean "the table's"; a value applies only with the switch on (a value without
    it fails the expire task with a sentence saying so), so a form default can never shorten the
    time travel a table's owner asked for.
    """
    return {
        "override_table_retention": Param(
            False, type="boolean", title="Override the table's retention",
            description="Off (default): expiry and clean keep what the table's owner set: its history.expire.* "
            "properties and each branch's and tag's own retention (Iceberg's defaults where unset: keep 1 snapshot "
            "and 5 days). On: the two fields below replace those rules for main, and the clean policy may remove "
            "what they would keep. Other branches and tags always keep their own rules.",
        ),
        "retain_last": Param(
            None, type=["null", "integer"], minimum=1, maximum=10000, title="Snapshots of main to keep (override)",
            description="Empty: the table's own (history.expire.min-snapshots-to-keep). A number applies only with "
            "'Override the table's retention' ticked: expiry then keeps at least this many snapshots of main.",
        ),
        "older_than": Param(
            None, type=["null", "string"], pattern=OLDER_THAN_PATTERN, title="Expire snapshots older than (override)",
            description="A duration: 7d, 36h, 90m, P3D. Empty: the table's own (history.expire.max-snapshot-age-ms). "
            "Applies only with 'Override the table's retention' ticked: snapshots of main older than this are "
            "expired (0h: all but the snapshots kept above).",
        ),
    }



def _rendered(template: str) -> Any:
    """A templated argument where the parameter declares a typed value (``int``, ``bool``...).

    Airflow renders ``template`` at run time and the operator coerces the text to the declared type
    (:mod:`airflow_lake_provider.core.coercion`), so the template stands for a value of that type.
    """
    return template


def maintenance_chain(
    *,
    lake_conn_id: str = "lake_default",
    spark_conn_id: str = "spark_default",
    cleanup_trigger_rule: str = "none_failed",
) -> LakeMaintenanceGroup:
    """``plan >> rewrite >> expire >> clean`` in the DAG being defined, set from its params form.

    The group of :func:`~airflow_lake_provider.task_group.lake_maintenance_group` (its wiring is
    described there), every option a ``{{ params.x }}`` of :func:`maintenance_params`. Its task
    ids are ``plan``, ``rewrite``, ``expire``, ``clean`` without a prefix (with ``acquire_lease``
    and ``release_lease``, the lease's setup and teardown, around them). Returns
    the group (``group.plan`` etc.), for DAGs that put something in front of it.
    """
    by_step: dict[str, Any] = {step: {**fields, "settings": _rendered(f"{{{{ params.{step}_settings }}}}")}
                               for step, fields in FORM_FIELDS.items()}
    return lake_maintenance_group(
        table="{{ params.table }}", group_id="lake_maintenance", prefix_group_id=False,
        lake_conn_id=lake_conn_id, spark_conn_id=spark_conn_id, cleanup_trigger_rule=cleanup_trigger_rule,
        **by_step,
        dry_run=_rendered("{{ params.dry_run }}"),
        lease={"on_busy": "{{ params.lease_on_busy }}"},
    )


def run_check(*, first_day: dt.datetime | None, setting: str):
    """The first task (``check_run``): it fails a run, before the lease or any step, whose conf holds
    a key that is no param of the DAG (:func:`~airflow_lake_provider.core.run_conf.unknown_conf_keys`),
    or, with ``first_day``, whose data interval starts before it.

    Airflow runs it for every run (scheduled, backfill, manual), without a JVM; without it Airflow
    would ignore an unknown key and run a backfill before the first day.
    """

    @task(task_id="check_run")
    def check_run(**context: Any) -> None:
        dag_id = context["dag"].dag_id
        refusal = unknown_conf_keys(context["dag_run"].conf, context["dag"].params, dag_id=dag_id)
        if refusal is None and first_day is not None:
            refusal = before_first_day(context.get("data_interval_start"), first_day, dag_id=dag_id, setting=setting)
        if refusal:
            raise LakeConfigError(refusal)

    return check_run()


def build_maintenance_dag(
    dag_id: str,
    *,
    schedule: Any = None,
    table_default: str | None = None,
    lake_conn_id: str = "lake_default",
    spark_conn_id: str = "spark_default",
    first_day: dt.datetime | None = None,
    first_day_setting: str = "first_day",
    **dag_kwargs: Any,
) -> DAG:
    """The four steps as separate tasks, snapshot IDs flowing through XCom.

    A first ``check_run`` task refuses a run whose conf holds a key that is no param and, with
    ``first_day`` (named ``first_day_setting`` in the refusal, e.g. an environment variable), a run
    whose data interval starts earlier.
    """
    with DAG(
        dag_id=dag_id,
        schedule=schedule,
        start_date=dag_kwargs.pop("start_date", AIRFLOW_START_DATE),
        catchup=dag_kwargs.pop("catchup", False),
        max_active_runs=dag_kwargs.pop("max_active_runs", 1),
        render_template_as_native_obj=True,
        tags=dag_kwargs.pop("tags", ["iceberg", "maintenance"]),
        params=maintenance_params(table_default),
        **dag_kwargs,
    ) as dag:
        maintenance = maintenance_chain(lake_conn_id=lake_conn_id, spark_conn_id=spark_conn_id)
        run_check(first_day=first_day, setting=first_day_setting) >> maintenance
    return dag
