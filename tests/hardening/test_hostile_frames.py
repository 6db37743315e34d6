"""Hostile frames: whatever a client writes, it gets a JSON-RPC error (or a closed connection) and nothing else.

After every test the daemon is alive, the witness session (another agent's) has the same transcript, and the
daemon logged nothing above WARNING: a client's mistake is never the daemon's incident.
"""

from __future__ import annotations

import json
import secrets
import socket
import threading
from collections.abc import Iterator
from typing import Any

import msgspec
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from conftest import Daemon, Rpc, RpcError, stress
from ptyd.config import Config
from ptyd.rpc.methods import Api
from ptyd.rpc.openrpc import openrpc_document

from .conftest import OwnSession
from .probes import answers_to, assert_response, daemon_pid, footprint, fuzzing, kept_connection, settled_fds

pytestmark = pytest.mark.usefixtures("unharmed")

# Deep nesting and the 10,000-element batch are ~600 KB frames (the size limit has a module of its own), and
# the fuzzer's envelopes call agent_register thousands of times.
DAEMON_CONFIG = "max_frame_bytes = 1048576\nmax_agents = 100000\n"
MAX_BATCH = Config().max_batch
METHODS = [m["name"] for m in openrpc_document(Api(None).methods(), "x")["methods"]] + ["rpc.discover"]

FAST = fuzzing(150)
# --stress=ci (.ci/run's bounded slow tier) runs the long fuzzers within the default 120 s. At full length they
# take 2-5 min on 2 cores (make stress): past the fast suite's 120 s, so they carry a bound of their own.
SLOW = fuzzing(stress(3000, ci=500))
SLOW_BYTES = fuzzing(stress(10_000, ci=1_000))
SLOW_TIMEOUT = pytest.mark.timeout(stress(600, ci=120))

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(st.text(max_size=12), inner, max_size=6),
    max_leaves=25,
)
# Objects that look like requests, so that the fuzzer reaches method dispatch and params decoding too.
envelopes = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.just("2.0") | json_values,
        "method": st.sampled_from(METHODS) | json_values,
        "params": st.dictionaries(st.sampled_from(["token", "session_id", "input", "cols"]), json_values) | json_values,
        "id": st.integers() | st.text(max_size=20) | json_values,
        "bogus": json_values,
    },
)
documents = envelopes | json_values | st.lists(envelopes | json_values, max_size=MAX_BATCH + 2)


def parses_as_json(frame: bytes) -> bool:
    try:
        json.loads(frame)
        return True
    except (ValueError, RecursionError):
        pass
    try:
        msgspec.json.decode(frame)
        return True
    except (msgspec.DecodeError, RecursionError):
        return False


def is_notification(obj: Any) -> bool:
    """A valid request without an id (JSON-RPC 2.0 section 4.1); the daemon also rejects unknown members."""
    return (
        isinstance(obj, dict)
        and "id" not in obj
        and obj.get("jsonrpc") == "2.0"
        and isinstance(obj.get("method"), str)
        and set(obj) <= {"jsonrpc", "method", "params"}
        and isinstance(obj.get("params", {}), dict | list)
    )


def reply_id(obj: Any) -> Any:
    """The id an answer must carry: the request's when it is a valid id (a string, a number, fractional too), else
    null."""
    if isinstance(obj, dict):
        value = obj.get("id")
        if value is None or (isinstance(value, int | float | str) and not isinstance(value, bool)):
            return value
    return None


def assert_error(reply: Any, code: int, kind: str | None = None) -> None:
    assert_response(reply)
    assert reply["error"]["code"] == code, reply
    if kind is not None:
        assert reply["error"]["data"]["kind"] == kind, reply


@pytest.fixture(scope="module")
def wire(module_daemon: Daemon) -> Iterator[Rpc]:
    with kept_connection(module_daemon) as rpc:
        yield rpc


# --- random bytes and invalid UTF-8 -----------------------------------------------------------------------------


def check_bytes(wire: Rpc, frame: bytes) -> None:
    if not frame.strip():
        assert answers_to(wire, frame, 0) == []  # a blank line is no frame at all
    else:
        assume(not parses_as_json(frame))  # "7" or "[]": random JSON has a test of its own
        [reply] = answers_to(wire, frame, 1)
        assert_error(reply, -32700, "parse_error")
        assert reply["id"] is None


