"""Client faults: clients that vanish mid-send, mid-response or mid-frame, churn, or never read their answers.

None of them costs the daemon lasting resources (fds back to the baseline, memory bounded), and none of them
slows other clients down or touches another session.
"""

from __future__ import annotations

import contextlib
import json
import socket
import struct
import threading
import time
from typing import Any

import pytest

from conftest import Daemon, Rpc, latency, wait_until

from .conftest import OwnSession
from .probes import daemon_pid, footprint, settled_fds

pytestmark = pytest.mark.usefixtures("unharmed")

# The crowds here are the test's own connections, from one process: as many as it opens (500) are its share.
DAEMON_CONFIG = "max_connections_per_peer = 1024\n"


def frame(method: str, request_id: int = 1, **params: Any) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}).encode() + b"\n"


def connect(daemon: Daemon) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX)
    sock.connect(str(daemon.socket))  # blocking: waits while the listen backlog is full, as a plain client does
    sock.settimeout(20)
    return sock


def reset(sock: socket.socket) -> None:
    """Close with a reset rather than an orderly shutdown, as a killed client's kernel may."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


@pytest.mark.parametrize("how", ["close", "reset"])
def test_disconnect_mid_send_then_wait_from_a_new_connection(module_daemon: Daemon, own: OwnSession, how: str) -> None:
    sock = connect(module_daemon)
    sock.sendall(frame("terminal_send", token=own.token, session_id=own.session_id, input=f"sleep 0.3; echo {how}\n"))
    # This test is about leaving while the send runs: wait until it started (a reset may discard an unread frame).
    wait_until(lambda: own.shell.call("terminal_status")["busy"], message="the send to start")
    if how == "reset":
        reset(sock)
    else:
        sock.close()
    waited = own.shell.call("terminal_wait", timeout_ms=10_000)
    assert waited["done"] is True
    assert waited["result"]["viewport"] == f"$ sleep 0.3; echo {how}\n{how}\n$"
    assert waited["result"]["wait_reason"] == "stdin_read"


def test_disconnect_after_a_background_send_then_output_from_a_new_connection(
    module_daemon: Daemon, own: OwnSession
) -> None:
    sock = connect(module_daemon)
    sock.sendall(frame("terminal_send", token=own.token, session_id=own.session_id, input="seq 3\n", wait=False))
    started = json.loads(sock.makefile("rb").readline())
    sock.close()
    waited = own.shell.call("terminal_wait", timeout_ms=10_000)
    assert waited["operation_id"] == started["result"]["operation_id"]
    assert waited["result"]["viewport"] == "$ seq 3\n1\n2\n3\n$"
    assert own.shell.call("terminal_output")["done"] is True


@pytest.fixture(scope="module")
def big_transcript(own: OwnSession) -> int:
    """The own session's transcript holds 8,000 lines of 150 characters: a terminal_read answer is ~1 MiB."""
    own.shell.send("seq -f '%0150g' 1 8000\n", timeout_ms=60_000)
    page = own.shell.call("terminal_read", start_line=0, max_lines=10_000, max_bytes=16 * 1024 * 1024)
    size = len("\n".join(page["lines"]))
    assert size > 900_000
    return size


def test_disconnect_mid_response(module_daemon: Daemon, own: OwnSession, big_transcript: int) -> None:
    pid = daemon_pid(module_daemon)
    before = footprint(pid).fds
    read = frame("terminal_read", token=own.token, session_id=own.session_id, start_line=0, max_lines=10_000)
    for i in range(30):
        sock = connect(module_daemon)
        sock.sendall(read * 4)
        sock.recv(100 * (i + 1))  # part of the first answer, then gone
        if i % 2:
            reset(sock)
        else:
            sock.close()
    assert settled_fds(pid, before) <= before
    assert own.shell.send("echo after\n")["viewport"] == "$ echo after\nafter\n$"


def test_500_connections_opened_and_dropped(module_daemon: Daemon, own: OwnSession) -> None:
    pid = daemon_pid(module_daemon)
    before = footprint(pid)
    info = frame("daemon_info")
    status = frame("terminal_status", token=own.token, session_id=own.session_id)
    for i in range(500):
        sock = connect(module_daemon)
        match i % 5:
            case 0:
                pass  # connect and leave
            case 1:
                sock.sendall(info)  # ask and leave before the answer
            case 2:
                sock.sendall(status[:20])  # leave mid-frame
            case 3:
                sock.sendall(info)
                assert sock.recv(65536)  # a full exchange
            case _:
                sock.sendall(status * 3)
                reset(sock)
                continue
        sock.close()
    # And 500 at once, then all dropped together.
    crowd = []
    try:
        for _ in range(500):
            crowd.append(connect(module_daemon))
            crowd[-1].sendall(info)
    finally:
        for sock in crowd:
            sock.close()
    assert settled_fds(pid, before.fds) <= before.fds
    after = footprint(pid)
    assert after.threads == before.threads
    print(f"500 + 500 connections: before {before}; after {after}")
    with Rpc(module_daemon.socket) as rpc:
        assert rpc.call("daemon_info")["pid"] == pid


class Hog(threading.Thread):
    """A client that writes requests as fast as the daemon takes them and never reads an answer."""

    def __init__(self, daemon: Daemon, request: bytes, seconds: float) -> None:
        super().__init__(daemon=True)
        self.sock = connect(daemon)
        self.sock.settimeout(0.5)
        self.request = request * 64
        self.seconds = seconds
        self.sent = 0
        self.dropped = False

    def run(self) -> None:
        deadline = time.monotonic() + self.seconds
        while time.monotonic() < deadline:
            try:
                self.sent += self.sock.send(self.request)
            except TimeoutError:
                continue  # the daemon stopped reading us: that is the backpressure
            except OSError:
                self.dropped = True
                return

    def close(self) -> None:
        with contextlib.suppress(OSError):
            reset(self.sock)


