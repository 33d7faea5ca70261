# Two commands do all set-up on a fresh machine with Python 3.11 and make:
#   make demo   — create .venv, install phalanx, run the built-in comparison
#   make test   — install the test extras, run lint, types, layering and the whole test suite
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   ?= .venv
BIN     = $(VENV)/bin

.PHONY: demo test lint bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.stamp-run: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.stamp-test: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@ $(VENV)/.stamp-run

demo: $(VENV)/.stamp-run
	$(BIN)/phalanx simulate

lint: $(VENV)/.stamp-test
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/mypy --strict
	$(BIN)/lint-imports

test: lint
	$(BIN)/python -m pytest

bench: $(VENV)/.stamp-run
	$(BIN)/python benchmarks/run.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