@FAST
@given(st.binary(min_size=1, max_size=4096).map(lambda b: b.replace(b"\n", b"")))
def test_random_bytes_get_a_parse_error(wire: Rpc, frame: bytes) -> None:
    check_bytes(wire, frame)


@pytest.mark.slow
@SLOW_TIMEOUT
@SLOW_BYTES
@given(st.binary(min_size=1, max_size=65536).map(lambda b: b.replace(b"\n", b"")))
def test_random_bytes_get_a_parse_error_long(wire: Rpc, frame: bytes) -> None:
    check_bytes(wire, frame)


BAD_UTF8 = [
    b"\xff",
    b"\x80",
    b"\xc0\x80",  # overlong NUL
    b"\xc1\xbf",
    b"\xe0\x80\x80",
    b"\xed\xa0\x80",  # a UTF-16 surrogate, UTF-8 encoded (CESU-8)
    b"\xed\xbf\xbf",
    b"\xf4\x90\x80\x80",  # above U+10FFFF
    b"\xf8\x88\x80\x80\x80",
    b"\xe2\x82",  # truncated sequence
    b"\xf0\x9f\x98",
]


@FAST
@given(
    st.sampled_from(BAD_UTF8),
    st.text(max_size=16),
    st.text(max_size=16),
    st.sampled_from(["method", "token", "id", "key", "input"]),
)
def test_invalid_utf8_anywhere_is_a_parse_error(wire: Rpc, bad: bytes, before: str, after: str, where: str) -> None:
    hole = before + "\x01HOLE\x01" + after
    request: dict[str, Any] = {"jsonrpc": "2.0", "id": 7, "method": "terminal_send", "params": {"token": "t"}}
    if where == "key":
        request["params"][hole] = 1
    elif where == "input":
        request["params"].update(session_id="s", input=hole)
    elif where == "token":
        request["params"]["token"] = hole
    else:
        request[where] = hole
    frame = json.dumps(request).encode().replace(b"\\u0001HOLE\\u0001", bad)
    assert bad in frame
    [reply] = answers_to(wire, frame, 1)
    assert_error(reply, -32700, "parse_error")


# --- random JSON documents --------------------------------------------------------------------------------------


def check_document(wire: Rpc, doc: Any) -> None:
    frame = json.dumps(doc).encode()
    if isinstance(doc, list) and 0 < len(doc) <= MAX_BATCH:
        expected = [element for element in doc if not is_notification(element)]
        answers = answers_to(wire, frame, 1 if expected else 0)
        if not expected:
            assert answers == []
            return
        [batch] = answers
        assert isinstance(batch, list), batch
        assert len(batch) == len(expected)
        for reply in batch:
            assert_response(reply)
        assert sorted(map(repr, (r["id"] for r in batch))) == sorted(map(repr, map(reply_id, expected)))
        return
    if is_notification(doc):
        assert answers_to(wire, frame, 0) == []
        return
    [reply] = answers_to(wire, frame, 1)
    assert_response(reply)
    assert reply["id"] == reply_id(doc)
    if isinstance(doc, list):
        assert reply["error"]["data"]["kind"] == ("empty_batch" if not doc else "batch_too_large")
    elif not isinstance(doc, dict):
        assert_error(reply, -32600, "invalid_request")


@FAST
@given(documents)
def test_random_json_gets_one_well_formed_answer(wire: Rpc, doc: Any) -> None:
    check_document(wire, doc)


@pytest.mark.slow
@SLOW_TIMEOUT
@SLOW
@given(documents)
def test_random_json_gets_one_well_formed_answer_long(wire: Rpc, doc: Any) -> None:
    check_document(wire, doc)


# --- numbers, nesting, batches ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("number", "code"),
    [
        (b"18446744073709551616", None),  # 2**64: a valid id, answered with it
        (b"-9223372036854775809", None),
        (b"1" + b"0" * 4000, None),
        (b"1" + b"0" * 5000, -32700),  # past what any JSON number decoder here takes
        (b"1e400", -32700),
        (b"-1e400", -32700),
        (b"1e-400", None),  # decodes to 0.0: a number, fractional or not, is an id to echo (JSON-RPC 2.0)
        (b"-0", None),
        (b"0.0000000000000000000000000000000000001", None),
    ],
)
def test_huge_numbers_in_the_id(wire: Rpc, number: bytes, code: int | None) -> None:
    [reply] = answers_to(wire, b'{"jsonrpc":"2.0","method":"daemon_info","id":' + number + b"}", 1)
    assert_response(reply)
    if code is None:
        assert "result" in reply
        assert reply["id"] == json.loads(number)
    else:
        assert_error(reply, code)


