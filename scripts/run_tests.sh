#!/usr/bin/env bash
# `make test`: ruff and mypy first (scripts/lint.sh, seconds), then the tests marked both_tracks on
# the other Spark track (its own venv, made by bootstrap), then the whole suite on this one, so the
# output ends with the suite's ten slowest tests. A lint finding does not stop the tests; the run
# fails when the lint or either test run failed. Arguments go to the whole suite's pytest.
set -uo pipefail
cd "$(dirname "$0")/.."
LAKE_SPARK=${LAKE_SPARK:-4.1}
if [ "$LAKE_SPARK" = "3.5" ]; then other=4.1; else other=3.5; fi
other_venv=.venv-spark$other
status=0
lint_status=0
echo "== Lint: ruff and mypy (make lint)"
LAKE_VENV=.venv bash scripts/lint.sh || lint_status=1
if [ -z "${LAKE_ONE_TRACK:-}" ]; then
  echo "== Spark $other track: the tests marked both_tracks (LAKE_ONE_TRACK=1 skips them)"
  if LAKE_SPARK=$other LAKE_VENV=$other_venv bash scripts/bootstrap.sh; then
    # Of the table kinds, v2, v3 and equality deletes (tests/dags/lake_table_kinds.py); of the rewrite
    # oracle's generated tables, 2 beside its regression cases (4 on the whole suite's track).
    LAKE_TABLE_KINDS=v2_position_deletes,v3_deletion_vectors,equality_deletes LAKE_ORACLE_EXAMPLES=2 \
      PATH="$PWD/$other_venv/bin:$PATH" "$other_venv/bin/python" -m pytest -m both_tracks -p no:cacheprovider \
      --durations=0 --durations-min=30 || status=1
  else
    status=1
  fi
fi
echo "== Spark $LAKE_SPARK track: the whole suite"
.venv/bin/python -m pytest "$@" || status=1
if [ $lint_status -ne 0 ]; then
  echo "== Lint failed: ruff or mypy reported findings (at the start of this output; make lint repeats them)" >&2
  status=1
fi
exit $status
