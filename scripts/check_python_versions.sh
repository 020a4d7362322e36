#!/usr/bin/env bash
# Install the package on each Python version found and run the tests that need no Spark or
# Airflow server (pure logic, contracts, operator conventions, imports). Not part of `make test`
# (a fresh environment per version takes minutes). Usage: scripts/check_python_versions.sh [3.10 3.12 ...]
# Interpreters: python3.X on PATH, or pyenv's (~/.pyenv/versions/3.X.*). Prints one line per version.
set -uo pipefail
cd "$(dirname "$0")/.."
versions=("${@:-3.10 3.11 3.12 3.13}")
[ $# -eq 0 ] && versions=(3.10 3.11 3.12 3.13)
TESTS="tests/test_naming.py tests/test_asset_events.py tests/test_planning_unit.py tests/test_coercion.py
tests/test_contracts_retention.py tests/test_contracts_rewrite.py tests/test_retention_unit.py
tests/test_orphan_guard_unit.py tests/test_approval_unit.py tests/test_operator_conventions.py
tests/test_bad_input_catalogue.py"
for version in "${versions[@]}"; do
  python=$(ls -d "$HOME"/.pyenv/versions/"$version".*/bin/python 2>/dev/null | tail -1)
  [ -z "$python" ] && python=$(command -v "python$version")
  if [ -z "$python" ] || ! "$python" --version >/dev/null 2>&1; then echo "Python $version: not found on this machine"; continue; fi
  venv=$(mktemp -d "/tmp/lake-py$version-XXXX")
  log="$venv/log.txt"
  # Built from a copy: building in the checkout would leave build/ and *.egg-info in it.
  mkdir "$venv/src" && cp -r pyproject.toml README.md airflow_lake_provider "$venv/src/"
  if ! { "$python" -m venv "$venv/venv" && "$venv/venv/bin/pip" install -q --upgrade pip \
         && "$venv/venv/bin/pip" install -q "$venv/src[test]"; } >"$log" 2>&1; then
    echo "Python $version ($("$python" --version 2>&1)): install FAILED: $(grep -E 'ERROR' "$log" | tail -1 | cut -c1-200) (log: $log)"
    continue
  fi
  if (cd "$venv" && cp -r "$OLDPWD/tests" "$OLDPWD/scripts" "$OLDPWD/docs" "$OLDPWD/pyproject.toml" . \
      && PYTHONPATH="$venv:$venv/scripts" "$venv/venv/bin/python" -m pytest -q -p no:cacheprovider $TESTS) >>"$log" 2>&1; then
    echo "Python $version ($("$python" --version 2>&1)): installed; $(grep -E '[0-9]+ passed' "$log" | tail -1)"
  else
    echo "Python $version ($("$python" --version 2>&1)): installed; tests FAILED: $(grep -E 'passed|failed|error' "$log" | tail -1) (log: $log)"
  fi
done