@pytest.mark.parametrize("field", ["cols", "timeout_ms", "max_bytes", "start_line", "signal"])
@pytest.mark.parametrize("number", [b"18446744073709551617", b"-" + b"9" * 4000, b"1e308", b"1" + b"0" * 5000])
def test_huge_numbers_in_params(wire: Rpc, own: OwnSession, field: str, number: bytes) -> None:
    params = json.dumps({"token": own.token, "session_id": own.session_id}).encode()[:-1]
    frame = b'{"jsonrpc":"2.0","id":5,"method":"terminal_read","params":' + params + b',"' + field.encode()
    [reply] = answers_to(wire, frame + b'":' + number + b"}}", 1)
    assert_response(reply)
    if field == "start_line" and "result" in reply:
        page = reply["result"]  # unbounded by the protocol: a page from the start, or empty past the end
        assert page["start_line"] == 0 or page["lines"] == []
    else:
        assert reply["error"]["code"] in (-32700, -32602), reply


DEPTH = 100_000
NESTED = {
    "arrays": b"[" * DEPTH + b"]" * DEPTH,
    "objects": b'{"a":' * DEPTH + b"1" + b"}" * DEPTH,
    "unclosed": b"[" * DEPTH,
    "alternating": b'[{"a":' * (DEPTH // 2) + b"0" + b"}]" * (DEPTH // 2),
    "in_params": b'{"jsonrpc":"2.0","id":1,"method":"daemon_info","params":{"token":'
    + b"[" * DEPTH
    + b"]" * DEPTH
    + b"}}",
    "in_id": b'{"jsonrpc":"2.0","method":"daemon_info","id":' + b"[" * DEPTH + b"]" * DEPTH + b"}",
    "in_a_batch": b'[{"jsonrpc":"2.0","id":1,"method":"daemon_info"},' + b"[" * DEPTH + b"]" * DEPTH + b"]",
}


@pytest.mark.parametrize("shape", list(NESTED))
def test_nesting_of_depth_100_000_is_a_parse_error(wire: Rpc, shape: str) -> None:
    [reply] = answers_to(wire, NESTED[shape], 1)
    assert_error(reply, -32700, "parse_error")


def request(i: int, method: str = "daemon_info") -> bytes:
    return b'{"jsonrpc":"2.0","id":%d,"method":"%s"}' % (i, method.encode())


@pytest.mark.parametrize("notifications", [False, True])
def test_a_batch_of_10_000_is_refused_whole(wire: Rpc, notifications: bool) -> None:
    element = b'{"jsonrpc":"2.0","method":"daemon_info"}'
    elements = [element if notifications else request(i) for i in range(10_000)]
    [reply] = answers_to(wire, b"[" + b",".join(elements) + b"]", 1)
    assert_error(reply, -32600, "batch_too_large")
    assert reply["error"]["data"]["limit"] == MAX_BATCH


def test_a_batch_at_the_limit_answers_every_element(wire: Rpc) -> None:
    elements = []
    for i in range(MAX_BATCH):
        kind = i % 4
        if kind == 0:
            elements.append(request(i))
        elif kind == 1:
            elements.append(b'{"jsonrpc":"2.0","id":%d,"method":"terminal_list","params":{"token":"bad"}}' % i)
        elif kind == 2:
            elements.append(b"%d" % i)
        else:
            elements.append(b'{"jsonrpc":"2.0","method":"daemon_info"}')
    [batch] = answers_to(wire, b"[" + b",".join(elements) + b"]", 1)
    assert len(batch) == MAX_BATCH * 3 // 4
    by_id = {reply["id"]: reply for reply in batch if reply["id"] is not None}
    assert set(by_id) == {i for i in range(MAX_BATCH) if i % 4 in (0, 1)}
    assert all("result" in by_id[i] for i in by_id if i % 4 == 0)
    assert all(by_id[i]["error"]["data"]["kind"] == "unauthorized" for i in by_id if i % 4 == 1)
    [too_many] = answers_to(wire, b"[" + b",".join([request(0)] * (MAX_BATCH + 1)) + b"]", 1)
    assert_error(too_many, -32600, "batch_too_large")


def test_10_000_pipelined_frames_get_10_000_answers(module_daemon: Daemon) -> None:
    frames = [request(i) if i % 2 else b"garbage %d" % i for i in range(10_000)]
    with Rpc(module_daemon.socket) as rpc:
        # A writer of its own: the daemon stops reading a client that does not read its answers.
        writer = threading.Thread(target=rpc.send_raw, args=(b"\n".join(frames) + b"\n",))
        writer.start()
        replies = [json.loads(rpc.recv_line()) for _ in frames]
        writer.join()
    ok = sorted(r["id"] for r in replies if "result" in r)
    assert ok == list(range(1, 10_000, 2))
    assert sum(1 for r in replies if r.get("error", {}).get("code") == -32700) == 5_000


# --- half-written frames ----------------------------------------------------------------------------------------


def test_half_written_frames_then_disconnect_run_nothing(module_daemon: Daemon, own: OwnSession) -> None:
    """Every prefix of a request, up to the whole frame without its newline, sent and then the client gone."""
    mark = "half-" + secrets.token_hex(6)
    params = {"token": own.token, "session_id": own.session_id, "input": f"echo {mark}\n"}
    frame = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "terminal_send", "params": params}).encode()
    pid = daemon_pid(module_daemon)
    before = footprint(pid).fds
    for cut in range(len(frame) + 1):
        sock = socket.socket(socket.AF_UNIX)
        sock.connect(str(module_daemon.socket))
        sock.sendall(frame[:cut])
        sock.close()
    assert settled_fds(pid, before) <= before
    own.shell.send("")  # fails with session_busy if a half frame started a send
    assert not any(mark in line for line in own.shell.transcript())


