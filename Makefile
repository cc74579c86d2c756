# The README's two commands: `make dev` and `make test`. Both set up .venv from scratch when needed.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: dev test test-unit test-slow test-browser lint format bench bench-quick package clean cfn-lint policies

# pyproject.toml too: the packages the `bisn` command imports are listed there.
$(STAMP): requirements.txt requirements-dev.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt
	# Puts the `bisn` support command in .venv/bin (the project's own code, no dependencies).
	$(PY) -m pip install --quiet --no-deps -e .
	touch $(STAMP)

venv: $(STAMP)

# CORS_ORIGINS=https://your-theme.example adds origins the widget may be tried from (docs/CONSOLE.md);
# VERBOSE=1 shows the emulator's and fake stores' request logs and tracebacks.
dev: $(STAMP)
	$(PY) -m devstack $(if $(filter 1 yes true,$(VERBOSE)),--verbose)

# A machine may forbid bytecode files (PYTHONDONTWRITEBYTECODE=1): then every test process, and every process a test
# starts, compiles the project's modules from source again. The suites write them (git ignores __pycache__), the
# project's own compiled once up front on every core; pytest still rewrites each test module's asserts itself.
BYTECODE := PYTHONDONTWRITEBYTECODE=
COMPILE := $(BYTECODE) $(PY) -m compileall -q -j 0 -x '/test_[^/]*[.]py$$' app.py chalicelib devstack support infra bench tests

# pytest exits 5 when it collects nothing; that is a broken suite, so say so instead of passing. The tests are shared
# out among one process per core (pytest-xdist): each starts its own emulator, so none waits on another's. The
# long-running modules' tests start first (tests/conftest.py) and a free worker takes tests from a busy one's queue
# (worksteal), so the run ends on short tests. The 20 slowest tests are listed at the end, so a test that grows slow
# is seen where the time goes.
test: $(STAMP)
	@$(COMPILE)
	$(BYTECODE) $(PY) -m pytest -n auto --dist worksteal -m "not slow and not browser" --durations=20; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests" >&2; exit 1; fi; exit $$rc

# The quick loop while changing rules: the unit tests alone, which make no AWS call.
test-unit: $(STAMP)
	$(PY) -m pytest tests/unit -q -m "not slow and not browser"

# The heavier variants share the cores the same way; their storm pools take each worker's share of the cores, and a
# worker takes the next test as soon as it is free (worksteal), since a few of them run for minutes.
test-slow: $(STAMP)
	@$(COMPILE)
	$(BYTECODE) $(PY) -m pytest -n auto --dist worksteal -m "slow" --durations=20; rc=$$?; if [ $$rc -eq 5 ]; then exit 0; fi; exit $$rc

# The console journey and the widget on imitation shop pages in headless Chromium: Debian's chromium, driven by
# Playwright (never a downloaded browser), and Debian's jQuery for the WooCommerce page. Installs chromium,
# chromium-driver and libjs-jquery when missing; where that is impossible the tests skip and say why.
test-browser: $(STAMP)
	@if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ] || [ ! -f /usr/share/javascript/jquery/jquery.min.js ]; then \
		sudo=""; if [ "$$(id -u)" != 0 ]; then sudo="sudo -n"; fi; \
		echo "Installing Debian's chromium, chromium-driver and libjs-jquery for the browser tests..."; \
		{ $$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq chromium chromium-driver libjs-jquery; } \
			|| echo "Could not install Chromium or jQuery: the browser tests that need them will be skipped." >&2; \
	fi
	$(PY) -m pytest -m browser; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no browser tests" >&2; exit 1; fi; exit $$rc

# The WooCommerce plugin (integrations/woocommerce/) under plain PHP: `php -l` on every PHP file, then its unit tests
# against stand-ins for WordPress and WooCommerce (tests/php/run.php, no composer). Installs Debian's php-cli when
# missing.
.PHONY: test-php
test-php:
	@if ! command -v php >/dev/null 2>&1; then \
		sudo=""; if [ "$$(id -u)" != 0 ]; then sudo="sudo -n"; fi; \
		echo "Installing Debian's php-cli for the plugin's tests..."; \
		$$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq php-cli; \
	fi
	@find integrations tests/php -name '*.php' -print0 | xargs -0 -n1 php -l
	php tests/php/run.php

# On the emulator, no network: a table, then one JSON object as the last line (docs/BENCHMARKS.md). Each section
# runs in a process of its own, so none inherits another's heap, and reports its peak memory. QUICK=1 (or
# `make bench-quick`) runs every section at small sizes, in a few minutes.
bench: $(STAMP)
	$(PY) -m bench $(if $(filter 1 yes true,$(QUICK)),--size quick)

bench-quick: $(STAMP)
	$(PY) -m bench --size quick

# ruff, then mypy on the shipped code (chalicelib/, app.py) and the tools around it (devstack/, support/, infra/, bench/);
# settings in pyproject.toml's [tool.mypy].
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy --config-file pyproject.toml

format: $(STAMP)
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

# Deployment: `make package STAGE=prod` writes build/sam.json and build/deployment.zip (docs/DEPLOY.md).
# The Lambda runtime is the Python that packages (python3.11 from a 3.11 venv; use a 3.14 venv for python3.14).
STAGE ?= dev
PACKAGE_REGION ?= eu-west-2

# Every stage but dev (the sample stage CI packages and lints) must have its own settings, not the samples the
# config ships with: infra/placeholders.py names each one left. ALLOW_PLACEHOLDERS=PUBLIC_BASE_URL lets the first
# deployment through before the API's address is known (docs/DEPLOY.md).
ALLOW_PLACEHOLDERS ?=

# Bytecode a local run left behind is not shipped (infra/trim_package.py); the package's own is added
# for the runtime (infra/bytecode.py).
package: $(STAMP)
	$(if $(filter-out dev,$(STAGE)),$(PY) -m infra.placeholders --stage $(STAGE) --allow "$(ALLOW_PLACEHOLDERS)")
	AWS_DEFAULT_REGION=$(PACKAGE_REGION) ADMIN_AUTHORIZER=cognito $(VENV)/bin/chalice package --stage $(STAGE) --merge-template infra/template.json build/
	$(PY) -m infra.trim_package build/deployment.zip
	$(PY) -m infra.bytecode build/deployment.zip --template build/sam.json
	$(PY) -m infra.pin_stage build/sam.json --stage $(STAGE)

cfn-lint: package
	$(VENV)/bin/cfn-lint build/sam.json

# Rewrite .chalice/policies/<stage>/ after changing a stage's settings or what a function touches.
policies: $(STAMP)
	$(PY) -m infra.policies

clean:
	rm -rf $(VENV) build .pytest_cache .ruff_cache .mypy_cache
