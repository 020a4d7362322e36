#!/usr/bin/env bash
# `make test`: the tests marked both_tracks on the other Spark track first (its own venv, made by
# bootstrap), then the whole suite on this one, so the output ends with the suite's ten slowest
# tests. Fails when either run failed. Arguments go to the whole suite's pytest.
set -uo pipefail
cd "$(dirname "$0")/.."
LAKE_SPARK=${LAKE_SPARK:-4.1}
if [ "$LAKE_SPARK" = "3.5" ]; then other=4.1; else other=3.5; fi
other_venv=.venv-spark$other
status=0
if [ -z "${LAKE_ONE_TRACK:-}" ]; then
  echo "== Spark $other track: the tests marked both_tracks (LAKE_ONE_TRACK=1 skips them)"
  if LAKE_SPARK=$other LAKE_VENV=$other_venv bash scripts/bootstrap.sh; then
    # Of the table kinds, v2, v3 and equality deletes (tests/dags/lake_table_kinds.py).
    LAKE_TABLE_KINDS=v2_position_deletes,v3_deletion_vectors,equality_deletes \
      PATH="$PWD/$other_venv/bin:$PATH" "$other_venv/bin/python" -m pytest -m both_tracks -p no:cacheprovider \
      --durations=0 --durations-min=30 || status=1
  else
    status=1
  fi
fi
echo "== Spark $LAKE_SPARK track: the whole suite"
.venv/bin/python -m pytest "$@" || status=1
exit $status
