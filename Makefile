# Two entry points do all set-up on a fresh machine (Python 3.11+ required):
#   make run   - create .venv if missing, install pinned requirements, serve on localhost:8501
#                (scripts.serve: streamlit run app.py, warmed up at start)
#   make test  - the same, plus dev tools, Debian's chromium-headless-shell and haproxy, then ruff, lint-imports, every test
#   make test-fast - while working: ruff, lint-imports, core and AppTest tests (no browser), in 3 to 4 minutes on 2 cores
# Both are idempotent: installs rerun only when a requirements file changes.

SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
PORT ?= 8501
CHROMIUM ?= /usr/bin/chromium-headless-shell
PYTEST_ARGS ?=
# One pytest-xdist worker per core; tests/conftest.py says how the work is split between them.
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
PYTEST := $(PY) -m pytest -v -n $(JOBS) --dist loadgroup --no-loadscope-reorder --durations=25

.PHONY: run test test-fast lint browser haproxy bootstrap dev clean

# The tests write bytecode even where the environment turned it off (PYTHONDONTWRITEBYTECODE): otherwise
# every worker, server and subprocess compiles the project's sources again, and pytest rewrites every test
# module's asserts again (collection took 13 s per worker instead of 6 on the 2-core VM). The files go to
# __pycache__, which git ignores.
test test-fast: export PYTHONDONTWRITEBYTECODE :=

run: $(VENV)/.runtime.stamp
	$(PY) -m scripts.serve --server.port=$(PORT) --server.address=localhost

test: $(VENV)/.dev.stamp browser haproxy
	$(PY) -m ruff check .
	$(VENV)/bin/lint-imports
	$(PYTEST) $(PYTEST_ARGS)

test-fast: $(VENV)/.dev.stamp
	$(PY) -m ruff check .
	$(VENV)/bin/lint-imports
	$(PYTEST) -m "not browser" $(PYTEST_ARGS)

lint: $(VENV)/.dev.stamp
	$(PY) -m ruff check .
	$(VENV)/bin/lint-imports

bootstrap: $(VENV)/.runtime.stamp
dev: $(VENV)/.dev.stamp

$(PY):
	@py=""; for c in $${PYTHON:-} python3 python3.13 python3.12 python3.11; do \
	  if command -v $$c >/dev/null 2>&1 && $$c -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then py=$$c; break; fi; \
	done; \
	if [ -z "$$py" ]; then echo "Python 3.11 or newer is required (set PYTHON=/path/to/python3.11)"; exit 1; fi; \
	echo "creating $(VENV) with $$py"; $$py -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(VENV)/.runtime.stamp: requirements.txt | $(PY)
	$(PY) -m pip install --quiet -r requirements.txt
	@touch $@

$(VENV)/.dev.stamp: requirements-dev.txt requirements.txt $(VENV)/.runtime.stamp
	$(PY) -m pip install --quiet -r requirements-dev.txt
	@touch $@

# Debian's chromium-headless-shell drives the browser tests (benchmarks/harness.py says why; no browser
# download is needed or used); its full chromium serves where the shell cannot be installed.
browser:
	@if [ -x "$(CHROMIUM)" ]; then exit 0; fi; \
	SUDO=""; if [ "$$(id -u)" != 0 ]; then SUDO=sudo; fi; \
	echo "installing Debian's chromium-headless-shell"; \
	{ $$SUDO apt-get update -q && $$SUDO apt-get install -y -q --no-install-recommends chromium-headless-shell fonts-liberation; } \
	  || [ -x /usr/bin/chromium ] \
	  || $$SUDO apt-get install -y -q --no-install-recommends chromium fonts-liberation

# Debian's haproxy puts one address in front of several server processes (scripts/serve_many.py); the
# browser test of that setup skips where it is missing, so a failed install never fails the build.
haproxy:
	@if command -v haproxy >/dev/null 2>&1 || [ -x /usr/sbin/haproxy ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "installing Debian's haproxy"; \
	  { apt-get install -y -q --no-install-recommends haproxy \
	    || { apt-get update -q && apt-get install -y -q --no-install-recommends haproxy; }; } \
	    || echo "haproxy could not be installed: tests/e2e/test_many_processes_browser.py will skip"; \
	else echo "haproxy is not installed (needs root and apt-get): tests/e2e/test_many_processes_browser.py will skip"; fi

clean:
	rm -rf $(VENV) artifacts .pytest_cache .ruff_cache .hypothesis
