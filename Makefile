# Two commands for a new user: `make eval` and `make test`.
# Both create .venv when it is missing and install the project into it.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: eval test install clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[test]'
	@touch $(STAMP)

install: $(STAMP)

eval: install
	$(BIN)/docpilot eval --html .docpilot/report.html

test: install
	$(BIN)/python -m pytest -n 2 --dist loadfile -r s

clean:
	rm -rf $(VENV) .docpilot .pytest_cache
