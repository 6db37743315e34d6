"""Connections as a resource: a burst of clients is queued, not refused; idle and hoarded connections cannot lock
the others out (ptyctl included).

Each crowd is a process of its own (``crowd_client.py``), so that several crowds are several peers, as several
clients would be.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import Daemon, Rpc, RpcError, wait_until

from .conftest import OwnSession
from .probes import daemon_pid

pytestmark = pytest.mark.usefixtures("unharmed")

UNAUTHENTICATED_MS = 3_000  # the default is 10 s: shorter, so that the tests see it pass
DAEMON_CONFIG = f"unauthenticated_connection_ms = {UNAUTHENTICATED_MS}\n"

CROWD = Path(__file__).with_name("crowd_client.py")


class Crowd:
    """``count`` connections from a process of their own."""

    def __init__(self, daemon: Daemon, count: int, mode: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(CROWD), str(daemon.socket), str(count), mode],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def say(self, line: str = "\n") -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line)
        self.proc.stdin.flush()

    def hear(self) -> Any:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, f"the crowd ended with {self.proc.wait()}"
        return json.loads(line)

    def end(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=60)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def test_500_simultaneous_connects_are_all_served(module_daemon: Daemon) -> None:
    # asyncio's own backlog (100) applied before: 16-42 of 500 saw EAGAIN. listen_backlog is 1,024.
    crowds = [Crowd(module_daemon, 125, "burst") for _ in range(4)]
    try:
        for crowd in crowds:
            assert crowd.hear() == {"ready": True}
        for crowd in crowds:
            crowd.say("go\n")
        results = [crowd.hear() for crowd in crowds]
    finally:
        for crowd in crowds:
            crowd.end()
    print(f"500 connects at once: {results}")
    assert sum(r["refused"] for r in results) == 0
    assert sum(r["served"] for r in results) == 500


def ptyctl_status(daemon: Daemon) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ptyd_client.ptyctl", "--socket", str(daemon.socket), "status"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def open_count(crowds: list[Crowd]) -> int:
    for crowd in crowds:
        crowd.say()
    return sum(crowd.hear()["open"] for crowd in crowds)


def test_1100_idle_connections_of_one_process_do_not_keep_ptyctl_out(module_daemon: Daemon) -> None:
    hoarder = Crowd(module_daemon, 1_100, "hold")
    try:
        assert hoarder.hear() == {"held": 1_100}  # each connect succeeds: the daemon accepts, then closes
        wait_until(lambda: open_count([hoarder]) == 256, message="the hoarder cut to max_connections_per_peer")
        status = ptyctl_status(module_daemon)
        assert status.returncode == 0, status.stderr
        assert "is running" in status.stdout
    finally:
        hoarder.end()


def test_1100_idle_connections_of_five_processes_do_not_keep_ptyctl_out(module_daemon: Daemon) -> None:
    # Each under its share (256), together past max_connections (1,024): the oldest idle ones make room.
    crowds = [Crowd(module_daemon, 220, "hold") for _ in range(5)]
    try:
        assert [crowd.hear() for crowd in crowds] == [{"held": 220}] * 5
        started = time.monotonic()
        status = ptyctl_status(module_daemon)
        assert status.returncode == 0, status.stderr
        assert time.monotonic() - started < UNAUTHENTICATED_MS / 1000, "ptyctl got in only once the idle ones went"
        with Rpc(module_daemon.socket) as rpc:
            assert rpc.call("daemon_info")["pid"] == daemon_pid(module_daemon)
        # And none of them outlives the bound.
        wait_until(lambda: open_count(crowds) == 0, timeout=30, message="the idle connections' end")
    finally:
        for crowd in crowds:
            crowd.end()


def closed_by_the_daemon(rpc: Rpc) -> bool:
    rpc.sock.setblocking(False)
    try:
        return rpc.sock.recv(1, socket.MSG_PEEK) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True
    finally:
        rpc.sock.setblocking(True)


def test_a_connection_is_kept_once_it_presents_a_valid_token(module_daemon: Daemon, own: OwnSession) -> None:
    with Rpc(module_daemon.socket) as kept, Rpc(module_daemon.socket) as idle, Rpc(module_daemon.socket) as wrong:
        kept.call("terminal_status", token=own.token, session_id=own.session_id)
        idle.call("daemon_info")  # no token: served, but no reason to stay
        with pytest.raises(RpcError) as refused:
            wrong.call("terminal_list", token="not-a-token")
        assert refused.value.kind == "unauthorized"
        started = time.monotonic()
        wait_until(lambda: closed_by_the_daemon(idle) and closed_by_the_daemon(wrong), message="their end")
        assert time.monotonic() - started > UNAUTHENTICATED_MS / 1000 - 1
        assert kept.call("daemon_info")["pid"] == daemon_pid(module_daemon)  # opened first, and still served


def test_a_first_call_that_outlasts_the_bound_is_not_cut(module_daemon: Daemon, own: OwnSession) -> None:
    seconds = UNAUTHENTICATED_MS / 1000 + 1
    with Rpc(module_daemon.socket) as fresh:
        result = fresh.call(
            "terminal_send",
            token=own.token,
            session_id=own.session_id,
            input=f"sleep {seconds}; echo sle''ept\n",
            until="sleept",  # not the input's echo
            timeout_ms=int(seconds * 1000) + 20_000,
        )
        assert "sleept" in result["viewport"].splitlines(), result
        assert fresh.call("daemon_info")["sessions"] >= 1
