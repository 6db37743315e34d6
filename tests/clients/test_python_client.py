"""The Python client (clients/python) against a real daemon: every method, typed errors, reconnects, asyncio."""

from __future__ import annotations

import asyncio
import inspect
import os
import shutil
import socket
import sys
import threading
import time
import typing
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from conftest import ROOT, Daemon, latency, wait_until

sys.path.insert(0, str(ROOT / "clients" / "python"))

from ptyd_client import (
    AsyncClient,
    AsyncSession,
    BackendNotFound,
    Client,
    ConnectionLost,
    DaemonUnavailable,
    InvalidParams,
    LimitExceeded,
    MethodNotFound,
    PtydError,
    Session,
    SessionBusy,
    SessionExited,
    SessionNotFound,
    SpawnFailed,
    Unauthorized,
    core,
    errors,
)
from ptyd_client import types as wire

SHELL = {"env": {"PS1": "$ "}}


@pytest.fixture
def client(daemon: Daemon) -> Iterator[Client]:
    with Client(daemon.socket) as c:
        c.agent_register("python-client-test")
        yield c
        if c.token is not None:
            c.agent_release()


def _foreground(info: wire.SessionInfo) -> str | None:
    return info["foreground"]["name"] if info["foreground"] else None


def _open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


# --- derived from the daemon, not written twice ----------------------------------------------------------


def test_generated_types_match_the_daemons_wire_types() -> None:
    from ptyd.rpc import codegen_py

    committed = (ROOT / "clients/python/ptyd_client/types.py").read_text()
    assert committed == codegen_py.render(), "stale: run .venv/bin/python -m ptyd.rpc.codegen_py"


def test_the_blocking_methods_are_generated_from_the_asyncio_ones() -> None:
    from ptyd.rpc import codegen_sync

    committed = (ROOT / "clients/python/ptyd_client/methods.py").read_text()
    assert committed == codegen_sync.render(), "stale: run .venv/bin/python -m ptyd.rpc.codegen_sync (make docs)"


@pytest.mark.parametrize(("blocking", "asyncio_twin"), [(Client, AsyncClient), (Session, AsyncSession)])
def test_both_clients_have_the_same_methods_signatures_and_docstrings(blocking: type, asyncio_twin: type) -> None:
    def public(cls: type) -> dict[str, typing.Any]:
        return {
            name: member
            for klass in reversed(cls.__mro__[:-1])
            for name, member in vars(klass).items()
            if callable(member) and not name.startswith("_")
        }

    sync, aio = public(blocking), public(asyncio_twin)
    assert set(sync) == set(aio)
    for name, method in sync.items():
        assert list(inspect.signature(method).parameters) == list(inspect.signature(aio[name]).parameters), name
        if method.__module__ != "ptyd_client.methods":
            continue  # the transport's own (connect, close, call): its docstring says how it behaves
        twin = (inspect.getdoc(aio[name]) or "").replace("AsyncClient", "Client").replace("AsyncSession", "Session")
        twin = twin.replace("``async with``", "``with``").replace("an :class:`Session`", "a :class:`Session`")
        assert inspect.getdoc(method) == twin, name


def test_open_and_send_options_are_the_daemons_params() -> None:
    from ptyd.rpc.methods import Api
    from ptyd.rpc.openrpc import openrpc_document

    document = openrpc_document(Api(None).methods(), "test")  # type: ignore[arg-type]
    params = {m["name"]: {p["name"] for p in m["params"]} for m in document["methods"]}
    assert set(core.OpenOptions.__annotations__) == params["terminal_open"] - {"token"}
    assert (
        set(core.SendOptions.__annotations__) | {"token", "session_id", "input", "wait", "request_key"}
        == (params["terminal_send"])
    )


def test_every_error_kind_has_its_class_and_code() -> None:
    classes = {cls.KIND: cls for cls in errors.ERROR_CLASSES}
    for kind, code in wire.ERROR_CODES.items():  # the daemon's table (ptyd/errors.py), JSON-RPC's own kinds too
        exc = errors.error_from_wire({"code": code, "message": "m", "data": {"kind": kind}})
        assert type(exc) is not PtydError, kind
        assert (exc.CODE, exc.kind) == (code, kind)
        if kind in classes:
            assert type(exc) is classes[kind]


def test_unknown_error_kind_is_still_a_ptyd_error() -> None:
    exc = errors.error_from_wire({"code": -32099, "message": "new", "data": {"kind": "from_the_future", "x": 1}})
    assert type(exc) is PtydError
    assert (exc.code, exc.kind, exc.data["x"]) == (-32099, "from_the_future", 1)


