# `make test` and `make demo` work on a fresh clone: each creates .venv and installs what it needs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PY_STAMP := $(VENV)/.installed
NODE_STAMP := node_modules/.installed
# The Go SDK suite (tests/interop/go): `go mod download` fetches the modules go.sum names into the module
# cache on a fresh machine (a no-op once they are there), `go vet` compiles the suite so the test run
# only links it. Without Go the step warns and the suite's pytest test is skipped (it fails under CI).
GO_SUITE := tests/interop/go
# pytest-xdist workers. The suite mostly waits (SDK link set-up, lock and TTL expiry), so more workers
# than cores pays off; every fixture is per worker (tests/README.md). PYTEST_WORKERS=0 runs in-process.
# --maxschedchunk 1 hands out tests one at a time, so no worker sits on a queue of long tests while the
# others are idle. Bytecode is kept (__pycache__, git-ignored) even where the environment turns it off:
# every worker imports the SDKs and the tests again, and compiling them each time costs seconds of CPU.
PYTEST_WORKERS ?= 8
PYTEST_PARALLEL := -n $(PYTEST_WORKERS) --maxschedchunk 1
PYTEST := PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest

.PHONY: test demo lint unit integration bench emulator clean go-deps conformance

$(PY_STAMP): requirements.txt requirements-dev.txt sbemulator/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements-dev.txt
	touch $@

$(NODE_STAMP): package.json
	npm install --no-audit --no-fund --loglevel=error --no-package-lock
	touch $@

# mypy checks the whole repository at its default level (pyproject.toml's [tool.mypy] says how).
lint: $(PY_STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy

go-deps:
	@if command -v go >/dev/null 2>&1; then \
		cd $(GO_SUITE) && GOFLAGS="$$GOFLAGS -mod=readonly" go mod download && GOFLAGS="$$GOFLAGS -mod=readonly" go vet ./...; \
	else echo "*** WARNING: no go on PATH: the Go SDK interop suite will be SKIPPED (under CI=true it fails) ***"; fi

test: $(PY_STAMP) $(NODE_STAMP) lint go-deps
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || [ -n "$$SBEMULATOR_CHROMIUM" ] || \
		echo "*** WARNING: no Chromium: the web console's browser tests will be SKIPPED (apt-get install chromium; under CI=true they fail) ***"
	$(PYTEST) -q -p no:cacheprovider $(PYTEST_PARALLEL) --durations=10

# The unit tests compute rather than wait: one process beats workers there (17.9 s vs 37 s with -n 8).
unit: $(PY_STAMP)
	$(PYTEST) -q tests/unit

integration: $(PY_STAMP) $(NODE_STAMP) go-deps
	$(PYTEST) -q $(PYTEST_PARALLEL) tests/integration tests/interop tests/browser

demo: $(PY_STAMP) $(NODE_STAMP)
	$(BIN)/python -m devhost.demo $(DEMO_ARGS)

# `make emulator ARGS="--port 5673 --in-memory"`: any option of python -m sbemulator (README lists them).
emulator: $(PY_STAMP)
	$(BIN)/python -m sbemulator --config infra/servicebus.json $(ARGS)

# Microsoft's Python SDK live tests and Go SDK tests, fetched at run time (into .conformance/, git-ignored),
# run unchanged against a fresh emulator; writes docs/conformance.md (conformance/ says how). Not part of
# `make test`: it takes tens of minutes and needs the package registries. CONFORMANCE_ARGS="--suite go" etc.
conformance: $(PY_STAMP)
	$(BIN)/python -m conformance $(CONFORMANCE_ARGS)

bench: $(PY_STAMP)
	$(BIN)/python -m bench.run_all

clean:
	rm -rf $(VENV) node_modules .sbemulator .pytest_cache .hypothesis .conformance
