"""Build tables that need maintenance (tests, benchmarks, ``make demo``): the installed
:mod:`airflow_lake_provider.demo`, under the name the tests import."""

from airflow_lake_provider.demo import (  # noqa: F401 - re-exported
    EVENTS_SCHEMA,
    _batch,
    build_demo_table,
    create_events_table,
    snapshot_clock,
)
