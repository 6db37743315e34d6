# ptyd developer entry points. Everything runs from a local virtualenv (.venv) that these targets create.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
DEV    := $(VENV)/.installed-dev

.PHONY: venv run try-ssh test lint typecheck unit quick perf stress bench baseline golden docs units clean install-user uninstall-user

## Everything: what `make run` needs, the faces' extras (ptyd-mcp, ptyd web: [all]) and the test, lint and
## type-check tools ([dev]).
venv: $(DEV)

## What `make run` needs, and no more (the first run from a fresh clone): the daemon, ptyctl and the Python client,
## editable, with the core's few dependencies. The checkout's distribution carries the client (clients/python), so
## one install does.
$(STAMP): pyproject.toml clients/python/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet -e .
	touch $(STAMP)

$(DEV): $(STAMP)
	$(PY) -m pip install --quiet -e '.[all,dev]'
	touch $(DEV)

## Start the daemon in the foreground on the default socket (Ctrl-C stops it and every session).
## It says first whether agents' sessions can be sandboxed here (the daemon's own start line says what it found).
run: $(STAMP)
	@if command -v bwrap >/dev/null; then echo "make run: found $$(bwrap --version): agents' sessions run sandboxed (workspace)"; \
	else echo "make run: bubblewrap is NOT installed: agents' sessions run unsandboxed (Debian, Ubuntu: apt install bubblewrap)"; fi
	@if command -v pasta >/dev/null; then echo "make run: found pasta: sandboxed sessions get a network of their own"; \
	else echo "make run: pasta is NOT installed: sandboxed sessions share this machine's loopback (Debian, Ubuntu: apt install passt)"; fi
	$(VENV)/bin/ptyd

## A throwaway sshd on a loopback port, to try `ptyctl --host ssh://` on this machine (Ctrl-C stops it).
try-ssh: venv
	$(PY) tests/sshd.py

## Lint, type-check and run every test against a real daemon.
test: lint typecheck unit

lint: venv
	$(VENV)/bin/ruff check ptyd ptyd_mcp ptyd_web tests clients/python bench tools
	$(VENV)/bin/ruff format --check ptyd ptyd_mcp ptyd_web tests clients/python bench tools

typecheck: venv
	$(VENV)/bin/mypy ptyd ptyd_mcp ptyd_web clients/python/ptyd_client

unit: venv
	$(PY) -m pytest -q -m 'not slow'

## The in-process tests only (tests/unit: the readiness table, the dispatcher, service, session, channel, state),
## in under 10 s. Without hypothesis's plugin, which no unit test uses: importing it took 1.6 s of the budget.
quick: venv
	$(PY) -m pytest -q -p no:hypothesispytest tests/unit

## The latency claims held to their tight bounds (tests/conftest.py latency()), for a quiet machine.
perf: venv
	$(PY) -m pytest -q -m 'not slow' --perf tests/test_readiness.py tests/test_relays.py \
	  tests/hardening/test_program_faults.py tests/hardening/test_client_faults.py tests/clients/test_python_client.py

## The slow tier at full length (load, soak, long fuzzers, crash adoptions, bench smoke, engine fault rounds):
## an hour or more on a loaded 2-core machine. .ci/run runs it with --stress=ci, bounded to ~10 minutes
## (docs/testing.md).
stress: venv
	$(PY) -m pytest -q -m slow --durations=0

## Re-record the renderer's golden screens from real programs under tmux (then commit tests/golden/).
golden: venv
	$(PY) tests/golden/capture.py

## Benchmarks: ptyd against a raw PTY, tmux and a fixed idle wait, as ratios (see bench/BASELINE.md).
bench: venv
	$(PY) bench/run.py

## Rewrite bench/BASELINE.md's run line, machine, figures and targets, and the README's performance table, from a
## run's JSON (BENCH_JSON=..., default the last run's); the prose around their markers stays.
BENCH_JSON ?= bench/results/latest.json
baseline: $(STAMP)
	$(PY) -m bench.baseline $(BENCH_JSON)

## Regenerate what derives from the wire types and the config: docs/protocol.md, the clients' types, docs/config.md,
## the blocking Python client's methods (from the asyncio ones), and the files the README includes (its TypeScript
## examples).
docs: $(STAMP)
	$(PY) -m ptyd.rpc.docgen > docs/protocol.md
	$(PY) -m ptyd.configdoc markdown > docs/config.md
	$(PY) -m ptyd.configdoc example > docs/config.example.toml
	$(PY) -m ptyd.rpc.codegen_ts
	$(PY) -m ptyd.rpc.codegen_py
	$(PY) -m ptyd.rpc.codegen_sync
	$(PY) tools/readme.py

## The systemd units are edited in systemd/; the package carries a copy beside install.sh (tests/unit/test_units.py).
units:
	cp systemd/ptyd.socket systemd/ptyd.service ptyd/daemon/units/

## Install the systemd user units, pointing at this checkout's ptyd (or PTYD_BIN=...); see docs/systemd.md.
install-user: $(STAMP)
	sh ptyd/daemon/units/install.sh install

## Stop and remove the systemd user units (this closes every session).
uninstall-user:
	sh ptyd/daemon/units/install.sh uninstall

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
