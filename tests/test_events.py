"""Events instead of polling: terminal_subscribe and the terminal_event notifications, on a real daemon."""

from __future__ import annotations

import itertools
import json
import socket
import time
from typing import Any

import pytest

from conftest import Daemon, Rpc, RpcError, Shell

Event = dict[str, Any]


class Listener:
    """A raw connection that subscribed: notifications come as lines without an id."""

    def __init__(self, daemon: Daemon, token: str, **params: Any) -> None:
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect(str(daemon.socket))
        self.buffer = b""
        request = {"jsonrpc": "2.0", "id": 1, "method": "terminal_subscribe", "params": {"token": token, **params}}
        self.sock.sendall(json.dumps(request).encode() + b"\n")
        self.pending: list[Event] = []
        while True:
            message = self._message(10.0)
            assert message is not None
            if message.get("id") == 1:
                assert "result" in message, message
                self.subscription_id = message["result"]["subscription_id"]
                break
            self.pending.append(message["params"])

    def _message(self, timeout: float) -> dict[str, Any] | None:
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            self.sock.settimeout(remaining)
            try:
                data = self.sock.recv(65536)
            except TimeoutError:
                return None
            assert data, "the daemon closed the connection"
            self.buffer += data
        line, _, self.buffer = self.buffer.partition(b"\n")
        message: dict[str, Any] = json.loads(line)
        return message

    def next(self, timeout: float = 10.0) -> Event | None:
        if self.pending:
            return self.pending.pop(0)
        message = self._message(timeout)
        if message is None:
            return None
        assert message["method"] == "terminal_event", message
        assert "id" not in message
        params: Event = message["params"]
        return params

    def until(self, kind: str, timeout: float = 10.0) -> list[Event]:
        """Events up to and including the first of ``kind``."""
        seen = []
        deadline = time.monotonic() + timeout
        while True:
            event = self.next(max(0.0, deadline - time.monotonic()))
            assert event is not None, f"no {kind} event; saw {[e['kind'] for e in seen]}"
            seen.append(event)
            if event["kind"] == kind:
                return seen

    def close(self) -> None:
        self.sock.close()


def test_background_send_settles_as_an_event(daemon: Daemon, shell: Shell) -> None:
    listener = Listener(daemon, shell.token, session_id=shell.id)
    started = shell.send("sleep 0.3; echo finished\n", wait=False)
    events = listener.until("send_settled")
    settled = events[-1]
    assert settled["operation_id"] == started["operation_id"]
    assert settled["subscription_id"] == listener.subscription_id
    assert settled["result"]["wait_reason"] == "stdin_read"
    assert settled["result"]["exit_code"] == 0
    assert settled["result"]["viewport"].splitlines()[-2:] == ["finished", "$"]
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    listener.close()


def test_input_wait_outside_a_send(daemon: Daemon, shell: Shell) -> None:
    listener = Listener(daemon, shell.token, session_id=shell.id)
    try:
        result = shell.send("sleep 0.5; read -s -p 'Password: ' x\n", timeout_ms=100)
        assert result["wait_reason"] == "timeout"
        events = listener.until("input_wait")
        assert events[-1]["password_prompt"] is True
        assert shell.call("terminal_status")["password_prompt"] is True
        shell.send("x\n")
    finally:
        listener.close()


def test_output_events_carry_the_lines_as_they_appear(daemon: Daemon, shell: Shell) -> None:
    listener = Listener(daemon, shell.token, session_id=shell.id, output=True)
    shell.send("for i in 1 2 3; do echo line$i; sleep 0.2; done\n", wait=False)
    events = listener.until("send_settled")
    outputs = [e for e in events if e["kind"] == "output"]
    assert len(outputs) >= 2  # the lines arrive while the command runs, not all at the end
    text = "".join(e["output"] for e in outputs)
    assert [line for line in text.splitlines() if line.startswith("line")] == ["line1", "line2", "line3"]
    ranges = [(e["lines"]["start_line"], e["lines"]["end_line"]) for e in outputs]
    assert all(a[1] == b[0] for a, b in itertools.pairwise(ranges))  # contiguous, nothing twice
    # Output events do not consume: terminal_output still returns the whole of the send's output.
    assert "line3" in shell.call("terminal_output")["output"]
    listener.close()


