# ptyd developer entry points. Everything runs from a local virtualenv (.venv) that these targets create.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: venv run test lint typecheck unit quick perf stress bench golden docs clean install-user uninstall-user

venv: $(STAMP)

$(STAMP): pyproject.toml clients/python/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	$(PY) -m pip install --quiet -e clients/python
	touch $(STAMP)

## Start the daemon in the foreground on the default socket (Ctrl-C stops it and every session).
run: venv
	$(VENV)/bin/ptyd

## Lint, type-check and run every test against a real daemon.
test: lint typecheck unit

lint: venv
	$(VENV)/bin/ruff check ptyd ptyd_mcp tests clients/python bench
	$(VENV)/bin/ruff format --check ptyd ptyd_mcp tests clients/python bench

typecheck: venv
	$(VENV)/bin/mypy ptyd ptyd_mcp clients/python/ptyd_client

unit: venv
	$(PY) -m pytest -q -m 'not slow'

## The in-process tests only (tests/unit: the dispatcher, service, session, channel, state; a few seconds).
quick: venv
	$(PY) -m pytest -q tests/unit

## The latency claims held to their tight bounds (tests/conftest.py latency()), for a quiet machine.
perf: venv
	$(PY) -m pytest -q -m 'not slow' --perf tests/test_readiness.py tests/test_relays.py \
	  tests/hardening/test_program_faults.py tests/hardening/test_client_faults.py tests/clients/test_python_client.py

stress: venv
	$(PY) -m pytest -q -m slow

## Re-record the renderer's golden screens from real programs under tmux (then commit tests/golden/).
golden: venv
	$(PY) tests/golden/capture.py

## Benchmarks: ptyd against a raw PTY, tmux and a fixed idle wait, as ratios (see bench/BASELINE.md).
bench: venv
	$(PY) bench/run.py

## Regenerate what derives from the wire types and the config: docs/protocol.md, the clients' types, docs/config.md,
## and the blocking Python client's methods (from the asyncio ones).
docs: venv
	$(PY) -m ptyd.rpc.docgen > docs/protocol.md
	$(PY) -m ptyd.configdoc markdown > docs/config.md
	$(PY) -m ptyd.configdoc example > docs/config.example.toml
	$(PY) -m ptyd.rpc.codegen_ts
	$(PY) -m ptyd.rpc.codegen_py
	$(PY) -m ptyd.rpc.codegen_sync

## Install the systemd user units, pointing at this checkout's ptyd (or PTYD_BIN=...); see docs/systemd.md.
install-user: venv
	sh systemd/install.sh install

## Stop and remove the systemd user units (this closes every session).
uninstall-user:
	sh systemd/install.sh uninstall

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
