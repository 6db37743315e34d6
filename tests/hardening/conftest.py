"""Fixtures of the hardening suite. The harness itself (Daemon, Rpc, Shell, daemon, fresh_daemon) is tests/conftest.py.

A module gets a daemon of its own (``module_daemon``), configured by the module's ``DAEMON_CONFIG`` string, so
that its log holds only its own traffic and a hostile test cannot disturb the rest of the suite.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from conftest import Daemon, Shell

from .probes import LogWatch, Witness, running_daemon


@pytest.fixture(scope="module")
def module_daemon(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    config: str = getattr(request.module, "DAEMON_CONFIG", "")
    with running_daemon(tmp_path_factory, request.module.__name__.rpartition(".")[2], config) as daemon:
        yield daemon


@pytest.fixture(scope="module")
def witness(module_daemon: Daemon) -> Iterator[Witness]:
    w = Witness(module_daemon)
    yield w
    w.close()


@pytest.fixture
def unharmed(module_daemon: Daemon, witness: Witness) -> Iterator[None]:
    """After the test: the daemon lives, the witness session is untouched, nothing was logged above WARNING."""
    watch = LogWatch(module_daemon)
    yield
    assert module_daemon.proc is not None
    assert module_daemon.proc.poll() is None, "the daemon died:\n" + watch.text()[-4000:]
    witness.assert_untouched()
    watch.assert_quiet()


class OwnSession:
    """An agent and a session of its own that the test drives (unlike the witness, which nobody may touch)."""

    def __init__(self, daemon: Daemon) -> None:
        self.rpc = daemon.rpc()
        self.token: str = self.rpc.call("agent_register", name="own")["token"]
        self.shell = Shell(self.rpc, self.token, env={"PS1": "$ "})
        self.session_id = self.shell.id


@pytest.fixture(scope="module")
def own(module_daemon: Daemon) -> Iterator[OwnSession]:
    session = OwnSession(module_daemon)
    yield session
    session.rpc.close()
