# Chorus: `make run` starts the local stack, `make test` runs every check.
# Both set up everything first (a virtual environment in .venv/), so they work on a fresh
# machine with Python 3.11+.

# Python 3.12 from PATH or pyenv, else python3 (3.11+); `make PYTHON=python3.11 test`
# chooses. On 3.12 coverage measures with sys.monitoring (COVERAGE_CORE below), which
# costs the suite less than 3.11's tracer. A change of Python makes .venv/ again.
runs = $(shell $(1) -c 'import sys; print(sys.executable)' 2>/dev/null)
pyenv_python = $(call runs,$(shell pyenv prefix "$$(pyenv latest $(1) 2>/dev/null)" \
	2>/dev/null)/bin/python$(1))
ifndef PYTHON
PYTHON := $(or $(call runs,python3.12),$(call pyenv_python,3.12),python3)
endif
PYTHON_VERSION := $(shell $(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])')
VENV := .venv
BIN := $(VENV)/bin
#: The installer's version, pinned like the packages it installs (constraints.txt).
UV_VERSION := 0.13.9
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml sdk/pyproject.toml constraints.txt | cksum | cut -d' ' -f1)-$(PYTHON_VERSION)

.PHONY: install lock run test test-suite test-fast test-twice lint typecheck bench clean sdk-wheel mongodb-test-server \
	helm-tool docker-compose chromium nginx debian-tools

# constraints.txt pins every package (the tools too) at the versions `make test` passed
# with, so a fresh clone installs those and a dependency's new release changes nothing until
# `make lock` writes the file again.
$(STAMP): pyproject.toml sdk/pyproject.toml constraints.txt
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Chorus needs Python 3.11+"'
	@if [ -x $(BIN)/python ] && [ "$$($(BIN)/python -c 'import sys; print("%d.%d" % sys.version_info[:2])')" != "$(PYTHON_VERSION)" ]; then \
		echo "$(VENV) is of another Python: made again with $(PYTHON)"; rm -rf $(VENV); fi
	$(PYTHON) -m venv $(VENV)
	@# uv installs the same pinned packages as pip in a fraction of the time (about 30 s
	@# against 90 s on a 2-core machine): most of a fresh clone's set-up before the tests.
	@# --compile-bytecode, as pip does: a package's source compiled at its first import
	@# instead would print its SyntaxWarnings there, which the tests turn into errors.
	$(BIN)/python -m pip install --quiet --disable-pip-version-check 'uv==$(UV_VERSION)'
	@# setuptools warns that an editable install's folders could shadow the package: true
	@# of any editable install, and a page of '!!' that reads like an error on a first run.
	@# The agent depends on the service SDK's distribution (sdk/pyproject.toml), installed
	@# editable from this checkout too: agent/sdk/ is edited in place, like the rest.
	PYTHONWARNINGS='ignore:Editable installation' $(BIN)/python -m uv pip install --quiet --compile-bytecode \
		--python $(BIN)/python -c constraints.txt -e ./sdk -e '.[dev,bench,services,qdrant]'
	rm -f $(VENV)/.installed-* && touch $@

install: $(STAMP)

# After changing pyproject.toml's dependencies: install without the old pins, test, lock.
lock:
	$(BIN)/python -m pip install --quiet -e ./sdk -e '.[dev,bench,services,qdrant]'
	$(BIN)/python tools/lock.py

# `make run RUN_ARGS="--port 5000"` moves the agent (docs/configuration.md, "Moving make
# run's ports"); the services' ports are their URLs in the pipeline file.
RUN_ARGS ?=

run: install
	$(BIN)/chorus run $(RUN_ARGS)

PYTHON_DIRS := agent annotators skills skill_selectors response_selectors shared tests bench

# The linter, and the formatter as a check: code is formatted by `ruff format`, not by hand.
lint: install
	$(BIN)/ruff check $(PYTHON_DIRS)
	$(BIN)/ruff format --check $(PYTHON_DIRS)

typecheck: install
	$(CHECKS_NICE) $(BIN)/mypy

# FerretDB (the MongoDB wire-protocol server of the tests) is built once, before pytest,
# so its first, two-minute compile is not charged to a test's timeout.
mongodb-test-server:
	@if [ -n "$$MONGODB_URL" ]; then echo "MongoDB tests use MONGODB_URL"; \
	elif command -v go >/dev/null 2>&1; then bash tools/ferretdb/build.sh >/dev/null; \
	else echo "Go not found: MongoDB tests will be skipped (set MONGODB_URL to run them)"; fi

# Helm (tools/helm), which lints and renders deploy/helm/chorus in tests/deploy/test_helm.py,
# is built once, before pytest, so its first compile is not charged to a test's timeout.
helm-tool:
	@if command -v go >/dev/null 2>&1; then bash tools/helm/build.sh >/dev/null; \
	else echo "Go not found: the Helm chart's tests will be skipped"; fi

