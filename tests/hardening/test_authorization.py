"""Authorization: no token, a wrong token, a released token, another agent's token or session id, another uid.

The target is the witness, another agent's session: after every test its transcript, size and status are
unchanged (the ``unharmed`` fixture), so no variant had an effect. A foreign session id is answered with the
very bytes an unknown one gets, so an agent cannot even learn that another agent's session exists.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import secrets
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import Daemon, Rpc, Shell

from .conftest import OwnSession
from .probes import Witness, daemon_pid

pytestmark = pytest.mark.usefixtures("unharmed")

DESTRUCTIVE: dict[str, dict[str, Any]] = {
    "agent_release": {},
    "agent_list": {},
    "terminal_open": {},
    "terminal_send": {"input": "echo PWNED\n", "timeout_ms": 2000},
    "terminal_output": {},
    "terminal_wait": {"timeout_ms": 10},
    "terminal_cancel": {},
    "terminal_read": {},
    "terminal_signal": {"signal": "SIGKILL"},
    "terminal_resize": {"cols": 20, "rows": 5},
    "terminal_status": {},
    "terminal_screen": {},
    "terminal_screenshot": {},
    "terminal_list": {},
    "terminal_close": {"reason": "pwned"},
    "terminal_integrate": {"timeout_ms": 2000},
    "terminal_subscribe": {},
    "terminal_unsubscribe": {"subscription_id": "sub-0000000000000000"},
    "terminal_record": {"record": True},
    "terminal_recordings": {},
    "daemon_info": {},
}
SESSION_METHODS = [
    m
    for m in DESTRUCTIVE
    if m.startswith("terminal_")
    and m not in ("terminal_open", "terminal_list", "terminal_unsubscribe", "terminal_recordings")
]


def test_every_method_that_takes_a_token_is_listed_here() -> None:
    from ptyd.rpc.methods import Api
    from ptyd.rpc.openrpc import openrpc_document

    doc = openrpc_document(Api(None).methods(), "x")  # type: ignore[arg-type]
    with_token = {m["name"] for m in doc["methods"] if any(p["name"] == "token" for p in m["params"])}
    assert with_token == set(DESTRUCTIVE)
    with_session = {m["name"] for m in doc["methods"] if any(p["name"] == "session_id" for p in m["params"])}
    assert with_session == set(SESSION_METHODS)


def raw_line(rpc: Rpc, method: str, params: dict[str, Any], request_id: int = 41) -> bytes:
    rpc.send_raw(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}).encode() + b"\n")
    return rpc.recv_line()


def error_kind(line: bytes) -> str | None:
    reply = json.loads(line)
    return reply["error"]["data"]["kind"] if "error" in reply else None


def params_for(method: str, session_id: str, token: str | None) -> dict[str, Any]:
    params = dict(DESTRUCTIVE[method])
    if method in SESSION_METHODS:
        params["session_id"] = session_id
    if token is not None:
        params["token"] = token
    return params


@pytest.fixture(scope="module")
def released_token(module_daemon: Daemon) -> str:
    with module_daemon.rpc() as rpc:
        token: str = rpc.call("agent_register", name="gone")["token"]
        Shell(rpc, token)
        assert rpc.call("agent_release", token=token) == {"closed_sessions": 1}
    return token


@pytest.mark.parametrize("method", list(DESTRUCTIVE))
def test_a_missing_wrong_or_released_token_is_refused(
    own: OwnSession, witness: Witness, released_token: str, method: str
) -> None:
    wrong = "ptyd_" + secrets.token_urlsafe(32)
    for token in (None, wrong, released_token, "", "x" * 256):
        line = raw_line(own.rpc, method, params_for(method, witness.session_id, token))
        if token is None and method == "daemon_info":
            assert error_kind(line) is None  # the token is optional there, and the answer has only totals
            continue
        expected = ("invalid_params",) if token in (None, "") else ("unauthorized",)
        assert error_kind(line) in expected, (method, token, line)


@pytest.mark.parametrize("method", SESSION_METHODS)
def test_another_agents_session_is_indistinguishable_from_an_unknown_one(
    own: OwnSession, witness: Witness, method: str
) -> None:
    foreign = witness.session_id
    unknown = "pty-" + secrets.token_hex(12)
    assert len(unknown) == len(foreign)
    line_foreign = raw_line(own.rpc, method, params_for(method, foreign, own.token))
    line_unknown = raw_line(own.rpc, method, params_for(method, unknown, own.token))
    assert error_kind(line_foreign) == "session_not_found"
    assert line_foreign == line_unknown.replace(unknown.encode(), foreign.encode())


def test_a_closed_foreign_session_answers_the_same_bytes_as_before_it_closed(
    module_daemon: Daemon, own: OwnSession
) -> None:
    """Before and after its owner closes it, another agent gets the same bytes: nothing leaks about its life."""
    with module_daemon.rpc() as victim:
        token = victim.call("agent_register", name="victim")["token"]
        target = Shell(victim, token, env={"PS1": "$ "})
        before = {m: raw_line(own.rpc, m, params_for(m, target.id, own.token)) for m in SESSION_METHODS}
        target.close()
        after = {m: raw_line(own.rpc, m, params_for(m, target.id, own.token)) for m in SESSION_METHODS}
        # The owner itself, once the session is closed and forgotten, gets the unknown-id answer too.
        owner = {m: raw_line(victim, m, params_for(m, target.id, token)) for m in SESSION_METHODS}
        victim.call("agent_release", token=token)
    assert after == before
    owner.pop("terminal_close")  # closing again is the documented idempotent no-op for the owner
    assert owner == {m: before[m] for m in owner}


def test_another_agent_cannot_list_release_or_close_the_witness(
    module_daemon: Daemon, own: OwnSession, witness: Witness
) -> None:
    listed = own.rpc.call("terminal_list", token=own.token)["sessions"]
    assert witness.session_id not in {s["session_id"] for s in listed}
    with module_daemon.rpc() as rpc:
        intruder = rpc.call("agent_register", name="intruder")["token"]
        rpc.call("terminal_open", token=intruder)
        assert rpc.call("agent_release", token=intruder) == {"closed_sessions": 1}  # its own session only


# --- another uid ------------------------------------------------------------------------------------------------

NOBODY = 65534
CONNECTED_AND_REFUSED, GOT_AN_ANSWER, CONNECT_DENIED, OTHER = 0, 1, 2, 3


def connect_as_nobody(path: Path) -> int:
    """Fork a child that drops to nobody and connects; its exit status says what happened."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = OTHER
        try:
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            sock = socket.socket(socket.AF_UNIX)
            sock.settimeout(10)
            try:
                sock.connect(str(path))
            except PermissionError:
                os._exit(CONNECT_DENIED)
            with contextlib.suppress(OSError):  # the daemon may close before the write
                sock.sendall(b'{"jsonrpc":"2.0","id":1,"method":"agent_register"}\n')
            try:
                code = GOT_AN_ANSWER if sock.recv(4096) else CONNECTED_AND_REFUSED
            except OSError as exc:
                code = CONNECTED_AND_REFUSED if exc.errno == errno.ECONNRESET else OTHER
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


