#!/usr/bin/env bash
# Installs everything `make demo` and `make test` need. Safe and quick to run again:
# each step checks first and does nothing when its part is already there.
#
# LAKE_SPARK picks the Spark track (docs/compatibility.md): 4.1 (default: Spark 4.1, Scala 2.13, the
# Spark provider 6) or 3.5 (Spark 3.5, Scala 2.12, the Spark provider 5). .venv holds one track;
# asking for the other makes it again. Either way Iceberg 1.12's jars come by Maven coordinates.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${LAKE_VENV:-.venv}
PYTHON_BIN=${PYTHON:-python3.11}
LAKE_SPARK=${LAKE_SPARK:-4.1}
CONSTRAINTS=requirements/constraints-spark$LAKE_SPARK.txt
if [ ! -f "$CONSTRAINTS" ]; then
  echo "bootstrap: LAKE_SPARK=$LAKE_SPARK is not a track; use 4.1 (the default) or 3.5" >&2
  exit 1
fi
DEBIAN_PACKAGES=(openjdk-17-jre-headless maven libxerial-sqlite-jdbc-java libpostgresql-jdbc-java postgresql chromium chromium-driver nodejs npm)

missing_debian=()
command -v java >/dev/null 2>&1 && java -version 2>&1 | grep -q '"17\.' || missing_debian+=(openjdk-17-jre-headless)
# Maven fetches the Spark jobs' jars by their coordinates into the jar cache (below).
command -v mvn >/dev/null 2>&1 || missing_debian+=(maven)
[ -f /usr/share/java/sqlite-jdbc.jar ] || missing_debian+=(libxerial-sqlite-jdbc-java)
[ -f /usr/share/java/postgresql.jar ] || missing_debian+=(libpostgresql-jdbc-java)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing_debian+=(postgresql)
# The browser test drives Debian's chromium through playwright (no browser download).
[ -x /usr/bin/chromium ] || missing_debian+=(chromium)
[ -x /usr/bin/chromedriver ] || missing_debian+=(chromium-driver)
# Node.js and npm install and run Azurite, the Azure storage emulator of the tests on ADLS (below).
command -v node >/dev/null 2>&1 || missing_debian+=(nodejs)
command -v npm >/dev/null 2>&1 || missing_debian+=(npm)
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
# A venv without pip is one whose creation was interrupted, and one not (or not yet) recorded as
# this track's would keep another track's pyspark files (pyspark and pyspark-client share them):
# make it again.
track_file="$VENV/.lake-spark-track"
if [ ! -x "$VENV/bin/python" ] || [ ! -x "$VENV/bin/pip" ] \
   || [ "$(cat "$track_file" 2>/dev/null)" != "$LAKE_SPARK" ]; then
  echo "bootstrap: creating $VENV (Spark track $LAKE_SPARK) with $($PYTHON_BIN --version)"
  rm -rf "$VENV"
  "$PYTHON_BIN" -m venv "$VENV"
fi

# uv installs the packages: from its cache (~/.cache/uv) a new venv takes seconds where pip copies
# and compiles ~1.5 GB again (a fresh clone, the other track). uv itself lives in a venv of its own
# in the provider's cache, installed once by pip at the version pinned here.
UV_VERSION=0.13.8
uv_home=${LAKE_TOOLS:-$HOME/.cache/airflow-lake-provider/tools}/uv-$UV_VERSION
if [ ! -x "$uv_home/bin/uv" ]; then
  echo "bootstrap: installing uv $UV_VERSION into $uv_home"
  rm -rf "$uv_home"
  "$PYTHON_BIN" -m venv "$uv_home" && "$uv_home/bin/pip" install -q "uv==$UV_VERSION"
fi
UV="$uv_home/bin/uv"

# Azurite (npm), the Azure Data Lake Storage emulator of the rewrite oracle on ADLS (tests/azurite_server.py),
# installed once at the version pinned here into the same tools cache.
AZURITE_VERSION=3.37.0
azurite_home=${LAKE_TOOLS:-$HOME/.cache/airflow-lake-provider/tools}/azurite-$AZURITE_VERSION
if [ ! -x "$azurite_home/node_modules/.bin/azurite-blob" ]; then
  echo "bootstrap: installing Azurite $AZURITE_VERSION into $azurite_home"
  rm -rf "$azurite_home" && mkdir -p "$azurite_home"
  npm install --prefix "$azurite_home" --no-audit --no-fund --loglevel=error "azurite@$AZURITE_VERSION" >/dev/null
fi

# Reinstall only when the dependency files changed since the last install.
stamp_value=$(cat pyproject.toml "$CONSTRAINTS" | sha256sum | cut -c1-16)
stamp_file="$VENV/.lake-installed"
if [ "$(cat "$stamp_file" 2>/dev/null)" != "$stamp_value" ]; then
  echo "bootstrap: installing Python packages (Spark track $LAKE_SPARK) into $VENV (the first time pyspark builds from source: about a minute)"
  log=$(mktemp)
  if ! { "$UV" pip install --python "$VENV/bin/python" -c "$CONSTRAINTS" -e ".[test,postgres,hive,s3,gcs,sigv4,openlineage]" \
         && "$UV" pip check --python "$VENV/bin/python" \
         && "$VENV/bin/python" -c "import pyspark.sql, sys; sys.exit(not pyspark.__version__.startswith('$LAKE_SPARK'))"; \
       } >"$log" 2>&1; then
    tail -40 "$log" >&2
    echo "bootstrap: installing the packages failed (uv pip install; full log: $log)" >&2
    exit 1
  fi
  rm -f "$log"
  echo "$stamp_value" > "$stamp_file"
  echo "$LAKE_SPARK" > "$track_file"
  # What no install can reuse leaves uv's cache (it had grown to 64 GB over many installs here, and the
  # disk's last 1% makes SeaweedFS's volume server read-only: the S3 tests' uploads then time out).
  "$UV" cache prune >/dev/null 2>&1 || true
fi
# The editable install leaves airflow_lake_provider.egg-info in the checkout. With the checkout on
# PYTHONPATH (the tests put it there for their subprocesses) Python then sees the package twice,
# so its Airflow plugin entry point is listed twice, and Airflow 3.3's plugin loader stops at the
# first duplicate: every entry-point plugin after it (OpenLineage's listener among them) is never
# loaded. The installed dist-info is all the editable install needs.
rm -rf airflow_lake_provider.egg-info

# The Spark jobs' jars by Maven coordinates (Iceberg's Spark runtime of this track, hadoop-aws and
# its AWS SDK, iceberg-aws-bundle, iceberg-gcp-bundle, iceberg-azure-bundle), fetched once with the machine's Maven into the jar cache
# ($LAKE_JAR_CACHE, default ~/.cache/airflow-lake-provider/jars); a jar already there is kept.
"$VENV/bin/python" -m airflow_lake_provider.jars fetch >/dev/null

# The class archive the jobs' driver JVMs start from (airflow_lake_provider/class_archive.py): recorded
# once per Spark installation and Java by a short warm-up application (about a minute), then kept.
if ! "$VENV/bin/python" -c "import sys; from airflow_lake_provider.class_archive import archive_for_driver; sys.exit(archive_for_driver() is None)"; then
  echo "bootstrap: recording the jobs' class archive (Spark track $LAKE_SPARK, about a minute)"
  PATH="$PWD/$VENV/bin:$PATH" "$VENV/bin/python" -m airflow_lake_provider.class_archive build >/dev/null
fi
