"""``acquire_lease >> plan >> rewrite >> expire >> clean >> release_lease`` as one TaskGroup for any DAG.

Each step reads its upstream results through ``XComArg``s of the task objects of its own group
(``plan.output``, ``rewrite.output``, ``expire.output``), never through task-id strings, so the
chain keeps protecting its rewrite's snapshots in any DAG: twice in one DAG (two tables), inside
other groups, with or without the group prefix.

The group's outcome is the steps' outcome, as Airflow expresses it: the lease's acquire and
release are the group's setup and teardown, so the release always runs and never decides the
run's state, and the group's leaves are its last step: ``group >> notify`` runs ``notify`` after
a good run, and a failed step fails the run. See docs/your-own-dag.md.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from datetime import timedelta
from functools import cache
from typing import Any, cast

from airflow.sdk import TaskGroup

from airflow_lake_provider.core.approval import DeletionThreshold
from airflow_lake_provider.core.coercion import duration
from airflow_lake_provider.core.step_names import CLEAN, EXPIRE, PLAN, REWRITE
from airflow_lake_provider.exceptions import LakeConfigError
from airflow_lake_provider.operators.approval import LakeDeletionApprovalOperator
from airflow_lake_provider.operators.base import LakeMaintenanceOperator
from airflow_lake_provider.operators.clean import IcebergCleanPolicyOperator
from airflow_lake_provider.operators.expire import IcebergExpireSnapshotsOperator
from airflow_lake_provider.operators.lease import (
    LEASE_SETTINGS,
    IcebergAcquireLeaseOperator,
    IcebergReleaseLeaseOperator,
)
from airflow_lake_provider.operators.plan import IcebergRewritePlanOperator
from airflow_lake_provider.operators.rewrite import IcebergRewriteDataFilesOperator

#: The labels of the group's tasks: their task ids, prefixed with the group id unless ``prefix_group_id=False``
#: (the steps' are their names: PLAN, REWRITE, EXPIRE, CLEAN).
ACQUIRE_LEASE, RELEASE_LEASE = "acquire_lease", "release_lease"
#: What ``lease=`` may set: the acquire operator's settings.
LEASE_OPTIONS = tuple(s.name for s in LEASE_SETTINGS)
#: With ``approve_deletions_over``: each deleting step's dry run and its approval gate.
EXPIRE_PREVIEW, APPROVE_EXPIRE, CLEAN_PREVIEW, APPROVE_CLEAN = (
    "expire_preview", "approve_expire", "clean_preview", "approve_clean")


class LakeMaintenanceGroup(TaskGroup):
    """The TaskGroup :func:`lake_maintenance_group` builds, with its tasks by role.

    A TaskGroup in every respect (``sensor >> group >> notify`` sets the edges to the plan and
    from the group's last tasks); ``group.rewrite`` etc. give the tasks themselves, e.g. for a
    direct edge or a ``group.rewrite.output`` read downstream.
    """

    def _task(self, label: str) -> Any:
        return self.children[self.child_id(label)]

    @property
    def plan(self) -> IcebergRewritePlanOperator:
        return self._task(PLAN)

    @property
    def rewrite(self) -> IcebergRewriteDataFilesOperator:
        return self._task(REWRITE)

    @property
    def expire(self) -> IcebergExpireSnapshotsOperator:
        return self._task(EXPIRE)

    @property
    def clean(self) -> IcebergCleanPolicyOperator:
        return self._task(CLEAN)

    @property
    def acquire_lease(self) -> IcebergAcquireLeaseOperator:
        return self._task(ACQUIRE_LEASE)

    @property
    def release_lease(self) -> IcebergReleaseLeaseOperator:
        return self._task(RELEASE_LEASE)


#: What the group sets on its tasks itself: refused in a step's mapping.
GROUP_ARGUMENTS = frozenset({"task_id", "table", "lease", "require_lease", "trigger_rule", "require_approval",
                             "lake_conn_id", "dry_run"})


def step_arguments(operator: type[LakeMaintenanceOperator], settings: Mapping[str, Any] | None,
                   *, where: str) -> dict[str, Any]:
    """A step's mapping checked at parse time: its step's settings (by the step's own check: unknown
    names, types, settings the group wires) and arguments of the step's task (``driver_memory``,
    ``pool``, ``retries``...)."""
    if settings is None:
        return {}
    if not isinstance(settings, Mapping):
        raise LakeConfigError(f"lake_maintenance_group: {where} must be a mapping of the step's settings; "
                              f"got {settings!r}.")
    step = operator.step_class
    assert step is not None
    own = {key: value for key, value in settings.items() if key in step.parameter_names()}
    step.check(own, where=f"lake_maintenance_group({where}=...)")
    taken = [key for key in settings if key in GROUP_ARGUMENTS]
    if taken:
        raise LakeConfigError(f"lake_maintenance_group({where}=...): {', '.join(taken)} is set by the group "
                              "itself (dry_run and lake_conn_id on the group, the rest wired from its other tasks).")
    unknown = [key for key in settings if key not in own and key not in _task_arguments(operator)]
    if unknown:
        step.refuse_unknown(unknown[0], where=f"lake_maintenance_group({where}=...)")
    return dict(settings)


@cache
def _task_arguments(operator: type) -> frozenset[str]:
    """The keyword arguments ``operator``'s task takes (Airflow's, the connections', Spark's)."""
    names: set[str] = set()
    for klass in operator.__mro__:
        init = klass.__dict__.get("__init__")
        if init is not None:
            names |= {p.name for p in inspect.signature(init).parameters.values()
                      if p.kind in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)}
    return frozenset(names - {"self"})


def lake_maintenance_group(
    *,
    table: str,
    group_id: str | None = None,
    prefix_group_id: bool = True,
    lake_conn_id: str = "lake_default",
    spark_conn_id: str = "spark_default",
    plan: Mapping[str, Any] | None = None,
    rewrite: Mapping[str, Any] | None = None,
    expire: Mapping[str, Any] | None = None,
    clean: Mapping[str, Any] | None = None,
    dry_run: bool | str | None = None,
    cleanup_trigger_rule: str = "none_failed",
    lease: bool | Mapping[str, Any] = True,
    approve_deletions_over: DeletionThreshold | dict[str, Any] | None = None,
    approval_timeout: timedelta | str | None = None,
    tooltip: str | None = None,
    **operator_kwargs: Any,
) -> LakeMaintenanceGroup:
    """Plan, compact, expire and clean ``table`` in a TaskGroup of the DAG being defined.

    Each step takes its settings by step: ``plan={...}``, ``rewrite={...}``, ``expire={...}``,
    ``clean={...}``, each a mapping of that step's settings (the reference tables of
    docs/operators/: every setting of the step, templated, ``"{{ params.x }}"`` works) and of
    arguments for that step's task alone (``driver_memory``, ``pool``, ``retries``...). They are
    checked when the DAG is parsed: an unknown name is refused naming the closest setting.
    ``operator_kwargs`` (``pool``, ``retries``, ``spark_conf``, ``deploy_mode`` ...) go to all four
    step tasks.

    Wiring, all through ``XComArg``s of this group's tasks: the rewrite takes ``plan.output``
    (it checks the planned snapshot is still in the lineage); expire protects ``rewrite.output``
    (its result state and last commit); clean protects ``rewrite.output`` and ``expire.output``.
    A rewrite that skipped itself (empty plan) left ``None``: nothing to protect. Expire and clean run
    after a skipped rewrite under ``cleanup_trigger_rule``. A failed step (a refused plan
    included) stops the steps after it and fails the run; the lease is given back all the same.

    :param table: ``namespace.table`` (templated).
    :param group_id: the TaskGroup's id; default: the table name with ``_`` for ``.``
        (``demo.events`` -> ``demo_events``), required when ``table`` is a template.
    :param prefix_group_id: ``False`` keeps the task ids ``plan``, ``rewrite``, ``expire``,
        ``clean`` (one such group per DAG): what the shipped single-table DAGs do.
    :param dry_run: rewrite, expire and clean report what they would do and change nothing (and
        no lease is taken).
    :param lease: one maintenance run per table at a time (docs/lease.md): ``acquire_lease``
        (the group's setup) takes the table's lease before the plan, every step checks and renews
        it, ``release_lease`` (its teardown) gives it back after clean whatever happened, without
        deciding the run's state. ``True`` (default): the acquire operator's defaults (wait up to
        2 h for another run, giving the worker slot back between asks; ttl 1 h); a mapping sets them
        (``ttl_seconds``, ``on_busy`` = ``"wait"``/``"skip"``/``"fail"``, ``wait_timeout_seconds``,
        ``poke_interval_seconds``, ``holder``; templated); ``False``: no lease (another run may
        then expire and clean while this one rewrites).
    :param approve_deletions_over: a :class:`~airflow_lake_provider.core.approval.DeletionThreshold`
        (or a mapping of its fields, templated): expire and clean each run first as a dry run
        (``expire_preview``, ``clean_preview``), then through an approval gate (``approve_expire``,
        ``approve_clean``) that waits for a person when the deletion goes over the threshold, and
        remove only what the gate passed. A reject skips the rest of the group's deletions.
        ``None`` (default): no previews, no gates (docs/operators/approval.md).
    :param approval_timeout: how long a gate waits for a person (a ``timedelta`` or ``"36h"``); no answer
        in time fails the gate and the run (no answer is no approval). ``None`` (default): it waits until answered.
    """
    plan_args = step_arguments(IcebergRewritePlanOperator, plan, where="plan")
    rewrite_args = step_arguments(IcebergRewriteDataFilesOperator, rewrite, where="rewrite")
    expire_given = step_arguments(IcebergExpireSnapshotsOperator, expire, where="expire")
    clean_given = step_arguments(IcebergCleanPolicyOperator, clean, where="clean")
    dry: dict[str, Any] = {} if dry_run is None else {"dry_run": dry_run}
    templated = "{{" in table
    if group_id is None:
        if templated:
            raise LakeConfigError(f"lake_maintenance_group: give a group_id; the table {table!r} is a template, "
                                  "so the group's id cannot be derived from it.")
        group_id = table.replace(".", "_")
    if tooltip is None:
        tooltip = "plan >> rewrite >> expire >> clean" + ("" if templated else f" {table}")
    lease_options = _lease_options(lease)
    common = {"table": table, "lake_conn_id": lake_conn_id, "spark_conn_id": spark_conn_id, **operator_kwargs}
    group = LakeMaintenanceGroup(group_id=group_id, prefix_group_id=prefix_group_id, tooltip=tooltip)
    with group:
        acquire = None
        if lease_options is not None:
            acquire = IcebergAcquireLeaseOperator(task_id=ACQUIRE_LEASE, table=table, lake_conn_id=lake_conn_id,
                                                  **dry, **lease_options)
            # Every step holds the run's lease; without it (acquire skipped) a step skips itself. A
            # pull by the acquire task object's own id, not an XComArg: an XComArg would also add an
            # edge from the setup to expire and clean, and Airflow allows only all_success tasks
            # right after a setup (they run under cleanup_trigger_rule).
            common.update(lease=f"{{{{ ti.xcom_pull(task_ids='{acquire.task_id}') }}}}", require_lease=True)
        plan_task = IcebergRewritePlanOperator(task_id=PLAN, **{**common, **plan_args})
        rewrite_task = IcebergRewriteDataFilesOperator(
            # The XComArgs here (plan, approved, lease) are the upstream results once Airflow resolves them.
            task_id=REWRITE, **{**common, **rewrite_args, **dry}, plan=cast("dict[str, Any]", plan_task.output),
            require_plan=True,
        )
        if isinstance(approve_deletions_over, DeletionThreshold):
            approve_deletions_over.validate()
        expire_args = {**common, **expire_given, "protected_snapshot_ids": rewrite_task.output,
                       "trigger_rule": cleanup_trigger_rule}

        def clean_args(expire_step: Any) -> dict[str, Any]:
            return {**common, **clean_given, "protected_snapshot_ids": [rewrite_task.output, expire_step.output],
                    "expire_result": expire_step.output, "trigger_rule": cleanup_trigger_rule}

        def gate(step: str, task_id: str, preview: Any, also_skip: list[str],
                 threshold: DeletionThreshold | Mapping[str, Any]) -> LakeDeletionApprovalOperator:
            return LakeDeletionApprovalOperator(
                task_id=task_id, table=table, step=step, preview=preview.output, threshold=threshold,
                lake_conn_id=lake_conn_id, also_skip_on_reject=[group.child_id(label) for label in also_skip],
                response_timeout=None if approval_timeout is None else duration(approval_timeout, "approval_timeout"))

        if approve_deletions_over is None:
            expire_task = IcebergExpireSnapshotsOperator(task_id=EXPIRE, **expire_args, **dry)
            clean_task = IcebergCleanPolicyOperator(task_id=CLEAN, **clean_args(expire_task), **dry)
            plan_task >> rewrite_task >> expire_task >> clean_task
        else:
            expire_preview = IcebergExpireSnapshotsOperator(task_id=EXPIRE_PREVIEW, **expire_args, dry_run=True)
            approve_expire = gate(EXPIRE, APPROVE_EXPIRE, expire_preview, [CLEAN_PREVIEW, APPROVE_CLEAN, CLEAN],
                                  approve_deletions_over)
            # The step runs after a skipped rewrite too (cleanup_trigger_rule), so the trigger rule cannot
            # be what stops it: require_approval makes it skip itself when its gate passed nothing, and a
            # gate that failed or timed out fails it (none_failed).
            expire_task = IcebergExpireSnapshotsOperator(task_id=EXPIRE, **expire_args,
                                                         approved=cast("dict[str, Any]", approve_expire.output),
                                                         require_approval=True, **dry)
            clean_preview = IcebergCleanPolicyOperator(task_id=CLEAN_PREVIEW, **clean_args(expire_task), dry_run=True)
            approve_clean = gate(CLEAN, APPROVE_CLEAN, clean_preview, [], approve_deletions_over)
            clean_task = IcebergCleanPolicyOperator(task_id=CLEAN, **clean_args(expire_task),
                                                    approved=cast("dict[str, Any]", approve_clean.output),
                                                    require_approval=True, **dry)
            (plan_task >> rewrite_task >> expire_preview >> approve_expire >> expire_task >> clean_preview
             >> approve_clean >> clean_task)
        if acquire is not None:
            # Setup and teardown: the release runs after clean whatever happened (not when the
            # acquire itself skipped or failed: then there is nothing to give back), and Airflow
            # leaves it out of the run's state and of the group's leaves.
            release = IcebergReleaseLeaseOperator(task_id=RELEASE_LEASE, lease=cast("dict[str, Any]", acquire.output),
                                                  lake_conn_id=lake_conn_id)
            acquire.as_setup() >> plan_task
            clean_task >> release.as_teardown(setups=acquire)
    return group


def _lease_options(lease: bool | Mapping[str, Any]) -> dict[str, Any] | None:
    """The acquire operator's settings from ``lease=`` (``None``: no lease)."""
    if isinstance(lease, Mapping):
        unknown = sorted(set(lease) - set(LEASE_OPTIONS))
        if unknown:
            raise LakeConfigError(f"lake_maintenance_group: lease= knows {', '.join(LEASE_OPTIONS)}; got "
                                  f"{', '.join(unknown)}.")
        return dict(lease)
    if isinstance(lease, bool):
        return {} if lease else None
    raise LakeConfigError(
        f"lake_maintenance_group: lease must be True, False or a mapping of {', '.join(LEASE_OPTIONS)}; "
        f"got {lease!r}."
    )
