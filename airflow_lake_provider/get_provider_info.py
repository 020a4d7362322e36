"""The provider info Airflow reads through the ``apache_airflow_provider`` entry point."""

from __future__ import annotations

from typing import Any

from airflow_lake_provider import __version__

CONNECTION_UI_FIELD_BEHAVIOUR: dict[str, Any] = {
    # Airflow reads provider info in kebab case ("hidden-fields"); the hook method below uses snake case.
    "hidden-fields": ["schema", "port"],
    "relabeling": {
        "host": "Catalog URI",
        "login": "User / OAuth client id",
        "password": "Password / token",
    },
    "placeholders": {
        "host": "sqlite:////data/lake/catalog.db | postgresql://127.0.0.1:5432/lake | https://rest-catalog:8181 | thrift://metastore:9083",
        "login": "catalog database user (sql) or OAuth client id (rest)",
        "password": "database password (sql) or token / client secret (rest)",
        "catalog_name": "lake",
        "catalog_kind": "sql",
        "warehouse": "file:///data/lake/warehouse",
        "properties": '{"s3.endpoint": "http://127.0.0.1:9000"}',
        "spark_jars": "/opt/jars/iceberg-aws-bundle.jar",
    },
}


def _string_field(
    label: str, description: str, *, enum: list[str] | None = None, default: str | None = None
) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": ["string", "null"]}
    if enum:
        schema["enum"] = enum
    if default is not None:
        schema["default"] = default
    return {"label": label, "description": description, "schema": schema}


CONNECTION_FIELDS: dict[str, Any] = {
    "catalog_name": _string_field(
        "Catalog name", "Name of the catalog; also the Spark catalog name (lake.db.table).", default="lake"
    ),
    "catalog_kind": _string_field(
        "Catalog kind",
        "sql (SQLite or PostgreSQL database), rest (Iceberg REST catalog) or hive (metastore).",
        enum=["sql", "rest", "hive"],
        default="sql",
    ),
    "warehouse": _string_field("Warehouse", "Root location of table data, e.g. file:///data/warehouse or s3://bucket/wh."),
    "properties": _string_field("Catalog properties (JSON)", "Extra catalog properties given to PyIceberg and Spark."),
    "spark_properties": _string_field("Spark-only catalog properties (JSON)",
                                      "Extra catalog properties for Spark only."),
    "pyiceberg_properties": _string_field("PyIceberg-only properties (JSON)", "Extra properties for PyIceberg only."),
    "spark_conf": _string_field("Spark configuration (JSON)", (
        "Raw Spark settings for the jobs, e.g. spark.sql.shuffle.partitions (S3 endpoints and keys: the "
        "Extra's s3.* keys, given once).")),
    "spark_jars": _string_field("Extra jars", "Comma-separated jar paths added to every job (e.g. cloud bundles)."),
    "spark_packages": _string_field(
        "Maven packages", "Comma-separated coordinates for --packages, where Maven Central is reachable."
    ),
    "lease_namespace": _string_field("Lease namespace", (
        "Where the tables' maintenance leases live (default lake_maintenance): a namespace the maintainer "
        "may create tables in.")),
    "iceberg_runtime_provided": {
        "label": "Iceberg runtime provided",
        "description": "The cluster's Spark image already has the Iceberg Spark runtime: ship no runtime jar.",
        "schema": {"type": ["boolean", "null"]},
    },
}


def get_provider_info() -> dict[str, Any]:
    return {
        "package-name": "airflow-lake-provider",
        "name": "Iceberg Lake Maintenance",
        "description": "Plan, rewrite, expire and clean Apache Iceberg tables from Airflow.",
        "versions": [__version__],
        "connection-types": [
            {
                "connection-type": "iceberg_lake",
                "hook-class-name": "airflow_lake_provider.hooks.lake.IcebergLakeHook",
                "hook-name": "Iceberg Lake",
                "ui-field-behaviour": CONNECTION_UI_FIELD_BEHAVIOUR,
                "conn-fields": CONNECTION_FIELDS,
            }
        ],
        "hooks": [
            {
                "integration-name": "Iceberg Lake",
                "python-modules": [
                    "airflow_lake_provider.hooks.lake",
                    "airflow_lake_provider.hooks.spark_job",
                    "airflow_lake_provider.hooks.lease",
                ],
            }
        ],
        "operators": [
            {
                "integration-name": "Iceberg Lake",
                "python-modules": [
                    "airflow_lake_provider.operators.plan",
                    "airflow_lake_provider.operators.rewrite",
                    "airflow_lake_provider.operators.expire",
                    "airflow_lake_provider.operators.clean",
                    "airflow_lake_provider.operators.restore",
                    "airflow_lake_provider.operators.convert_equality_deletes",
                    "airflow_lake_provider.operators.repair_deletion_vectors",
                    "airflow_lake_provider.operators.lease",
                    "airflow_lake_provider.operators.fleet",
                ],
            }
        ],
        "sensors": [
            {
                "integration-name": "Iceberg Lake",
                "python-modules": [
                    "airflow_lake_provider.sensors.health",
                    "airflow_lake_provider.sensors.snapshot",
                ],
            }
        ],
        "triggers": [
            {
                "integration-name": "Iceberg Lake",
                "python-modules": [
                    "airflow_lake_provider.triggers.health",
                    "airflow_lake_provider.triggers.snapshot",
                    "airflow_lake_provider.triggers.maintenance_needed",
                ],
            }
        ],
        "extra-links": ["airflow_lake_provider.links.SparkHistoryLink"],
        "integrations": [
            {
                "integration-name": "Iceberg Lake",
                "external-doc-url": "https://iceberg.apache.org/docs/latest/maintenance/",
                "tags": ["software"],
            }
        ],
    }
