#!/usr/bin/env bash
# Proves that the package installs into a user's existing Airflow image without pip touching what
# is already there: for each supported Spark track it makes a fresh venv holding what such an
# image has (Airflow, the Spark provider; resolved unpinned, as a user's image is), installs the
# wheel built from this checkout WITH its dependencies as the README's install line does, and checks that
#   - no package already installed was upgraded, downgraded or removed but those the README says
#     the line moves (the ones added are our package and the dependencies the image did not have yet,
#     e.g. pyiceberg; they are listed);
#   - `pip check` is clean;
#   - the installed package imports and picks the Iceberg runtime of that Spark line;
#   - the wheel installed alone beside the Spark provider 6 (pip puts pyspark 4.1.x over its
#     pyspark-client 4.2.0) is refused with the package's sentence.
# A conflict between our bounds (pyproject.toml) and the image would make pip change a package
# (or fail to resolve): the track then FAILs and the changes are printed.
# Not part of `make test` (two fresh environments take minutes and need the package index).
# Usage: scripts/check_install.sh   (PYTHON=python3.X to use another interpreter; default python3.11)
# Prints one line per environment and writes test-output/generated/install-check.json; exits
# non-zero when an environment failed (its work directory and logs are then kept and named).
set -uo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
PYTHON=${PYTHON:-python3.11}
# Nothing from the caller's environment may change what pip resolves or what Python imports.
unset PYTHONPATH PIP_CONSTRAINT PIP_NO_DEPS PIP_USER PIP_TARGET PIP_PREFIX PIP_REQUIREMENT
export PIP_DISABLE_PIP_VERSION_CHECK=1

# name | slug | requirements pre-installed (the user's image, as pip resolves them unpinned) | what is
# installed with the wheel (the README's install line) | the pre-installed packages that line may change
# (the README says so) | what the import line must start with ("REFUSED: ..." -> the import must fail so).
ENV_NAMES=("provider 6.3 / Spark 4.1, the README's line" "provider 5.6 / Spark 3.5, the README's line"
           "provider 6.3, the wheel alone (must be refused)")
ENV_SLUGS=(spark4.1 spark3.5 spark4.1-unpinned)
ENV_REQS=('apache-airflow==3.3.2 apache-airflow-providers-apache-spark[pyspark]==6.3.4'
          'apache-airflow==3.3.2 apache-airflow-providers-apache-spark==5.6.0 pyspark==3.5.9'
          'apache-airflow==3.3.2 apache-airflow-providers-apache-spark[pyspark]==6.3.4')
ENV_WITH=('pyspark==4.1.3 pyspark-client==4.1.3' 'pyspark==3.5.9' '')
ENV_MAY_CHANGE=('pyspark pyspark-client' '' 'pyspark pyspark-client')
ENV_EXPECT=('4.1.3 org.apache.iceberg:iceberg-spark-runtime-4.1_2.13:'
            '3.5.9 org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:'
            'REFUSED: airflow_lake_provider.exceptions.LakeConfigError: pyspark 4.1.4 and pyspark-client 4.2.0 are both installed')
# The package's own check first: a pyspark/ directory of two Spark releases may not import at all.
IMPORT_CHECK='import airflow_lake_provider.jars as j; line = j.spark_line(); import pyspark; from pyspark.sql import SparkSession; print(pyspark.__version__, line.iceberg_runtime)'

out_dir=test-output/generated
out="$out_dir/install-check.json"
if ! "$PYTHON" --version >/dev/null 2>&1; then echo "FAIL: interpreter $PYTHON not found (set PYTHON)"; exit 2; fi
work=$(mktemp -d /tmp/lake-install-check-XXXX)
keep_work=0
cleanup() { [ "$keep_work" -eq 0 ] && rm -rf "$work"; }
trap cleanup EXIT

# The wheel, built once from a clean copy of the checkout's package sources: building in the
# checkout would leave build/ and *.egg-info there, and setuptools' build/lib keeps modules deleted
# since the previous run, which would then ship in this run's wheel.
mkdir -p "$work/src" "$work/wheel"
cp pyproject.toml README.md "$work/src/"
for f in LICENSE* NOTICE* MANIFEST.in setup.cfg setup.py; do [ -e "$f" ] && cp "$f" "$work/src/"; done
tar -C "$repo" --exclude=__pycache__ --exclude='*.pyc' -cf - airflow_lake_provider | tar -C "$work/src" -xf -
if ! (cd "$work/src" && "$PYTHON" -m pip wheel -q --no-deps -w "$work/wheel" .) >"$work/build.log" 2>&1; then
  keep_work=1
  echo "FAIL: building the wheel: $(grep -E 'ERROR|error' "$work/build.log" | tail -1 | cut -c1-200) (log: $work/build.log)"
  exit 1
fi
wheel=$(ls "$work"/wheel/airflow_lake_provider-*.whl)

# Compares the two freezes, judges the results of one environment, prints its summary line and
# writes its JSON object. Arguments: the environment's directory, its name, the expected prefix.
cat >"$work/judge.py" <<'PY'
import datetime, json, re, sys
from pathlib import Path

d, name, expect, may_change = Path(sys.argv[1]), sys.argv[2], sys.argv[3], set(sys.argv[4].split())
ours = "airflow-lake-provider"
read = lambda f: (d / f).read_text() if (d / f).exists() else ""

def freeze(text):
    pkgs = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if " @ " in line:
            pkg, _, ver = line.partition(" @ ")
        else:
            pkg, _, ver = line.partition("==")
        pkgs[re.sub(r"[-_.]+", "-", pkg).lower()] = ver.strip()
    return pkgs

