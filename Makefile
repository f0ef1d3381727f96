# `make run` starts the broker on localhost:9092; `make test` runs the whole suite.
# Both create or refresh .venv first; nothing else needs installing by hand.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
CONFIG ?= config/server.properties

.PHONY: run test venv venv-test codegen-check lint compile bench clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# The stamps are refreshed whenever pyproject.toml changes.
# Byte-compiling up front keeps the broker's start fast even where PYTHONDONTWRITEBYTECODE is set.
# editable_mode=compat installs a plain path entry instead of an import hook that every Python
# start would load (~15 ms of the broker's start-up).
EDITABLE := --config-settings editable_mode=compat

$(VENV)/.installed: pyproject.toml | $(PY)
	$(PY) -m pip install --quiet $(EDITABLE) -e .
	touch $@

compile: venv
	@PYTHONDONTWRITEBYTECODE= $(PY) -m compileall -q kafkalite >/dev/null

$(VENV)/.installed-test: pyproject.toml | $(PY)
	$(PY) -m pip install --quiet $(EDITABLE) -e '.[test]'
	touch $(VENV)/.installed $@

venv: $(VENV)/.installed
venv-test: $(VENV)/.installed-test

run: venv compile
	$(PY) -m kafkalite serve --config $(CONFIG)

codegen-check: venv-test
	$(PY) -m kafkalite.protocol.codegen --check

# ruff for style and mistakes; mypy (strict for kafkalite.protocol, kafkalite.broker.core and kafkalite.cli, see pyproject.toml).
lint: venv-test
	$(PY) -m ruff check kafkalite tests benchmarks
	$(PY) -m mypy

# kafkajs for the Node compatibility tests, from the pinned lockfile (npm ci rewrites
# node_modules/.package-lock.json, so this reruns only when the lockfile changes).
KAFKAJS_DIR := tests/integration/kafkajs
$(KAFKAJS_DIR)/node_modules/.package-lock.json: $(KAFKAJS_DIR)/package-lock.json
	npm ci --prefix $(KAFKAJS_DIR) --no-audit --no-fund

# Two workers (pytest-xdist), a test module per worker at a time; PYTEST_ARGS= runs in one process.
# pytest exits 5 when it collected no tests: that is a failure here.
PYTEST_ARGS ?= -n 2 --dist loadfile
test: venv-test codegen-check lint compile $(KAFKAJS_DIR)/node_modules/.package-lock.json
	$(PY) -m pytest $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests"; exit 1; fi; exit $$rc

bench: venv-test
	$(PY) benchmarks/codec.py

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .hypothesis
