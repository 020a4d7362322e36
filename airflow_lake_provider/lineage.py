"""OpenLineage for the maintenance steps: optional, imported only when the provider is installed.

Each step reports its table as the input (and, for steps that change it, the output) dataset,
named as OpenLineage's Spark integration names an Iceberg table (its location, see
:mod:`airflow_lake_provider.core.naming`) with a symlink to the catalog's name, and a run facet
``lakeMaintenance`` carrying the step's figures. Its Spark job gets the parent-job settings
(``spark.openlineage.parent*``), so Spark's own lineage links to the Airflow task. Without
``apache-airflow-providers-openlineage`` every function here returns nothing and the steps run
unchanged. See docs/lineage.md.
"""

from __future__ import annotations

from typing import Any

from airflow_lake_provider.core.naming import catalog_symlink, location_dataset

#: The run facet's name in OpenLineage events.
FACET_NAME = "lakeMaintenance"
# The figures the facet carries, from a step's XCom result (missing ones are left out).
_RESULT_FIGURES = ("snapshot_id", "snapshot_id_before", "snapshot_id_after", "committed_snapshot_ids",
                   "rewritten_data_files", "added_data_files", "rewritten_bytes", "removed_delete_files",
                   "expired_snapshot_ids", "orphan_file_count", "quarantined_file_count", "dry_run")


def openlineage_enabled() -> bool:
    """Whether the OpenLineage provider is installed and not switched off."""
    try:
        from airflow.providers.openlineage.conf import is_disabled
    except ImportError:
        return False
    return not is_disabled()


def spark_parent_properties(context: Any) -> dict[str, str]:
    """``spark.openlineage.parent*`` settings linking a Spark job to the task (empty without OpenLineage)."""
    if context is None or not openlineage_enabled():
        return {}
    from airflow.providers.openlineage.utils.spark import inject_parent_job_information_into_spark_properties

    return {k: str(v) for k, v in inject_parent_job_information_into_spark_properties({}, context).items()}


def maintenance_figures(step: str, table: str, result: Any, before: dict | None, after: dict | None) -> dict[str, Any]:
    """The facet's content: the step, the table, its figures before and after, and the result's own."""
    result = result if isinstance(result, dict) else {}
    figures: dict[str, Any] = {"step": step, "table": table}
    figures.update({key: result[key] for key in _RESULT_FIGURES if key in result})
    if before is not None:
        figures["before"] = dict(before)
    if after is not None:
        figures["after"] = dict(after)
    return figures


def operator_lineage(*, step: str, location: str, table: str, catalog_uri: str | None, changes_table: bool,
                     result: Any = None, states: tuple[dict, dict] | None = None):
    """The ``OperatorLineage`` of one step, or ``None`` without the OpenLineage provider; its facet
    carries the step's figures (:func:`maintenance_figures`: of ``result`` and the table's ``states``
    before and after, when the step has them)."""
    try:
        import attrs
        from airflow.providers.openlineage.extractors import OperatorLineage
        from openlineage.client.event_v2 import Dataset
        from openlineage.client.facet_v2 import RunFacet, symlinks_dataset
    except ImportError:
        return None

    @attrs.define
    class LakeMaintenanceRunFacet(RunFacet):
        """What the maintenance step did (this package's facet)."""

        step: str
        table: str
        figures: dict

    figures = maintenance_figures(step, table, result, *(states or (None, None)))
    named = location_dataset(location)
    symlink = catalog_symlink(catalog_uri, table)
    dataset = Dataset(namespace=named.namespace, name=named.name, facets={
        "symlinks": symlinks_dataset.SymlinksDatasetFacet(identifiers=[
            symlinks_dataset.Identifier(namespace=symlink.namespace, name=symlink.name, type="TABLE")])})
    facet = LakeMaintenanceRunFacet(step=figures["step"], table=table, figures=figures)
    return OperatorLineage(inputs=[dataset], outputs=[dataset] if changes_table else [],
                           run_facets={FACET_NAME: facet})