def test_half_closed_client_still_gets_its_answers(module_daemon: Daemon, own: OwnSession) -> None:
    """``printf '...' | nc -N``: the client shuts down its write side after the last request, then reads."""
    sock = socket.socket(socket.AF_UNIX)
    sock.settimeout(20)
    sock.connect(str(module_daemon.socket))
    params = {"token": own.token, "session_id": own.session_id, "input": "sleep 0.2; echo late\n"}
    sock.sendall(
        request(1)
        + b"\n"
        + json.dumps({"jsonrpc": "2.0", "id": 2, "method": "terminal_send", "params": params}).encode()
        + b"\n"
    )
    sock.shutdown(socket.SHUT_WR)
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    sock.close()
    replies = {r["id"]: r for r in map(json.loads, data.splitlines())}
    assert set(replies) == {1, 2}
    assert replies[2]["result"]["viewport"] == "$ sleep 0.2; echo late\nlate\n$"


# --- well-typed strings that no system call takes ---------------------------------------------------------------

UNSPAWNABLE = {
    "nul-in-env-value": {"env": {"A": "x\u0000y"}},
    "nul-in-env-name": {"env": {"A\u0000": "x"}},
    "equals-in-env-name": {"env": {"A=B": "x"}},
    "empty-env-name": {"env": {"": "x"}},
    "nul-in-argument": {"argv": ["bash", "a\u0000b"]},
    "nul-in-program": {"argv": ["ba\u0000sh"]},
    "nul-in-cwd": {"cwd": "/tm\u0000p"},
    "nul-in-exec-argument": {"type": "exec", "argv": ["/bin/echo", "\u0000"]},
}


@pytest.mark.parametrize("params", list(UNSPAWNABLE.values()), ids=list(UNSPAWNABLE))
def test_strings_no_system_call_takes_are_refused_without_a_leak(
    module_daemon: Daemon, own: OwnSession, params: dict[str, Any]
) -> None:
    pid = daemon_pid(module_daemon)
    before = footprint(pid).fds
    sessions = own.rpc.call("daemon_info")["sessions"]
    for _ in range(3):
        with pytest.raises(RpcError) as err:
            own.rpc.call("terminal_open", token=own.token, **params)
        assert err.value.kind in ("invalid_params", "spawn_failed"), err.value
    assert own.rpc.call("daemon_info")["sessions"] == sessions
    assert settled_fds(pid, before) <= before, "the daemon leaked fds on a refused open"
