"""A step's settings are declared once: the operator, the group and the docs are derived from them."""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path

import pytest

from airflow_lake_provider.exceptions import LakeConfigError
from airflow_lake_provider.operators.base import LakeMaintenanceOperator
from airflow_lake_provider.steps import reference
from airflow_lake_provider.core.settings import setting
from airflow_lake_provider.steps.base import Step
from airflow_lake_provider.steps.clean import CleanStep
from airflow_lake_provider.steps.rewrite import RewriteStep

DOCS = Path(__file__).resolve().parent.parent / "docs"


@pytest.mark.parametrize("page", sorted(reference.pages(DOCS)), ids=lambda p: p.name)
def test_each_steps_page_lists_exactly_its_settings(page):
    assert reference.block(reference.pages(DOCS)[page]) in page.read_text(), f"{page} is stale: run `make docs`"


def test_a_setting_added_to_a_step_reaches_the_operator_the_group_check_and_the_docs():
    @dataclasses.dataclass(kw_only=True)
    class TunedStep(RewriteStep):
        name = "tuned"
        spill_ratio: float = setting(0.5, doc="How much of a group may spill to disk.")

    class TunedOperator(LakeMaintenanceOperator):
        step_class = TunedStep

    parameters = inspect.signature(TunedOperator.__init__).parameters
    assert parameters["spill_ratio"].default == 0.5 and parameters["strategy"].default == "binpack"
    assert "spill_ratio" in TunedOperator.template_fields
    assert ":param spill_ratio: How much of a group may spill to disk." in TunedOperator.__doc__
    assert "| `spill_ratio` | `0.5` | How much of a group may spill to disk. |" in reference.settings_table(TunedStep)
    operator = TunedOperator(task_id="t", table="db.events", spill_ratio="0.25", default_args={"rewriter": "iceberg"})
    operator.coerce_rendered_fields()
    step = operator.step({})
    assert isinstance(step, TunedStep) and step.spill_ratio == 0.25 and step.rewriter == "iceberg"
    TunedStep.check({"spill_ratio": "{{ params.ratio }}"}, where="g")  # known at run time only
    with pytest.raises(LakeConfigError, match="spill_ratio must be a number"):
        TunedStep.check({"spill_ratio": "lots"}, where="g")


def test_every_operator_parameter_of_a_step_is_the_steps_setting_with_its_default():
    from airflow_lake_provider.operators.clean import IcebergCleanPolicyOperator

    parameters = inspect.signature(IcebergCleanPolicyOperator.__init__).parameters
    for s in CleanStep.settings():
        assert parameters[s.name].default == s.default
    operator = IcebergCleanPolicyOperator(task_id="clean", table="db.events", quarantine_days=0)
    step = operator.step({})
    assert isinstance(step, CleanStep) and step.quarantine_days == 0 and step.policy == "KEEP_LATEST_COMMITS"


def test_an_unknown_setting_is_named_with_the_closest_one():
    with pytest.raises(LakeConfigError, match="no setting 'quarantin_days'; did you mean 'quarantine_days'"):
        CleanStep.check({"quarantin_days": 0}, where="here")
    with pytest.raises(LakeConfigError, match="wired by the maintenance group"):
        CleanStep.check({"expire_result": {}}, where="here")


def test_settings_are_documented():
    for step in (*reference.PAGES.values(),):
        assert issubclass(step, Step)
        assert all(s.doc.strip() for s in step.settings())


def test_the_group_hands_each_step_its_own_settings_and_refuses_a_typo_at_parse(bad_input):
    from airflow.sdk import DAG

    from airflow_lake_provider.task_group import lake_maintenance_group

    with DAG("settings_by_step", schedule=None):
        group = lake_maintenance_group(
            table="shop.orders",
            rewrite={"options": {"partial-progress.enabled": "true"}, "driver_memory": "4g"},
            clean={"quarantine_days": 0, "quarantine_location": "/lake/quarantine"},
            expire={"older_than": "{{ params.older_than }}"},
            retries=2,
        )
        assert group.clean.quarantine_days == 0 and group.clean.quarantine_location == "/lake/quarantine"
        assert group.rewrite.options == {"partial-progress.enabled": "true"}
        assert group.rewrite.driver_memory == "4g" and group.expire.driver_memory is None
        assert {group.plan.retries, group.clean.retries} == {2}
        assert group.expire.older_than == "{{ params.older_than }}"
        for given, message in (
            ({"clean": {"quarantin_days": 0}}, "no setting 'quarantin_days'; did you mean 'quarantine_days'"),
            ({"plan": {"min_input_files": "many"}}, "min_input_files must be a whole number"),
            ({"rewrite": {"plan": {}}}, "wired by the maintenance group"),
            ({"expire": {"dry_run": True}}, "dry_run is set by the group"),
            ({"clean": {"policy": "KEEP_LAST_COMMITS"}},
             "policy must be one of KEEP_LATEST_COMMITS, .*; got 'KEEP_LAST_COMMITS' .did you mean 'KEEP_LATEST_COMMITS'"),
            ({"plan": {"engine": "spak"}}, "engine must be one of auto, pyiceberg, spark; got 'spak'"),
        ):
            with pytest.raises(LakeConfigError, match=message) as raised:
                lake_maintenance_group(table="shop.returns", **given)
            step, settings = next(iter(given.items()))
            bad_input(f"lake_maintenance_group({step}=...)", settings, raised.value)


def test_a_closed_setting_is_checked_at_parse_on_the_operator_and_marked_by_the_form(bad_input):
    """Values from a fixed list (policy, engine, scope, strategy, rewriter): an operator's literal is
    refused when the DAG is parsed, a template passes to run time, and the form offers the list."""
    from airflow.sdk import DAG

    from airflow_lake_provider.operators.clean import IcebergCleanPolicyOperator
    from airflow_lake_provider.operators.rewrite import IcebergRewriteDataFilesOperator
    from airflow_lake_provider.steps.plan import PlanStep

    with DAG("closed_settings", schedule=None):
        with pytest.raises(LakeConfigError, match="strategy must be one of binpack, sort, zorder; got 'z-order'") as raised:
            IcebergRewriteDataFilesOperator(task_id="rewrite", table="shop.orders", strategy="z-order")
        bad_input("IcebergRewriteDataFilesOperator(strategy=...)", "z-order", raised.value)
        clean = IcebergCleanPolicyOperator(task_id="clean", table="shop.orders", policy="{{ params.policy }}")
        assert clean.policy == "{{ params.policy }}"
    assert CleanStep(table="shop.orders", policy="keep_latest_by_hours").policy == "KEEP_LATEST_BY_HOURS"
    engine = reference.form_schema(PlanStep)["properties"]["engine"]
    assert engine["enum"] == ["auto", "pyiceberg", "spark"]