@pytest.fixture
def reachable_daemon() -> Iterator[Daemon]:
    """A daemon under /tmp itself, whose every parent directory another uid can traverse once it is opened up."""
    directory = Path(tempfile.mkdtemp(prefix="ptyd-peer-", dir="/tmp"))
    daemon = Daemon(directory)
    daemon.start()
    try:
        yield daemon
    finally:
        daemon.stop()
        shutil.rmtree(directory, ignore_errors=True)


def test_a_connection_from_another_uid_is_refused(reachable_daemon: Daemon) -> None:
    with reachable_daemon.rpc() as rpc:
        agents = rpc.call("daemon_info")["agents"]
    # As started, the 0700 directory stops another uid before the daemon ever sees it.
    assert connect_as_nobody(reachable_daemon.socket) == CONNECT_DENIED
    # Opened up (an administrator's mistake), the socket is reachable: now the daemon's peer check must refuse.
    reachable_daemon.directory.chmod(0o711)
    reachable_daemon.socket.chmod(0o666)
    assert connect_as_nobody(reachable_daemon.socket) == CONNECTED_AND_REFUSED
    assert f"refused a connection from uid {NOBODY}" in reachable_daemon.log()
    with reachable_daemon.rpc() as rpc:
        info = rpc.call("daemon_info")
    assert info["agents"] == agents  # the refused client's request never ran
    assert info["pid"] == daemon_pid(reachable_daemon)
