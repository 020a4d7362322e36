# The two commands: `make demo` and `make test`. Both bootstrap what they need first.
VENV := .venv
export AIRFLOW_HOME ?= $(CURDIR)/.airflow
export AIRFLOW__CORE__DAGS_FOLDER := $(CURDIR)/dags
export AIRFLOW__CORE__LOAD_EXAMPLES := False
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: bootstrap demo demo-cluster test test-fast lint docs bench bench-quick

bootstrap:
	@bash scripts/bootstrap.sh

demo: bootstrap
	@$(VENV)/bin/python scripts/demo.py

# The same demo on S3 + an Iceberg REST catalog (SeaweedFS) and a Spark standalone cluster, all on 127.0.0.1.
demo-cluster: bootstrap
	@$(VENV)/bin/python scripts/demo_cluster.py

# The whole suite on the Spark track .venv holds (LAKE_SPARK, default 4.1), and the tests marked
# both_tracks on the other one (in .venv-spark3.5 or .venv-spark4.1); the ten slowest at the end.
test: bootstrap
	@bash scripts/run_tests.sh $(PYTEST_ARGS)

# The generated pages (docs/kills.md, concurrency.md, bad-inputs.md) from what the last test run
# observed (test-output/generated/); the tests themselves never write into docs/.
docs:
	@$(VENV)/bin/python scripts/generate_docs.py

# ruff and mypy on the package and dags/ (pyproject.toml's [tool.ruff], [tool.mypy]); also the first step of `make test`.
lint: bootstrap
	@bash scripts/lint.sh

test-fast: bootstrap
	@$(VENV)/bin/python -m pytest -m "not spark_submit and not slow" $(PYTEST_ARGS)

# Benchmarks (not tests): each script prints its figures and rewrites its section of
# docs/benchmarks.md. About an hour on 2 cores (the rewrite at 100,000 files is half of it);
# bench-quick takes smaller sizes; a million files planned runs by hand:
# `python benchmarks/planning.py --million`. cluster.py (the rewrite of 100,000 files on a two-Worker
# standalone cluster, task against Iceberg's action) comes last; its `--quick` (2,000 files) is bench-quick's.
bench: bootstrap
	@cd benchmarks && PYTHONPATH=$(CURDIR):$(CURDIR)/scripts ../$(VENV)/bin/python planning.py
	@cd benchmarks && PYTHONPATH=$(CURDIR):$(CURDIR)/scripts ../$(VENV)/bin/python rewrite.py --large
	@cd benchmarks && PYTHONPATH=$(CURDIR):$(CURDIR)/scripts ../$(VENV)/bin/python budget.py
	@cd benchmarks && PYTHONPATH=$(CURDIR):$(CURDIR)/scripts ../$(VENV)/bin/python fleet.py
	@cd benchmarks && PYTHONPATH=$(CURDIR):$(CURDIR)/scripts ../$(VENV)/bin/python convert_equality_deletes.py
	@cd benchmarks && PYTHONPATH=$(CURDIR):$(CURDIR)/scripts ../$(VENV)/bin/python rewrite_deletes.py
	@cd benchmarks && PYTHONPATH=$(CURDIR):$(CURDIR)/scripts ../$(VENV)/bin/python rewrite_deletes.py --store s3
	@cd benchmarks && PYTHONPATH=$(CURDIR):$(CURDIR)/scripts ../$(VENV)/bin/python whole_run.py
	@cd benchmarks && PYTHONPATH=$(CURDIR):$(CURDIR)/scripts ../$(VENV)/bin/python topology.py
	@cd benchmarks && PYTHONPATH=$(CURDIR):$(CURDIR)/scripts ../$(VENV)/bin/python class_archive.py
	@cd benchmarks && PYTHONPATH=$(CURDIR):$(CURDIR)/scripts ../$(VENV)/bin/python cluster.py

bench-quick: bootstrap
	@cd benchmarks && PYTHONPATH=$(CURDIR):$(CURDIR)/scripts ../$(VENV)/bin/python planning.py --quick
	@cd benchmarks && PYTHONPATH=$(CURDIR):$(CURDIR)/scripts ../$(VENV)/bin/python rewrite.py --quick
	@cd benchmarks && PYTHONPATH=$(CURDIR):$(CURDIR)/scripts ../$(VENV)/bin/python budget.py --quick
	@cd benchmarks && PYTHONPATH=$(CURDIR):$(CURDIR)/scripts ../$(VENV)/bin/python fleet.py --tables 10
	@cd benchmarks && PYTHONPATH=$(CURDIR):$(CURDIR)/scripts ../$(VENV)/bin/python convert_equality_deletes.py --rows 50000 --delete-commits 10 --no-doc
	@cd benchmarks && PYTHONPATH=$(CURDIR):$(CURDIR)/scripts ../$(VENV)/bin/python rewrite_deletes.py --files 100 --delete-commits 5 --no-doc
	@cd benchmarks && PYTHONPATH=$(CURDIR):$(CURDIR)/scripts ../$(VENV)/bin/python whole_run.py --files 400 --no-doc
	@cd benchmarks && PYTHONPATH=$(CURDIR):$(CURDIR)/scripts ../$(VENV)/bin/python topology.py --quick
	@cd benchmarks && PYTHONPATH=$(CURDIR):$(CURDIR)/scripts ../$(VENV)/bin/python class_archive.py --pairs 1
	@cd benchmarks && PYTHONPATH=$(CURDIR):$(CURDIR)/scripts ../$(VENV)/bin/python cluster.py --quick