step_failed = read("failed_step").strip()
before, after = freeze(read("before.txt")), freeze(read("after.txt"))
changes = [(p, f"{p}: {before[p]} -> {after[p] if p in after else '(removed)'}")
           for p in sorted(before) if after.get(p) != before[p]] if after else []
changed = [text for p, text in changes if p not in may_change]
expected_changes = [text for p, text in changes if p in may_change]
added = [f"{p}=={after[p]}" if p != ours else ours for p in sorted(set(after) - set(before))]
pip_check, pip_check_rc = read("pip_check.txt").strip(), read("pip_check.rc").strip()
import_out, import_rc = read("import.txt").strip(), read("import.rc").strip()
import_line = import_out.splitlines()[-1] if import_out else ""

reasons = []
if step_failed:
    reasons.append(step_failed)
else:
    if ours not in after:
        reasons.append(f"{ours} not installed")
    if changed:
        reasons.append(f"pip changed {len(changed)} pre-installed package(s): {'; '.join(changed)}")
    if pip_check_rc != "0":
        reasons.append(f"pip check: {' | '.join(pip_check.splitlines()[:3])}")
    refusal = expect.removeprefix("REFUSED: ") if expect.startswith("REFUSED: ") else None
    if refusal is not None:  # the package must refuse this environment, with its sentence
        if import_rc == "0" or not import_line.startswith(refusal):
            reasons.append(f"import check: expected the refusal '{refusal}...', got: {import_line[:200]}")
    elif import_rc != "0" or not import_line.startswith(expect):
        last = import_out.splitlines()[-1] if import_out else "(no output)"
        reasons.append(f"import check: expected '{expect}...', got: {last[:200]}")
passed = not reasons
deps = [a for a in added if a != ours]
detail = (f"{import_line[:160]}; moved as expected: {'; '.join(expected_changes) or 'nothing'}; pip check "
          f"clean; added {ours} + {len(deps)} dependencies of it ({', '.join(a.split('==')[0] for a in deps) or 'none'})")
print(f"{name}: {'PASS' if passed else 'FAIL'}: {detail if passed else ' / '.join(reasons)}")
(d / "result.json").write_text(json.dumps({
    "environment": name,
    "preinstalled": read("reqs.txt").split(),
    "python": read("python_version.txt").strip(),
    "wheel": read("wheel.txt").strip(),
    "passed": passed,
    "reason": "; ".join(reasons),
    "changed_packages": changed,
    "expected_changes": expected_changes,
    "added_packages": added,
    "pip_check": pip_check,
    "import_output": import_out,
    "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
}, indent=2))
sys.exit(0 if passed else 1)
PY

failed=0
for i in "${!ENV_NAMES[@]}"; do
  name=${ENV_NAMES[$i]}
  dir="$work/${ENV_SLUGS[$i]}"
  read -ra reqs <<<"${ENV_REQS[$i]}"
  mkdir -p "$dir/airflow_home"
  log="$dir/log.txt"
  printf '%s\n' "${reqs[@]}" >"$dir/reqs.txt"
  basename "$wheel" >"$dir/wheel.txt"
  py="$dir/venv/bin/python"
  step() {  # step DESCRIPTION COMMAND...: runs it into the log; records the first failing step
    echo "== $1" >>"$log"
    "${@:2}" >>"$log" 2>&1 && return 0
    echo "$1 failed: $(grep -E '^ERROR|Error' "$log" | tail -1 | cut -c1-300)" >"$dir/failed_step"
    return 1
  }
  if step "create the venv" "$PYTHON" -m venv "$dir/venv" \
     && step "upgrade pip" "$py" -m pip install -q --upgrade pip \
     && step "install the image (${reqs[*]})" "$py" -m pip install "${reqs[@]}" \
     && "$py" -m pip freeze --all >"$dir/before.txt" 2>>"$log" \
     && read -ra with <<<"${ENV_WITH[$i]}" \
     && step "install $(basename "$wheel") ${ENV_WITH[$i]}" "$py" -m pip install "$wheel" "${with[@]}" \
     && "$py" -m pip freeze --all >"$dir/after.txt" 2>>"$log"; then
    "$py" -c 'import platform; print(platform.python_version())' >"$dir/python_version.txt" 2>>"$log"
    "$py" -m pip check >"$dir/pip_check.txt" 2>&1; echo $? >"$dir/pip_check.rc"
    # From the work directory (not the checkout) so the installed package is the one imported.
    (cd "$dir" && AIRFLOW_HOME="$dir/airflow_home" "$py" -c "$IMPORT_CHECK") >"$dir/import.txt" 2>&1
    echo $? >"$dir/import.rc"
  fi
  [ -x "$py" ] && [ ! -s "$dir/python_version.txt" ] \
    && "$py" -c 'import platform; print(platform.python_version())' >"$dir/python_version.txt" 2>/dev/null
  if ! "$PYTHON" "$work/judge.py" "$dir" "$name" "${ENV_EXPECT[$i]}" "${ENV_MAY_CHANGE[$i]}"; then
    failed=1
    echo "    (log: $log)"
  fi
done

mkdir -p "$out_dir"
results=(); for slug in "${ENV_SLUGS[@]}"; do results+=("$work/$slug/result.json"); done
"$PYTHON" - "$out.tmp" "${results[@]}" <<'PY'
import json, sys
results = [json.load(open(f)) for f in sys.argv[2:]]
open(sys.argv[1], "w").write(json.dumps(results, indent=2) + "\n")
PY
mv "$out.tmp" "$out"
echo "Written: $out"
if [ "$failed" -ne 0 ]; then
  keep_work=1
  echo "Work directory kept: $work"
fi
exit "$failed"
