# The README's commands. Each target is safe to re-run: what is already installed or fetched is kept.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
PYTEST_ARGS ?=

.PHONY: setup lint test test-unit demo demo-down clean

$(BIN)/kmirror: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e ".[dev]"
	touch $@

## setup: the Python environment and every jar (Kafka 3.9 and 4.x, the Spark Kafka connector), fetched once
setup: $(BIN)/kmirror
	$(BIN)/kmirror dev fetch

## lint: ruff, mypy (strict), import layering, schema freshness
lint: setup
	$(BIN)/ruff check reconciler tests
	$(BIN)/ruff format --check reconciler tests
	$(BIN)/mypy
	$(BIN)/lint-imports

## test: everything CI runs: setup, lint, then the whole test suite on real local Kafka and Spark
test: lint
	@$(BIN)/pytest $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: that is a failure" >&2; exit 1; fi; exit $$rc

test-unit: setup
	$(BIN)/pytest -m unit $(PYTEST_ARGS)

## demo: two local clusters (Kafka 3.9 source, 4.x target), then kmirror on them
demo: setup
	$(BIN)/kmirror dev up
	$(BIN)/kmirror dev status

demo-down:
	$(BIN)/kmirror dev down

clean:
	rm -rf $(VENV) .kmirror .mypy_cache .ruff_cache .pytest_cache
