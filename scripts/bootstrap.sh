#!/usr/bin/env bash
# Installs everything `make demo` and `make test` need. Safe and quick to run again:
# each step checks first and does nothing when its part is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=.venv
PYTHON_BIN=${PYTHON:-python3.11}
DEBIAN_PACKAGES=(openjdk-17-jre-headless libxerial-sqlite-jdbc-java libpostgresql-jdbc-java postgresql chromium chromium-driver)

missing_debian=()
command -v java >/dev/null 2>&1 && java -version 2>&1 | grep -q '"17\.' || missing_debian+=(openjdk-17-jre-headless)
[ -f /usr/share/java/sqlite-jdbc.jar ] || missing_debian+=(libxerial-sqlite-jdbc-java)
[ -f /usr/share/java/postgresql.jar ] || missing_debian+=(libpostgresql-jdbc-java)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing_debian+=(postgresql)
# The browser test drives Debian's chromium through playwright (no browser download).
[ -x /usr/bin/chromium ] || missing_debian+=(chromium)
[ -x /usr/bin/chromedriver ] || missing_debian+=(chromium-driver)
if [ ${#missing_debian[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "bootstrap: installing Debian packages: ${missing_debian[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing_debian[@]}" >/dev/null
  else
    echo "bootstrap: missing system packages: ${missing_debian[*]}" >&2
    echo "bootstrap: install them as root: apt-get install ${DEBIAN_PACKAGES[*]}" >&2
    exit 1
  fi
fi

if ! command -v "$PYTHON_BIN" >/dev/null; then
  PYTHON_BIN=python3
fi
# A venv without pip is one whose creation was interrupted: make it again.
if [ ! -x "$VENV/bin/python" ] || [ ! -x "$VENV/bin/pip" ]; then
  echo "bootstrap: creating $VENV with $($PYTHON_BIN --version)"
  rm -rf "$VENV"
  "$PYTHON_BIN" -m venv "$VENV"
fi

# Reinstall only when the dependency files changed since the last install.
stamp_value=$(cat pyproject.toml requirements/constraints.txt | sha256sum | cut -c1-16)
stamp_file="$VENV/.lake-installed"
if [ "$(cat "$stamp_file" 2>/dev/null)" != "$stamp_value" ]; then
  echo "bootstrap: installing Python packages into $VENV (pyspark builds from source: about a minute)"
  log=$(mktemp)
  if ! { "$VENV/bin/pip" install --upgrade pip \
         && "$VENV/bin/pip" install -c requirements/constraints.txt -e ".[iceberg-jar,test,postgres,hive,s3,openlineage]" \
         && "$VENV/bin/pip" check; } >"$log" 2>&1; then
    tail -40 "$log" >&2
    echo "bootstrap: pip install failed (full log: $log)" >&2
    exit 1
  fi
  rm -f "$log"
  echo "$stamp_value" > "$stamp_file"
fi
# The editable install leaves airflow_lake_provider.egg-info in the checkout. With the checkout on
# PYTHONPATH (the tests put it there for their subprocesses) Python then sees the package twice,
# so its Airflow plugin entry point is listed twice, and Airflow 3.3's plugin loader stops at the
# first duplicate: every entry-point plugin after it (OpenLineage's listener among them) is never
# loaded. The installed dist-info is all the editable install needs.
rm -rf airflow_lake_provider.egg-info

# S3A for Spark (an s3:// warehouse): hadoop-aws 3.3.1 and the AWS SDK bundle 1.11.901 it was
# built against, taken from the PyPI source archive of sagemaker-pyspark 1.4.5 (only the two
# jars are extracted; the package itself is never installed: it pins pyspark 3.3). Cached
# outside git; skipped when both are there.
JAR_CACHE=${LAKE_JAR_CACHE:-$HOME/.cache/airflow-lake-provider/jars}
S3A_JARS=(hadoop-aws-3.3.1.jar aws-java-sdk-bundle-1.11.901.jar)
if [ ! -f "$JAR_CACHE/${S3A_JARS[0]}" ] || [ ! -f "$JAR_CACHE/${S3A_JARS[1]}" ]; then
  echo "bootstrap: caching the S3A jars in $JAR_CACHE (a 180 MB download, once)"
  mkdir -p "$JAR_CACHE"
  download=$(mktemp -d)
  "$VENV/bin/pip" download --quiet --no-deps --no-binary :all: sagemaker-pyspark==1.4.5 -d "$download"
  for jar in "${S3A_JARS[@]}"; do
    tar -xzf "$download"/sagemaker_pyspark-1.4.5.tar.gz -C "$download" "sagemaker_pyspark-1.4.5/deps/jars/$jar"
    mv "$download/sagemaker_pyspark-1.4.5/deps/jars/$jar" "$JAR_CACHE/$jar.part"
    mv "$JAR_CACHE/$jar.part" "$JAR_CACHE/$jar"
  done
  rm -rf "$download"
fi