def test_exit_and_close_events(daemon: Daemon, rpc: Rpc, token: str) -> None:
    listener = Listener(daemon, token)  # every session of the agent, opened later too
    s = Shell(rpc, token, env={"PS1": "$ "})
    s.send("exit 7\n")
    exited = listener.until("session_exit")[-1]
    assert exited["session_id"] == s.id
    assert exited["status"] == {"kind": "exited", "exit_code": 7, "signal": None}
    s.close()
    assert listener.until("session_closed")[-1]["session_id"] == s.id
    listener.close()


def test_another_agents_sessions_are_not_heard(daemon: Daemon, rpc: Rpc, token: str) -> None:
    other = rpc.call("agent_register", name="other")["token"]
    listener = Listener(daemon, other)
    s = Shell(rpc, token, env={"PS1": "$ "})
    s.send("echo private\n")
    s.close()
    assert listener.next(timeout=0.5) is None
    listener.close()
    rpc.call("agent_release", token=other)


def test_subscribing_to_a_foreign_session_is_session_not_found(daemon: Daemon, rpc: Rpc, shell: Shell) -> None:
    other = rpc.call("agent_register", name="other")["token"]
    with pytest.raises(RpcError) as refused:
        rpc.call("terminal_subscribe", token=other, session_id=shell.id)
    assert refused.value.kind == "session_not_found"
    rpc.call("agent_release", token=other)


def test_unsubscribe_stops_events(daemon: Daemon, rpc: Rpc, shell: Shell) -> None:
    listener = Listener(daemon, shell.token, session_id=shell.id)
    result = rpc.call("terminal_unsubscribe", token=shell.token, subscription_id=listener.subscription_id)
    assert result == {"unsubscribed": True}
    assert rpc.call("terminal_unsubscribe", token=shell.token, subscription_id=listener.subscription_id) == {
        "unsubscribed": False
    }
    shell.send("echo quiet\n")
    assert listener.next(timeout=0.5) is None
    listener.close()


def test_a_listener_that_disconnects_costs_nothing(daemon: Daemon, shell: Shell) -> None:
    for _ in range(20):
        Listener(daemon, shell.token, output=True).close()
    result = shell.send("echo alive\n")
    assert result["viewport"].splitlines()[-2:] == ["alive", "$"]


def test_python_client_event_stream(daemon: Daemon, shell: Shell) -> None:
    from ptyd_client import Client

    with Client(daemon.socket, token=shell.token) as client:
        stream = client.terminal_subscribe(shell.id)
        try:
            client.terminal_send(shell.id, "true\n", wait=False)
            event = stream.next(timeout=10)
            while event is not None and event["kind"] != "send_settled":
                event = stream.next(timeout=10)
            assert event is not None
            assert event.get("result", {}).get("exit_code") == 0
        finally:
            stream.close()


def test_subscriptions_per_connection_are_bounded(fresh_daemon: Daemon) -> None:
    fresh_daemon.config_path.write_text("max_subscriptions_per_connection = 2\n")
    fresh_daemon.start()
    with fresh_daemon.rpc() as first, fresh_daemon.rpc() as second:
        token = first.call("agent_register")["token"]
        kept = first.call("terminal_subscribe", token=token)["subscription_id"]
        first.call("terminal_subscribe", token=token)
        with pytest.raises(RpcError) as err:
            first.call("terminal_subscribe", token=token)
        assert err.value.kind == "limit_exceeded"
        assert err.value.data["limit"] == "max_subscriptions_per_connection"
        second.call("terminal_subscribe", token=token)  # another connection has its own
        assert first.call("terminal_unsubscribe", token=token, subscription_id=kept)["unsubscribed"] is True
        first.call("terminal_subscribe", token=token)  # an ended one frees its slot
