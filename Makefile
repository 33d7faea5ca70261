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

# The comparison: 800 distributed jobs at full load on 8 nodes × 8 GPUs, a 64-GPU gang among
# them; the schedulers see each job's true runtime (README, "What the demo prints")
DEMO_WORKLOAD = synthetic:jobs=800,nodes=8,mix=multi,load=1.0,max_duration=21600,seed=1
DEMO_ESTIMATES = perfect

demo: $(VENV)/.stamp-run
	$(BIN)/phalanx simulate
	@echo
	$(BIN)/phalanx compare $(DEMO_WORKLOAD) --estimates $(DEMO_ESTIMATES) --report report.html

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
