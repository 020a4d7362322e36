# The two commands: `make demo` and `make test`. Both bootstrap what they need first.
VENV := .venv
export AIRFLOW_HOME ?= $(CURDIR)/.airflow
export AIRFLOW__CORE__DAGS_FOLDER := $(CURDIR)/dags
export AIRFLOW__CORE__LOAD_EXAMPLES := False
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: bootstrap demo test test-fast

bootstrap:
	@bash scripts/bootstrap.sh

demo: bootstrap
	@$(VENV)/bin/python scripts/demo.py

test: bootstrap
	@$(VENV)/bin/python -m pytest $(PYTEST_ARGS)

test-fast: bootstrap
	@$(VENV)/bin/python -m pytest -m "not spark_submit and not slow" $(PYTEST_ARGS)
