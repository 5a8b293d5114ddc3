# Chorus: `make run` starts the local stack, `make test` runs every check.
# Both set up everything first (a virtual environment in .venv/), so they work on a fresh
# machine with Python 3.11+.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cksum < pyproject.toml | cut -d' ' -f1)

.PHONY: install run test lint typecheck bench clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Chorus needs Python 3.11+"'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,bench]'
	rm -f $(VENV)/.installed-* && touch $@

install: $(STAMP)

run: install
	$(BIN)/chorus run

lint: install
	$(BIN)/ruff check agent annotators skills skill_selectors response_selectors tests bench

typecheck: install
	$(BIN)/mypy

test: lint typecheck
	$(BIN)/pytest

bench: install
	$(BIN)/python -m bench.run

clean:
	rm -rf $(VENV) .cache .pytest_cache .mypy_cache .ruff_cache