# Debian's docker-compose validates docker-compose.yml offline (tests/deploy); installed
# when missing and apt is at hand.
docker-compose:
	@sh tools/ensure.sh docker-compose

# Debian's chromium for the browser tests of the agent's pages (tests/browser).
chromium:
	@sh tools/ensure.sh chromium

# Debian's nginx, the load balancer of the rolling-restart test (tests/deploy/test_replicas.py).
nginx:
	@sh tools/ensure.sh nginx

# The Debian packages the tests run, one after another (apt-get takes a lock).
debian-tools:
	@sh tools/ensure.sh docker-compose
	@sh tools/ensure.sh chromium
	@sh tools/ensure.sh nginx

# pytest prints the coverage of agent/ and the services (pyproject.toml's [tool.coverage]);
# the floor sits a little under the measured figure (94.6 % on 2026-11-23, with MongoDB).
COVERAGE_FLOOR := 92
# pytest-xdist's worker processes: a test spends much of its time waiting for servers and
# child processes, so more workers than the 2 CPUs of a small machine pay; `make test
# TEST_WORKERS=0` runs the tests in one process. worksteal: a worker that runs out of tests
# takes some of another's. The tests that keep the CPUs busy themselves run one at a time
# (`one_at_a_time` in tests/conftest.py).
TEST_WORKERS ?= 3

# coverage's core: sys.monitoring where Python has it (3.12+), else its C tracer; the
# agents and services the tests start as processes inherit it. Asked of $(PYTHON), which
# makes .venv/ (so the same version): `make test` reads this before its install has run.
COVERAGE_CORE ?= $(shell $(PYTHON) -c 'import sys; print("sysmon" if sys.version_info >= (3, 12) else "ctrace")' 2>/dev/null)

# The checks, what the tests need and the tests, at once (-j): lint and mypy run beside the
# tests instead of before them (mypy's first run on a fresh clone is 30 s of one CPU, which
# came before pytest's first test and now fills the CPU the tests' waits leave free); the Go
# builds and the Debian tools beside the install (none of them needs .venv/: on a fresh
# clone the builds' 10-15 s, mostly copying FerretDB's module, were spent after the install
# and before pytest), pytest once all are done. -O line prints each line whole as it comes,
# so pytest's progress shows as it goes. Any failure fails `make test`, once the jobs
# running have ended. (Writing the tests' bytecode once before pytest, for its workers to
# read, was measured and dropped: a worker's collection 14.0 -> 9.4 s of CPU, the step
# itself 12.9 s.)
# mypy runs niced there (CHECKS_NICE): its 25 s of one CPU yield to the tests and fill the
# time their waits leave free, instead of slowing the tests they share the two CPUs with.
test:
	@$(MAKE) --no-print-directory -j 8 --output-sync=line lint typecheck test-suite \
		CHECKS_NICE="nice -n 15"

CHECKS_NICE ?=

# The project's bytecode written as the tests import it, even where the environment says
# not to (PYTHONDONTWRITEBYTECODE=1 on some machines): the suite starts hundreds of
# `chorus`, agent and service processes, and without it each compiles every module it
# imports again (docs/development.md; __pycache__ is ignored by git).
WRITE_BYTECODE := PYTHONDONTWRITEBYTECODE=

# More arguments for pytest: `make test PYTEST_ARGS=--cpu-report` prints what each test file
# costs and the run's tail (docs/development.md, "What a test costs").
PYTEST_ARGS ?=

# pytest with coverage, once what the tests need is there (the `test` target runs it).
test-suite: install mongodb-test-server helm-tool debian-tools
	$(WRITE_BYTECODE) COVERAGE_CORE=$(COVERAGE_CORE) $(BIN)/pytest -n $(TEST_WORKERS) --dist worksteal --cov \
		--cov-fail-under=$(COVERAGE_FLOOR) --durations=15 $(PYTEST_ARGS)

# The in-process tier alone (docs/development.md, "Test tiers"): the tests that start no
# server nor process (`sockets` in tests/conftest.py), without coverage's floor, which the
# whole suite keeps. A minute or two on a 2-core machine: the loop while changing code.
test-fast: install
	$(WRITE_BYTECODE) $(BIN)/pytest -n $(TEST_WORKERS) --dist worksteal -m "not sockets" --durations=10

# `make test` twice at once, here and in a temporary clone, each on a machine the other
# keeps busy: a test whose result depends on how busy the machine is fails here
# (docs/development.md, "Tests on a busy machine").
test-twice: install
	bash tools/test_twice.sh

bench: install
	$(BIN)/python -m bench.run

# The service SDK's wheel (chorus-sdk, sdk/pyproject.toml) in dist/, for a team writing
# services in its own repository (docs/services.md, "A service outside this repository").
sdk-wheel: install
	$(BIN)/python tools/build_sdk.py

clean:
	rm -rf $(VENV) .cache .pytest_cache .mypy_cache .ruff_cache .coverage .coverage.* dist
