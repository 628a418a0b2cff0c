# Every target makes .venv itself when it is missing and installs the project into it.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
export NUMBA_NUM_THREADS ?= 1

.PHONY: demo test sklearn-suite bench bench-many-core peers lint clean

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

# The sources byte-compiled once (an editable install leaves them to each process, and
# with PYTHONDONTWRITEBYTECODE every MPI rank of every test would compile them again).
test: $(VENV)/.installed-test
	$(BIN)/python -m compileall -q collectives sparcml_apps tests
	$(BIN)/python -m pytest -q --durations=20

# scikit-learn's own SGD tests pointed at the estimators: fails unless every failure is a
# difference docs/sklearn-differences.md explains (about 3 minutes on 2 cores).
sklearn-suite: $(VENV)/.installed-test
	$(BIN)/python tests/sklearn_suite.py

# The benchmarks of docs/results.md, into docs/results (QUICK=1: the same on small inputs,
# into results/quick). The page gives the options of each run it shows and how long each
# part took; the whole target has not been timed as one run. Emulated links need root;
# without it those runs are skipped.
RESULTS := $(if $(QUICK),results/quick,docs/results)
BENCH := $(BIN)/python -m sparcml_apps.bench
B := --out $(RESULTS) $(if $(QUICK),--quick)
A9A := $(wildcard ../shared/data/libsvm/a9a)
COMMA := ,
CALIBRATED := $(RESULTS)/calibration.json
CALIBRATED_1GBIT := $(RESULTS)/calibration-1gbit.json
# the numbers of ranks that timings take here: 1, 2, 4, ... up to the cores (more ranks than
# cores take turns on them, which times nothing)
RANKS := $(shell n=$$(nproc); for p in 1 2 4 8 16 32 64; do [ $$p -le $$n ] && echo $$p; done)
SHARED := $(or $(filter-out 1,$(RANKS)),2)
bench: $(VENV)/.installed-test,bench peers
	$(BENCH) peers $(B) --datasets $(if $(A9A),$(A9A)$(COMMA)$(A9A).t) url-like url-like-dense url-like-flat
	$(BENCH) scaling $(B) $(if $(QUICK),,--datasets url-like url-like-dense $(if $(A9A),$(A9A)$(COMMA)$(A9A).t))
	$(BENCH) stopping $(if $(QUICK),$(B),--out $(RESULTS)/stopping-ranks --datasets url-like url-like-dense url-like-flat $(if $(A9A),$(A9A)$(COMMA)$(A9A).t))
	$(if $(QUICK),,$(BENCH) stopping --out $(RESULTS)/stopping-two-cores --datasets url-like --rows 500000 --ranks 1 2 --seeds 5)
	$(BENCH) train $(B) --nprocs $(RANKS) \
		$(if $(QUICK),,--datasets url-like $(if $(A9A),$(A9A)$(COMMA)$(A9A).t --n-features 123))
	$(BENCH) calibrate --path $(CALIBRATED) --nprocs $(SHARED) $(if $(QUICK),--quick)
	SPARCML_CALIBRATION=$(CALIBRATED) $(BENCH) allreduce $(B) --nprocs $(SHARED)
	$(BENCH) calibrate --path $(CALIBRATED_1GBIT) --rate 1gbit --nprocs $(lastword $(SHARED)) \
		$(if $(QUICK),--quick)
	SPARCML_CALIBRATION=$(CALIBRATED_1GBIT) $(BENCH) allreduce $(B) --rate 1gbit \
		$(if $(QUICK),,--nprocs $(lastword $(SHARED)) --sizes 16777216 --densities 0.001 0.01)
	$(BENCH) throughput $(B) --nprocs $(RANKS)
	$(BENCH) diagnostics $(B)
	$(BENCH) overlap $(B) --nprocs $(SHARED)
	$(BENCH) projection $(B) --calibration $(CALIBRATED_1GBIT)
	$(BENCH) parse $(B)
	$(BENCH) jobs $(B) $(if $(QUICK),,--repeats 5)
	$(BENCH) fullsize $(B)
	$(if $(QUICK),,$(BIN)/python -m pytest -q -m bench)

# What more cores buy, on a machine of many (run nothing else there meanwhile): the scaling
# benchmark's many-core mode (P = 1, 2, 4, ... up to the CPUs) and n_jobs = 2 and as many as
# the CPUs, into $(RESULTS)/many-core; on a machine without network or MPI, the route of
# docs/guide/benchmarks.md runs the same two commands.
bench-many-core: $(VENV)/.installed-test,bench
	$(BENCH) scaling --many-core --datasets url-like --seeds 3 --out $(RESULTS)/many-core
	$(BENCH) jobs --nprocs $$(n=$$(nproc); [ $$n -gt 2 ] && echo 2 $$n || echo $$n) \
		--out $(RESULTS)/many-core

# The tools `sparcml bench peers` compares with: the `peers` extra (each package alone when
# one of them cannot be installed) and, for Spark, a Java 17 runtime from apt when there is
# none and this runs as root. What cannot be installed is said here, and reported missing
# by the benchmark.
PEERS_EXTRA := from importlib.metadata import requires; \
	print(*[r.split(";")[0] for r in requires("sparcml") if "extra == \"peers\"" in r])
JRE := openjdk-17-jre-headless
peers: $(VENV)/.installed-test,bench
	$(BIN)/python -m pip install --quiet -e '.[peers]' || \
	for p in $$($(BIN)/python -c '$(PEERS_EXTRA)'); do \
		$(BIN)/python -m pip install --quiet "$$p" || echo "make peers: could not install $$p"; \
	done
	@java -version 2>&1 | grep -Eq 'version "(1[7-9]|[2-9][0-9])' || \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get install -y -q $(JRE) || { apt-get update -q && apt-get install -y -q $(JRE); } || \
		echo "make peers: could not install $(JRE): Spark MLlib will be reported missing"; \
	else \
		echo "make peers: no Java 17 runtime and not root to install $(JRE): Spark MLlib will be reported missing"; \
	fi
	$(BENCH) peers --list

lint: $(VENV)/.installed-lint
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

clean:
	rm -rf $(VENV) build *.egg-info