def test_every_rpc_has_a_documented_method_on_both_clients() -> None:
    for method in wire.METHODS:
        for cls in (Client, AsyncClient):
            assert getattr(cls, method).__doc__, f"{cls.__name__}.{method}"
    for cls in (Client, AsyncClient):
        hints = typing.get_type_hints(cls.terminal_status)
        assert hints["return"] is wire.SessionInfo


@pytest.mark.parametrize(
    "env",
    [
        {"PTYD_SOCKET": "/x/explicit.sock", "XDG_RUNTIME_DIR": "/run/user/7"},
        {"XDG_RUNTIME_DIR": "/run/user/7"},
        {},
    ],
)
def test_socket_is_found_exactly_as_the_daemon_finds_it(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> None:
    from ptyd.config import default_socket_path

    for name in ("PTYD_SOCKET", "XDG_RUNTIME_DIR"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert core.default_socket_path() == default_socket_path()
    assert Client().socket_path == default_socket_path()
    assert Client("/elsewhere/p.sock").socket_path == Path("/elsewhere/p.sock")


def test_token_comes_from_the_argument_then_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PTYD_TOKEN", "from-env")
    assert Client("/s").token == "from-env"
    assert Client("/s", token="given").token == "given"
    monkeypatch.delenv("PTYD_TOKEN")
    assert Client("/s").token is None


# --- every method ---------------------------------------------------------------------------------------


def test_every_method_against_a_real_daemon(client: Client, daemon: Daemon) -> None:
    info = client.daemon_info()
    assert daemon.proc is not None
    assert info["pid"] == daemon.proc.pid
    assert "terminal_send" in {m["name"] for m in client.discover()["methods"]}

    with client.open(name="every", cols=80, rows=20, **SHELL) as shell:
        assert shell.opened is not None
        assert shell.opened["wait_reason"] == "stdin_read"
        result = shell.send("echo one-$((40+2))\n")
        assert result["wait_reason"] == "stdin_read"
        assert "one-42" in result["viewport"]
        assert result["session_status"] == {"kind": "running"}

        operation = shell.send("sleep 0.3; echo two\n", wait=False)
        waited = shell.wait(timeout_ms=10_000)
        assert waited["operation_id"] == operation
        assert waited["done"]
        assert waited["result"] is not None
        assert "two" in waited["result"]["viewport"]
        assert shell.output()["operation_id"] == operation

        operation = shell.send("sleep 30\n", wait=False)
        # Cancel once sleep runs: a SIGINT that lands before bash started it interrupts nothing (see report).
        wait_until(lambda: _foreground(shell.status()) == "sleep", message="sleep to be in the foreground")
        assert shell.cancel()["cancelled"] is True
        cancelled = shell.wait(timeout_ms=10_000)["result"]
        assert cancelled is not None
        assert cancelled["operation_id"] == operation

        page = shell.read(start_line=0)
        assert any("one-42" in line for line in page["lines"])
        assert shell.read(-1)["lines"] == ["$"]

        status = shell.resize(100, 30)
        assert (status["cols"], status["rows"]) == (100, 30)
        assert shell.status()["name"] == "every"
        assert shell.signal("SIGWINCH")["signal"] == "SIGWINCH"
        assert [s["session_id"] for s in client.terminal_list()["sessions"]] == [shell.id]
    assert client.terminal_close(shell.id) == {"closed": False, "killed": 0}  # the with block closed it
    assert client.terminal_list()["sessions"] == []
    released = client.agent_release()
    assert released == {"closed_sessions": 0}
    assert client.token is None


def test_send_returns_a_settled_result_for_a_repeated_request_key(client: Client) -> None:
    with client.open(**SHELL) as shell:
        first = client.terminal_send(shell.id, "echo once >> /dev/null; echo ran\n", request_key="k-1")
        again = client.terminal_send(shell.id, "echo once >> /dev/null; echo ran\n", request_key="k-1")
        assert again["operation_id"] == first["operation_id"]
        assert sum("echo once" in line for line in shell.read(0)["lines"]) == 1


# --- typed errors ---------------------------------------------------------------------------------------------


def test_each_error_kind_raises_its_exception(client: Client, daemon: Daemon, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PTYD_TOKEN", raising=False)
    with Client(daemon.socket, token="ptyd_not-a-token") as stranger, pytest.raises(Unauthorized) as unauthorized:
        stranger.terminal_list()
    assert (unauthorized.value.code, unauthorized.value.kind) == (-32001, "unauthorized")
    with pytest.raises(Unauthorized):
        Client(daemon.socket, token=None).terminal_list()  # no token at all: said before any call
    with pytest.raises(SessionNotFound) as not_found:
        client.terminal_status("pty-000000000000000000000000")
    assert not_found.value.session_id == "pty-000000000000000000000000"
    with pytest.raises(BackendNotFound):
        client.terminal_open(type="no-such-backend")
    with pytest.raises(SpawnFailed) as spawn:
        client.terminal_open(type="exec", argv=["/nonexistent/program"])
    assert spawn.value.data["reason"] == "ENOENT"
    with pytest.raises(MethodNotFound):
        client.call("terminal_teleport")

    with client.open(**SHELL) as shell:
        with pytest.raises(InvalidParams):
            shell.signal("SIGNOTHING")
        with pytest.raises(InvalidParams) as bounds:
            shell.resize(1, 10)
        assert "cols" in bounds.value.data["detail"]
        operation = shell.send("sleep 5\n", wait=False)
        with pytest.raises(SessionBusy) as busy:
            shell.send("echo no\n")
        assert busy.value.operation_id == operation
        shell.cancel()

    with client.open(type="exec", argv=["true"]) as done:
        wait_until(lambda: done.status()["status"]["kind"] == "exited", message="`true` to exit")
        with pytest.raises(SessionExited):
            done.send("x")


def test_limit_exceeded_names_the_limit(fresh_daemon: Daemon) -> None:
    fresh_daemon.config_path.write_text("max_sessions_per_agent = 1\n")
    fresh_daemon.start()
    with Client(fresh_daemon.socket) as client:
        client.agent_register()
        client.terminal_open(**SHELL)
        with pytest.raises(LimitExceeded) as limit:
            client.terminal_open(**SHELL)
        assert limit.value.data["limit"] == "max_sessions_per_agent"


def test_daemon_down_is_one_clear_exception_naming_the_socket(tmp_path: Path) -> None:
    missing = tmp_path / "ptyd.sock"
    with pytest.raises(DaemonUnavailable) as down:
        Client(missing).daemon_info()
    assert str(missing) in str(down.value)
    assert "no socket" in str(down.value)
    assert isinstance(down.value, ConnectionError)

    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(missing))  # a socket file nobody listens on: a daemon that died
    stale.close()
    with pytest.raises(DaemonUnavailable, match="refuses connections"):
        Client(missing).daemon_info()
    with pytest.raises(DaemonUnavailable):
        asyncio.run(AsyncClient(missing).daemon_info())


# --- reconnects --------------------------------------------------------------------------------------------


def test_reconnects_after_a_daemon_restart_between_calls(fresh_daemon: Daemon) -> None:
    fresh_daemon.start()

    async def scenario() -> None:
        async with AsyncClient(fresh_daemon.socket) as async_client:
            with Client(fresh_daemon.socket) as client:
                first = client.daemon_info()["pid"]
                assert (await async_client.daemon_info())["pid"] == first
                assert fresh_daemon.stop() == 0
                fresh_daemon.start()
                # The same clients, new connections, no error.
                assert client.daemon_info()["pid"] != first
                assert (await async_client.daemon_info())["pid"] != first

    asyncio.run(scenario())


def _in_flight(watcher: Client, session_id: str) -> bool:
    return watcher.terminal_status(session_id)["busy"]


def test_send_cut_off_by_a_dropped_connection_runs_once(client: Client, daemon: Daemon, tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    with Client(daemon.socket, token=client.token) as watcher, client.open(**SHELL) as shell:
        connection = client._connection
        assert connection is not None

        def drop_when_in_flight() -> None:
            wait_until(lambda: _in_flight(watcher, shell.id), message="the send to start")
            connection.sock.shutdown(socket.SHUT_RDWR)  # the connection dies under the waiting call

        dropper = threading.Thread(target=drop_when_in_flight)
        dropper.start()
        result = shell.send(f"echo mark >> {marks}; sleep 1; echo finished\n")
        dropper.join()
        assert client._connection is not connection  # it reconnected
        assert "finished" in result["viewport"]
        assert marks.read_text() == "mark\n"  # sent with its request_key again: the daemon did not write twice


def _programs(argv: list[str]) -> list[int]:
    """Pids of the processes running exactly ``argv``."""
    wanted = ("\0".join(argv) + "\0").encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "cmdline").read_bytes() == wanted:
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def test_open_cut_off_by_a_dropped_connection_is_not_repeated(client: Client, daemon: Daemon) -> None:
    # A program that never reads its terminal: terminal_open answers only after idle_ms of silence.
    argv = [shutil.which("sleep") or "/bin/sleep", "31.25"]
    client.connect()
    connection = client._connection
    assert connection is not None

    def drop_when_opening() -> None:
        wait_until(lambda: _programs(argv), message="the program to be started")
        connection.sock.shutdown(socket.SHUT_RDWR)

    dropper = threading.Thread(target=drop_when_opening)
    dropper.start()
    with pytest.raises(ConnectionLost, match="terminal_open"):
        client.terminal_open(type="exec", argv=argv, idle_ms=1500)
    dropper.join()
    with Client(daemon.socket, token=client.token) as watcher:
        wait_until(lambda: watcher.terminal_list()["sessions"], message="the session to be published")
        assert len(watcher.terminal_list()["sessions"]) == 1
    assert len(_programs(argv)) == 1  # raised instead of opening a second session


# --- the asyncio client ------------------------------------------------------------------------------------


async def _until(shell: AsyncSession, check: Callable[[wire.SessionInfo], bool], what: str) -> None:
    deadline = time.monotonic() + 10
    while not check(await shell.status()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


async def _until_busy(shell: AsyncSession) -> None:
    await _until(shell, lambda info: info["busy"], "the send to start")


def test_async_long_send_and_read_are_in_flight_together_on_one_connection(daemon: Daemon) -> None:
    async def scenario() -> None:
        async with AsyncClient(daemon.socket) as client:
            await client.agent_register("async-test")
            async with await client.open(**SHELL) as shell:
                await shell.send("echo before\n")
                fds = _open_fds()
                send = asyncio.create_task(shell.send("sleep 1; echo after-sleep\n"))
                await _until_busy(shell)
                started = time.monotonic()
                reads = await asyncio.gather(*(shell.read(-5) for _ in range(10)), shell.status())
                # Reads that waited for the send would take its second.
                latency(time.monotonic() - started, tight=0.8, fallback=1.0, what="reads beside a send")
                assert not send.done()
                assert all(any("before" in line for line in r["lines"]) for r in reads[:-1])
                assert _open_fds() == fds  # no second connection was made
                result = await send
                assert "after-sleep" in result["viewport"]
            await client.agent_release()

    asyncio.run(scenario())


def test_async_every_session_method(daemon: Daemon) -> None:
    async def scenario() -> None:
        async with AsyncClient(daemon.socket) as client:
            await client.agent_register()
            assert (await client.daemon_info())["protocol_version"] == 9
            assert (await client.discover())["openrpc"].startswith("1.")
            shell = await client.open(cols=90, rows=25, **SHELL)
            operation = await shell.send("sleep 0.2; echo bg\n", wait=False)
            waited = await shell.wait(timeout_ms=10_000)
            assert waited["operation_id"] == operation
            assert waited["result"] is not None
            assert (await shell.output())["done"]
            await shell.send("sleep 30\n", wait=False)
            await _until(shell, lambda info: _foreground(info) == "sleep", "sleep to be in the foreground")
            assert (await shell.cancel())["cancelled"]
            await shell.wait(timeout_ms=10_000)
            assert (await shell.resize(91, 26))["cols"] == 91
            assert (await shell.signal(28))["signal"] == "SIGWINCH"
            assert (await shell.status())["busy"] is False
            assert [s["session_id"] for s in (await client.terminal_list())["sessions"]] == [shell.id]
            with pytest.raises(SessionNotFound):
                await client.terminal_status("pty-nope")
            assert (await shell.close())["closed"]
            assert (await client.agent_release())["closed_sessions"] == 0

    asyncio.run(scenario())


def test_async_send_cut_off_by_a_dropped_connection_runs_once(daemon: Daemon, tmp_path: Path) -> None:
    marks = tmp_path / "marks"

    async def scenario() -> None:
        async with AsyncClient(daemon.socket) as client:
            await client.agent_register()
            shell = await client.open(**SHELL)
            send = asyncio.create_task(shell.send(f"echo mark >> {marks}; sleep 1; echo finished\n"))
            await _until_busy(shell)
            first = client._connection
            assert first is not None
            first._writer.transport.abort()  # the connection dies under the waiting send
            result = await send
            assert client._connection is not first
            assert "finished" in result["viewport"]
            assert marks.read_text() == "mark\n"
            await client.agent_release()

    asyncio.run(scenario())


def test_client_leaves_no_file_descriptors_behind(daemon: Daemon) -> None:
    before = _open_fds()
    for _ in range(5):
        with Client(daemon.socket) as c:
            c.daemon_info()

    async def scenario() -> None:
        for _ in range(5):
            async with AsyncClient(daemon.socket) as c:
                await c.daemon_info()

    asyncio.run(scenario())
    assert _open_fds() - before == set()
