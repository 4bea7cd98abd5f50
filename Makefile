# `make test` and `make demo` work on a fresh clone: each creates .venv and installs what it needs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PY_STAMP := $(VENV)/.installed
NODE_STAMP := node_modules/.installed

.PHONY: test demo lint unit integration bench emulator clean

$(PY_STAMP): requirements.txt requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements-dev.txt
	touch $@

$(NODE_STAMP): package.json
	npm install --no-audit --no-fund --loglevel=error --no-package-lock
	touch $@

lint: $(PY_STAMP)
	$(BIN)/ruff check .

test: $(PY_STAMP) $(NODE_STAMP) lint
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || [ -n "$$SBEMULATOR_CHROMIUM" ] || \
		echo "*** WARNING: no Chromium: the web console's browser tests will be SKIPPED (apt-get install chromium; under CI=true they fail) ***"
	$(BIN)/python -m pytest -q -p no:cacheprovider

unit: $(PY_STAMP)
	$(BIN)/python -m pytest -q tests/unit

integration: $(PY_STAMP) $(NODE_STAMP)
	$(BIN)/python -m pytest -q tests/integration tests/interop tests/browser

demo: $(PY_STAMP) $(NODE_STAMP)
	$(BIN)/python -m devhost.demo $(DEMO_ARGS)

emulator: $(PY_STAMP)
	$(BIN)/python -m sbemulator --config infra/servicebus.json

bench: $(PY_STAMP)
	$(BIN)/python -m bench.run_all

clean:
	rm -rf $(VENV) node_modules .sbemulator .pytest_cache .hypothesis
