# The README's two commands: `make dev` and `make test`. Both set up .venv from scratch when needed.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: dev test test-slow lint format bench package clean

$(STAMP): requirements.txt requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt
	touch $(STAMP)

venv: $(STAMP)

dev: $(STAMP)
	$(PY) -m devstack

# pytest exits 5 when it collects nothing; that is a broken suite, so say so instead of passing.
test: $(STAMP)
	$(PY) -m pytest -m "not slow and not browser"; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests" >&2; exit 1; fi; exit $$rc

test-slow: $(STAMP)
	$(PY) -m pytest -m "slow"; rc=$$?; if [ $$rc -eq 5 ]; then exit 0; fi; exit $$rc

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: $(STAMP)
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

clean:
	rm -rf $(VENV) build .pytest_cache .ruff_cache
