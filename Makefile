# One entry point per task. On a fresh machine (python3 and pip only) each
# target creates .venv and installs the project with its dev extra first.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: test lint typecheck unit fuzz demo bench docs audit floors clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

## make test: lint, type-check and run the whole suite (unit and integration tiers)
test: lint typecheck
	$(BIN)/python -m pytest -n 2 $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check --no-fix .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

## make audit: pip-audit over the installed set and over the dependency floors
## (one line and exit 0 when the advisory service does not answer)
audit: $(STAMP)
	$(BIN)/python .ci/audit.py

## make floors: the unit tier in .venv-floors, every dependency at its floor
## (docs/security.md#dependency-floors)
floors:
	$(PYTHON) .ci/floors.py $(PYTEST_ARGS)

## make unit: the fast tier only (moto in-process)
unit: $(STAMP)
	$(BIN)/python -m pytest -m "not integration" $(PYTEST_ARGS)

## make fuzz: the fuzz tier (tests/fuzz) with many random examples; make test
## runs the same tests with a few deterministic ones
FUZZ_ARGS ?=
fuzz: $(STAMP)
	HYPOTHESIS_PROFILE=fuzz-long $(BIN)/python -m pytest tests/fuzz -m fuzz \
		--timeout 1800 $(FUZZ_ARGS)

## make integration-localstack: part of the integration tier against LocalStack (started
## here, from .venv-localstack; skipped with one line when no Python 3.13 is found)
.PHONY: integration-localstack
integration-localstack: $(STAMP)
	$(BIN)/python -m tests.integration.localstack -n 2 $(PYTEST_ARGS)

## make demo: the example app end to end against a local SQS server
demo: $(STAMP)
	$(BIN)/python -m example_app.demo

## make bench: the benchmark suite (starts its own SQS server), then large payloads through S3,
## idempotent handlers on PostgreSQL, job records, the transactional outbox, unique jobs,
## batches and the worker's own cost (slots, threads, the Flask path)
bench: $(STAMP)
	$(BIN)/python -m bench $(BENCH_ARGS)
	$(BIN)/python -m bench.large_payloads
	$(BIN)/python -m bench.idempotency
	$(BIN)/python -m bench.limits
	$(BIN)/python -m bench.records
	$(BIN)/python -m bench.outbox
	$(BIN)/python -m bench.unique
	$(BIN)/python -m bench.worker_paths
	$(BIN)/python -m bench.workflows
	$(BIN)/python -m pip install --quiet "py-spy>=0.4"  # the sampling profiler
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m bench.cpu_stages

## make dashboard-screenshots: the browser tier, writing docs/_static/dashboard/*.png
dashboard-screenshots: $(STAMP)
	SQS_JOBS_SCREENSHOTS=docs/_static/dashboard $(BIN)/python -m pytest \
		tests/integration/test_dashboard_browser.py \
		tests/integration/test_dashboard_browser_jobs.py -p no:randomly -q

## make docs: the HTML documentation in docs/_build/html; any warning fails the build
docs: $(VENV)/.docs-installed
	$(BIN)/sphinx-build -E -W -b html docs docs/_build/html

$(VENV)/.docs-installed: $(STAMP)
	$(BIN)/python -m pip install --quiet -e ".[docs]"
	touch $@

## make faults: the fault-injection tier in full, ~15 min (docs/reliability.md)
## make faults-short: a few minutes of the same tier; CI runs it after make test
.PHONY: faults faults-short dashboard-screenshots
FAULTS_ARGS ?=
MINISTACK_VENV := .venv-ministack

faults: $(STAMP) $(MINISTACK_VENV)/.installed
	SQS_JOBS_FAULTS=full $(BIN)/python -m pytest tests/faults -m faults -v \
		--durations=10 $(FAULTS_ARGS)

faults-short: $(STAMP) $(MINISTACK_VENV)/.installed
	SQS_JOBS_FAULTS=short $(BIN)/python -m pytest tests/faults -m faults -v \
		--durations=10 $(FAULTS_ARGS)

# MiniStack (the fast SQS server of the fault tier) pins its own botocore, so it
# gets a virtualenv of its own. When it cannot be installed the tier uses moto.
$(MINISTACK_VENV)/.installed:
	$(PYTHON) -m venv $(MINISTACK_VENV)
	$(MINISTACK_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(MINISTACK_VENV)/bin/python -m pip install --quiet "ministack~=1.5.33" \
		&& touch $@ \
		|| echo "MiniStack is not installed: the fault tier falls back to moto"

clean:
	rm -rf $(VENV) .venv-localstack .venv-floors .pytest_cache .mypy_cache .ruff_cache
