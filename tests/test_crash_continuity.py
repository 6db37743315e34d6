"""What a daemon crash must not cost an agent (issue 26): a send retried with its request_key after a SIGKILL runs
once; a wait names the operation it waits for and never gets another one's result; lines the crashed daemon read
after its last save are counted and marked, never a silent gap. Real daemons (the default fd keeper), real shells,
a real SIGKILL; the saves the crash must come after are waited for, and blocked where a test needs them stale."""

from __future__ import annotations

import contextlib
import json
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import Daemon, RpcError, Shell, wait_until


def saved(directory: Path) -> dict[str, object]:
    try:
        return dict(json.loads((directory / "sessions.json").read_text())["sessions"])
    except (OSError, ValueError, KeyError):
        return {}


@contextlib.contextmanager
def saves_blocked(directory: Path) -> Iterator[None]:
    """The daemon cannot replace its state file meanwhile (its temporary's name is taken by a directory): what
    happens now is after the last save, as in the moments before a crash."""
    blocker = directory / "sessions.tmp"
    blocker.mkdir()
    try:
        yield
    finally:
        blocker.rmdir()


@pytest.fixture
def shell(fresh_daemon: Daemon) -> Iterator[Shell]:
    """A shell on a daemon of the default configuration, in its saved state already."""
    fresh_daemon.start()
    rpc = fresh_daemon.rpc()
    opened = Shell(rpc, rpc.call("agent_register", name="crash")["token"], env={"PS1": "$ "})
    wait_until(lambda: opened.id in saved(fresh_daemon.directory), message="the saved state")
    yield opened
    opened.rpc.close()


def reconnect(daemon: Daemon, shell: Shell) -> None:
    shell.rpc.close()
    daemon.stop(signal.SIGKILL)
    daemon.start()
    assert "adopted 1 of the 1 sessions" in daemon.log()
    shell.rpc = daemon.rpc()


def test_a_send_in_flight_at_a_crash_is_driven_to_its_result_and_a_retry_runs_once(
    fresh_daemon: Daemon, shell: Shell, tmp_path: Path
) -> None:
    ran = tmp_path / "ran"
    started = shell.send(f"echo once >> {ran}; sleep 1; echo FINISHED\n", wait=False, request_key="build-1")
    wait_until(lambda: ran.exists(), message="the command's start")
    reconnect(fresh_daemon, shell)
    waited = shell.call("terminal_wait", operation_id=started["operation_id"], timeout_ms=20_000)
    assert waited["done"] is True
    assert waited["result"]["wait_reason"] == "stdin_read"
    assert "FINISHED" in waited["result"]["viewport"]
    retried = shell.send(f"echo once >> {ran}; sleep 1; echo FINISHED\n", request_key="build-1")
    assert retried["operation_id"] == started["operation_id"]
    assert ran.read_text() == "once\n"  # typed once, whatever the retries


def test_a_key_whose_result_the_crash_lost_is_never_typed_again(
    fresh_daemon: Daemon, shell: Shell, tmp_path: Path
) -> None:
    ran = tmp_path / "ran"
    with saves_blocked(fresh_daemon.directory):
        first = shell.send(f"echo once >> {ran}\n", request_key="k-lost")
        shell.send("true\n", request_key="k-newer")
        reconnect(fresh_daemon, shell)
    with pytest.raises(RpcError) as err:
        shell.send(f"echo once >> {ran}\n", request_key="k-lost")
    assert err.value.data["kind"] == "operation_lost"
    assert err.value.data["request_key"] == "k-lost"
    with pytest.raises(RpcError) as waited:
        shell.call("terminal_wait", operation_id=first["operation_id"], timeout_ms=100)
    assert waited.value.data["kind"] == "operation_lost"
    assert ran.read_text() == "once\n"


def test_lines_a_crash_lost_are_marked_in_the_transcript_and_the_next_result(
    fresh_daemon: Daemon, shell: Shell
) -> None:
    with saves_blocked(fresh_daemon.directory):
        printed = shell.send("seq 1 3000\n")
        assert printed["viewport"].splitlines()[-2:] == ["3000", "$"]
        reconnect(fresh_daemon, shell)
    result = shell.send("echo after\n")
    assert result["lost_lines"] >= 3000
    assert result["viewport"].splitlines()[-2:] == ["after", "$"]
    marker = [line for line in shell.transcript() if "lost in a daemon crash" in line]
    assert len(marker) == 1
    assert marker[0].startswith(f"[ptyd: {result['lost_lines']} lines")
    assert shell.send("true\n")["lost_lines"] == 0  # reported once
