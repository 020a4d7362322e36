#!/usr/bin/env bash
# `make lint`, and the first step of `make test` (scripts/run_tests.sh): ruff, then mypy, on the
# package and the example DAGs, as pyproject.toml's [tool.ruff] and [tool.mypy] configure them.
# Both always run, each with its time; fails when either reported a finding. A few seconds with
# mypy's cache (.mypy_cache), about 20 without it.
set -uo pipefail
cd "$(dirname "$0")/.."
VENV=${LAKE_VENV:-.venv}
status=0
TIMEFORMAT="lint: ruff took %Rs"
time { "$VENV/bin/ruff" check airflow_lake_provider dags || status=1; }
TIMEFORMAT="lint: mypy took %Rs"
# mypy's files (the package and dags/) are in [tool.mypy].
time { "$VENV/bin/mypy" || status=1; }
exit $status
