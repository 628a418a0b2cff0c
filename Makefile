# Every target makes .venv itself when it is missing and installs the project into it.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
export NUMBA_NUM_THREADS ?= 1

.PHONY: demo test bench lint clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# One stamp per set of extras; reinstalled when pyproject.toml changes.
$(VENV)/.installed-%: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[$*]'
	touch $@

$(VENV)/.installed-: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

demo: $(VENV)/.installed-
	$(BIN)/python -m sparcml_apps.demo

test: $(VENV)/.installed-test
	$(BIN)/python -m pytest -q

bench: $(VENV)/.installed-test,bench
	$(BIN)/python -m pytest -q -m bench
	$(BIN)/python -m sparcml_apps.bench allreduce
	$(BIN)/python -m sparcml_apps.bench train
	$(BIN)/python -m sparcml_apps.bench parse

lint: $(VENV)/.installed-lint
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

clean:
	rm -rf $(VENV) build *.egg-info