def latencies_while(hog: Hog, daemon: Daemon, own: OwnSession) -> tuple[list[float], list[float]]:
    """Round trips of other clients while the hog runs: daemon_info on a connection of its own, and a send."""
    infos, sends = [], []
    at_least = time.monotonic() + 2.0  # a hog that is dropped at once still gets two seconds of company
    with Rpc(daemon.socket) as rpc:
        while hog.is_alive() or time.monotonic() < at_least:
            start = time.monotonic()
            rpc.call("daemon_info")
            infos.append(time.monotonic() - start)
            start = time.monotonic()
            assert own.shell.send("echo ok\n")["viewport"] == "$ echo ok\nok\n$"
            sends.append(time.monotonic() - start)
    return infos, sends


def test_agents_released_all_at_once_leave_the_daemons_threads_as_they_were(fresh_daemon: Daemon) -> None:
    """Each release removes the agent's scratch directory off the loop: a burst of them once grew the default
    executor by a thread per call in flight, kept for good (the soak test caught it)."""
    fresh_daemon.start()
    pid = daemon_pid(fresh_daemon)
    before = footprint(pid)
    errors: list[BaseException] = []

    def agent(together: threading.Barrier) -> None:
        try:
            with Rpc(fresh_daemon.socket) as rpc:
                token = rpc.call("agent_register")["token"]
                session = rpc.call("terminal_open", token=token)["session_id"]
                rpc.call("terminal_close", token=token, session_id=session)
                together.wait(10)
                rpc.call("agent_release", token=token)
        except BaseException as exc:  # reported below, from the test's thread
            errors.append(exc)

    for _ in range(3):
        together = threading.Barrier(8)
        agents = [threading.Thread(target=agent, args=(together,)) for _ in range(8)]
        for thread in agents:
            thread.start()
        for thread in agents:
            thread.join()
        assert errors == []
        assert footprint(pid).threads == before.threads


@pytest.mark.parametrize("answers", ["small", "large"])
def test_a_client_that_never_reads_costs_bounded_memory_and_stalls_nobody(
    module_daemon: Daemon, own: OwnSession, big_transcript: int, answers: str
) -> None:
    pid = daemon_pid(module_daemon)
    before = footprint(pid)
    if answers == "small":
        request = frame("daemon_info")
    else:
        request = frame("terminal_read", token=own.token, session_id=own.session_id, start_line=0, max_lines=10_000)
    hog = Hog(module_daemon, request, seconds=4.0)
    peak = [before.rss_kib]

    def sample() -> None:
        while hog.is_alive():
            peak.append(footprint(pid).rss_kib)
            time.sleep(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    hog.start()
    sampler.start()
    infos, sends = latencies_while(hog, module_daemon, own)
    hog.join()
    sampler.join()
    hog.close()
    grown = max(peak) - before.rss_kib
    print(
        f"hog with {answers} answers: wrote {hog.sent / 1e6:.1f} MB, dropped={hog.dropped}; daemon peak growth "
        f"{grown / 1024:.1f} MiB; others: daemon_info max {max(infos) * 1000:.0f} ms over {len(infos)}, "
        f"send max {max(sends) * 1000:.0f} ms"
    )
    assert grown < 64 * 1024, f"the daemon grew {grown} KiB for a client that does not read"
    # A daemon stalled by the hog would leave them waiting for it (4 s) or for idle_ms (3 s).
    latency(max(infos), tight=1.0, fallback=3.0, what="daemon_info beside a hog")
    latency(max(sends), tight=2.0, fallback=3.0, what="a send beside a hog")
    assert settled_fds(pid, before.fds) <= before.fds
    if answers == "large":
        # 16 MiB of unread answers is the bound (max_connection_write_buffer): the daemon drops such a client.
        assert hog.dropped or "does not read its responses" in module_daemon.log()


def ask_unanswered(rpc: Rpc) -> None:
    """A request on a refused connection: the daemon closes it without an answer, before the request is written
    (a broken pipe or a reset) or after (end of stream); all are ConnectionErrors, and no answer ever arrives."""
    rpc.send_raw(frame("daemon_info"))
    rpc.recv_line()


def test_connections_past_max_connections_are_refused_and_the_slots_come_back(fresh_daemon: Daemon) -> None:
    fresh_daemon.config_path.write_text("max_connections = 10\n")
    fresh_daemon.start()
    clients = [Rpc(fresh_daemon.socket) for _ in range(10)]
    try:
        token = clients[0].call("agent_register")["token"]
        for client in clients:  # with a token: an idle one that never authenticated would make room instead
            assert client.call("daemon_info", token=token)["pid"] == daemon_pid(fresh_daemon)
        with Rpc(fresh_daemon.socket) as extra, pytest.raises(ConnectionError):
            ask_unanswered(extra)
        clients.pop().close()
        deadline = time.monotonic() + 10
        while True:  # the freed slot is usable once the daemon has seen the close
            try:
                with Rpc(fresh_daemon.socket) as again:
                    assert again.call("daemon_info")["pid"] == daemon_pid(fresh_daemon)
                break
            except ConnectionError:
                assert time.monotonic() < deadline, "the closed connection's slot never came back"
                time.sleep(0.02)
        assert all(c.call("daemon_info")["sessions"] == 0 for c in clients)  # the other nine never noticed
    finally:
        for client in clients:
            client.close()
