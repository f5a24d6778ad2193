# The two commands (see README.md):
#   make book   set up .venv, fetch the front-end files, build the HTML book into _build/html
#   make test   lint (ruff) and the whole test suite (what CI runs, through .ci/run)
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# Installs are skipped while these hashes match what was installed (stamps live in the venv and
# in node_modules, so a deleted venv or node_modules starts over).
STAMP := $(VENV)/.swiglu-requirements
TEST_STAMP := $(VENV)/.swiglu-requirements-test
NPM_STAMP := node_modules/.swiglu-package-lock
CHROMIUM ?= /usr/bin/chromium
# pytest-xdist workers for `make test` (CI has two cores; 0 runs the suite in one process). How
# the tests are shared between them: tests/conftest.py, SERIAL_UNITS.
TEST_WORKERS ?= 2
# What `make test` (CI) leaves to `make test-all`: the tests marked extended (pyproject.toml),
# long compile checks (NVVM and ptxas over the big kernels) and rehearsals of other machines
# (a Colab mirror, Docker's default limits), so that CI's run stays under its 30 minutes.
CI_LANE ?= not extended

.PHONY: book test test-all test-gpu lint venv install install-test assets setup-cells pin clean help

help:
	@echo "make book   build the HTML book into _build/html (sets up .venv and front-end files)"
	@echo "make test   lint with ruff, then the test suite as CI runs it (all but the extended tests)"
	@echo "make test-all  the same with the extended tests (long compile checks, rehearsals)"
	@echo "make test-gpu  on a GPU machine: the tests marked gpu, summary in records/tests/gpu_<gpu>.json"
	@echo "make lint   ruff only (settings: [tool.ruff] in pyproject.toml)"
	@echo "make clean  remove _build and site_assets"

book: install assets
	@# PYTHONPATH: notebooks import this tree's `book`, whichever tree the venv was installed from.
	@echo "==> Executing the notebooks (in parallel; cached results are reused)"
	@PYTHONPATH="$(CURDIR)" $(PY) -m tools.execute || \
	  { echo "Book build FAILED: the notebooks above raised errors."; exit 1; }
	@echo "==> Building the book"
	@# -W --keep-going: any Sphinx warning (a {ref} to a label that no longer exists, say) fails
	@# the build, after listing them all.
	PYTHONPATH="$(CURDIR)" $(VENV)/bin/jupyter-book build -W --keep-going . || \
	  { echo "Book build FAILED (see the errors above; notebook tracebacks are in _build/html/reports/)."; exit 1; }
	@$(PY) -m tools.site_assets --sync _build/html
	@echo
	@echo "Book built. Open _build/html/index.html in a browser, or serve it and open http://localhost:8000 :"
	@echo "    $(PY) -m http.server --directory _build/html 8000"

venv:
	@if [ ! -x "$(PY)" ]; then \
	  $(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)' || \
	    { echo "Python 3.10 or newer is needed ($(PYTHON) is $$($(PYTHON) --version 2>&1)); set PYTHON=python3.11"; exit 1; }; \
	  echo "==> Creating $(VENV)"; $(PYTHON) -m venv "$(VENV)"; \
	fi

install: venv
	@want="$$(cat requirements.txt pyproject.toml | sha256sum | cut -c1-16)"; \
	if [ "$$(cat $(STAMP) 2>/dev/null)" != "$$want" ]; then \
	  echo "==> Installing requirements.txt and this course (-e .) into $(VENV)"; \
	  $(PY) -m pip install -q --disable-pip-version-check -r requirements.txt -e . ; \
	  echo "$$want" > $(STAMP); \
	fi

install-test: install
	@want="$$(sha256sum < requirements-test.txt | cut -c1-16)"; \
	if [ "$$(cat $(TEST_STAMP) 2>/dev/null)" != "$$want" ]; then \
	  echo "==> Installing requirements-test.txt into $(VENV)"; \
	  $(PY) -m pip install -q --disable-pip-version-check -r requirements-test.txt; \
	  echo "$$want" > $(TEST_STAMP); \
	fi

assets: venv
	@command -v npm >/dev/null || { echo "npm not found: install Node.js 18+ with npm (Debian: apt-get install -y nodejs npm)"; exit 1; }
	@want="$$(sha256sum < package-lock.json | cut -c1-16)"; \
	if [ "$$(cat $(NPM_STAMP) 2>/dev/null)" != "$$want" ]; then \
	  echo "==> npm ci (MathJax, require.js, widget manager, anywidget: pinned in package-lock.json)"; \
	  npm ci --ignore-scripts --no-audit --no-fund --loglevel=error; \
	  echo "$$want" > $(NPM_STAMP); \
	fi
	@$(PY) -m tools.site_assets

lint: install-test
	@echo "==> ruff check (settings: [tool.ruff] in pyproject.toml)"
	$(VENV)/bin/ruff check .

# The GPU lane: the tests marked `gpu` (skipped in the simulator), on a GPU machine; writes
# records/tests/gpu_<gpu>.json with provenance (commit it when kernels or the grader change).
test-gpu: install-test
	PYTHONPATH="$(CURDIR)" $(PY) -m tools.gpu_tests

test: install-test lint assets
	@if [ ! -x "$(CHROMIUM)" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "==> Installing Debian's chromium for the browser tests"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; \
	  else \
	    echo "The browser tests need Debian's chromium at $(CHROMIUM). Install it as root:"; \
	    echo "    sudo apt-get update && sudo apt-get install -y chromium"; \
	    echo "(or set CHROMIUM=/path/to/chromium)"; exit 1; \
	  fi; \
	fi
	CHROMIUM="$(CHROMIUM)" $(PY) -m pytest -n $(TEST_WORKERS) -m "$(CI_LANE)" tests

# Every test, the extended ones too (about twice CI's time): before a release, after a change to
# the big kernels, the setup cell or the Gradescope bundle.
test-all:
	$(MAKE) test CI_LANE=""

setup-cells: venv
	$(PY) -m tools.setup_cell --write

# Pin the Colab setup cells to the library's newest commit (_config.yml repository.pin), then
# regenerate the cells that embed it; commit _config.yml, chapters/, labs/ and solutions/ after.
pin: venv
	$(PY) -m tools.setup_cell --pin
	$(PY) -m tools.setup_cell --write
	$(PY) -m autograder assign

clean:
	rm -rf _build site_assets
