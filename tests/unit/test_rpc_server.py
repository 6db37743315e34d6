"""The socket server in the test's own loop: how many turns of a busy loop a request waits before its handler
runs, and that requests read past ``max_inflight_per_connection`` wait their turn and are all answered."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import tempfile
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from ptyd.config import Config
from ptyd.rpc.dispatch import Dispatcher, Method
from ptyd.rpc.server import RpcServer

from .conftest import run


class NoParams(msgspec.Struct):
    pass


def _client(
    path: Path, frames: list[bytes], answers: int, wrote: threading.Event, out: list[Any], half_close: bool = False
) -> None:
    """Write ``frames`` at once (then shut down writing: ``half_close``) and read ``answers`` lines (or, half
    closed, until the daemon closes)."""
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(5)  # a connection the server never closes fails the test rather than hanging it
        sock.connect(str(path))
        sock.sendall(b"".join(frames))
        if half_close:
            sock.shutdown(socket.SHUT_WR)
        wrote.set()
        data = b""
        while half_close or data.count(b"\n") < answers:
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                break
            if not chunk:
                out.append("closed")
                break
            data += chunk
        out[:0] = [json.loads(line) for line in data.splitlines()]


def _frame(method: str, id: int) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "method": method, "params": {}, "id": id}).encode() + b"\n"


@contextlib.asynccontextmanager
async def serving(method: Method, config: Config) -> AsyncIterator[Path]:
    """An RpcServer of ``method`` on a socket of its own, in this loop; yields the socket's path."""
    server = RpcServer(Dispatcher([method], 8), config)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "s.sock"
        listener = socket.socket(socket.AF_UNIX)
        listener.bind(str(path))
        await server.start(listener)
        try:
            yield path
        finally:
            await server.close(1.0)


def test_a_request_runs_the_turn_after_its_bytes_are_read() -> None:
    # Beside floods, every turn of the daemon's loop runs every flood's ready callbacks: a request waits that
    # long once per turn between its bytes and its handler. Read by a stream, it waited three turns (the read,
    # the reader coroutine resumed, its task started); read by the protocol, one (the task started).
    async def main() -> int:
        turns = 0
        started: list[int] = []
        wrote = threading.Event()
        at_write: list[int] = []

        async def probe(_: Any, __: NoParams) -> dict[str, int]:
            started.append(turns)
            return {"turns": turns}

        def busy() -> None:  # a long turn: a flood's reads and renders
            nonlocal turns
            turns += 1
            if wrote.is_set() and not at_write:
                at_write.append(turns)
            time.sleep(0.005)
            if not started:
                asyncio.get_running_loop().call_soon(busy)

        out: list[Any] = []
        async with serving(Method("probe", NoParams, Any, probe, "probe"), Config()) as path:
            busy()
            await asyncio.to_thread(_client, path, [_frame("probe", 1)], 1, wrote, out)
        assert out[0]["result"] == {"turns": started[0]}
        return started[0] - at_write[0]

    assert run(main) <= 2


@pytest.mark.parametrize("half_close", [False, True])
def test_requests_past_max_inflight_wait_and_are_all_answered(half_close: bool) -> None:
    # Half closed, the client has stopped writing with seven requests still queued: each is answered, and then
    # the connection closes.
    async def main() -> tuple[list[Any], int]:
        running = 0
        most = 0
        release = asyncio.Event()

        async def slow(_: Any, __: NoParams) -> int:
            nonlocal running, most
            running += 1
            most = max(most, running)
            if running == 3:
                release.set()  # as many as may run at once: all go on, the rest start as these end
            await release.wait()
            running -= 1
            return most

        out: list[Any] = []
        config = Config(max_inflight_per_connection=3, unauthenticated_connection_ms=600_000)
        async with serving(Method("slow", NoParams, Any, slow, "slow"), config) as path:
            frames = [_frame("slow", i) for i in range(10)]
            await asyncio.to_thread(_client, path, frames, 10, threading.Event(), out, half_close)
        return out, most

    out, most = run(main)
    assert sorted(answer["id"] for answer in out if answer != "closed") == list(range(10))
    assert most == 3
    if half_close:
        assert out[-1] == "closed"
