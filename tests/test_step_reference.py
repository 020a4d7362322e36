"""A step's settings are declared once: the operator, the group and the docs are derived from them."""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path

import pytest

from airflow_lake_provider.exceptions import LakeConfigError
from airflow_lake_provider.operators.base import LakeMaintenanceOperator
from airflow_lake_provider.steps import reference
from airflow_lake_provider.steps.base import Step, setting
from airflow_lake_provider.steps.clean import CleanStep
from airflow_lake_provider.steps.rewrite import RewriteStep

DOCS = Path(__file__).resolve().parent.parent / "docs"


@pytest.mark.parametrize("page", sorted(reference.PAGES))
def test_each_steps_page_lists_exactly_its_settings(page):
    text = (DOCS / "operators" / page).read_text()
    assert reference.block(reference.PAGES[page]) in text, f"docs/operators/{page} is stale: run `make docs`"


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
