"""Frames at and over the size limit: a frame of ``max_frame_bytes`` is served, one byte more is refused with
``frame_too_large`` while the connection lives on, and a line that never ends costs the daemon at most the limit.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import Daemon, Rpc, stress

from .probes import answers_to, assert_response, daemon_pid, footprint, fuzzing, kept_connection, settled_fds

pytestmark = pytest.mark.usefixtures("unharmed")

LIMIT = 4096
DAEMON_CONFIG = f"max_frame_bytes = {LIMIT}\n"
FAST = fuzzing(150)
# --stress=ci (.ci/run's bounded slow tier) runs the long fuzzer within the default 120 s; at full length
# (make stress) it takes minutes on 2 cores, so it carries a bound of its own.
SLOW = fuzzing(stress(10_000, ci=1_000))
SLOW_TIMEOUT = pytest.mark.timeout(stress(600, ci=120))


def padded(size: int, request_id: int = 1) -> bytes:
    """A valid daemon_info request of exactly ``size`` bytes (JSON allows the padding whitespace)."""
    core = b'{"jsonrpc":"2.0","id":%d,"method":"daemon_info"}' % request_id
    assert size >= len(core)
    return core + b" " * (size - len(core))


@pytest.fixture(scope="module")
def wire(module_daemon: Daemon) -> Iterator[Rpc]:
    with kept_connection(module_daemon) as rpc:
        yield rpc


def assert_too_large(reply: dict[str, object], limit: int = LIMIT) -> None:
    assert_response(reply)
    assert reply["id"] is None
    assert reply["error"] == {
        "code": -32600,
        "message": "Invalid request",
        "data": {"kind": "frame_too_large", "limit": limit},
    }


def test_a_frame_of_exactly_the_limit_is_served_and_one_byte_more_is_refused(wire: Rpc) -> None:
    [served] = answers_to(wire, padded(LIMIT), 1)
    assert served["id"] == 1
    assert "result" in served
    [refused] = answers_to(wire, padded(LIMIT + 1), 1)
    assert_too_large(refused)


def check_split_frame(wire: Rpc, size: int, cuts: list[int]) -> None:
    frame = padded(size)
    points = sorted({min(c, size) for c in cuts})
    pieces = [frame[a:b] for a, b in zip([0, *points], [*points, size], strict=True)]
    for piece in pieces[:-1]:
        wire.send_raw(piece)
    [reply] = answers_to(wire, pieces[-1], 1)
    if size <= LIMIT:
        assert reply["id"] == 1
        assert "result" in reply
    else:
        assert_too_large(reply)


sizes = st.integers(min_value=LIMIT - 3, max_value=LIMIT + 3) | st.integers(min_value=60, max_value=5 * LIMIT)
cut_lists = st.lists(st.integers(min_value=0, max_value=5 * LIMIT), max_size=8)


@FAST
@given(sizes, cut_lists)
def test_frames_around_the_limit_in_any_pieces(wire: Rpc, size: int, cuts: list[int]) -> None:
    check_split_frame(wire, size, cuts)


@pytest.mark.slow
@SLOW_TIMEOUT
@SLOW
@given(sizes, cut_lists)
def test_frames_around_the_limit_in_any_pieces_long(wire: Rpc, size: int, cuts: list[int]) -> None:
    check_split_frame(wire, size, cuts)


def test_an_oversized_frame_between_good_ones_costs_only_itself(wire: Rpc) -> None:
    wire.send_raw(padded(100, 1) + b"\n" + b"x" * (3 * LIMIT) + b"\n" + padded(LIMIT, 2) + b"\n")
    replies = [json.loads(wire.recv_line()) for _ in range(3)]
    assert sorted(r["id"] for r in replies if "result" in r) == [1, 2]
    [refused] = [r for r in replies if "error" in r]
    assert_too_large(refused)


def test_a_line_that_never_ends_is_refused_once_and_not_buffered(module_daemon: Daemon) -> None:
    """The jamulus case: 64 MiB without a newline costs no more memory than one frame."""
    pid = daemon_pid(module_daemon)
    before = footprint(pid).rss_kib
    with Rpc(module_daemon.socket) as rpc:
        chunk = b"a" * (1 << 20)
        for _ in range(64):
            rpc.send_raw(chunk)
        assert_too_large(json.loads(rpc.recv_line()))  # answered before the line ends
        grown = footprint(pid).rss_kib - before
        rpc.send_raw(b"\n" + padded(200, 9) + b"\n")
        reply = json.loads(rpc.recv_line())
        assert reply["id"] == 9, reply  # one refusal for the whole line, then service as usual
    assert grown < 8 * 1024, f"the daemon grew {grown} KiB while a line of 64 MiB streamed in"


def test_the_default_limit_is_4_mib(fresh_daemon: Daemon) -> None:
    fresh_daemon.start()
    pid = daemon_pid(fresh_daemon)
    before = footprint(pid).rss_kib
    limit = 4 * 1024 * 1024
    with Rpc(fresh_daemon.socket) as rpc:
        # A thread writes: the refusal is sent while the frame is still streaming in.
        writer = threading.Thread(target=rpc.send_raw, args=(padded(limit) + b"\n" + padded(limit + 1, 2) + b"\n",))
        writer.start()
        replies = [json.loads(rpc.recv_line()) for _ in range(2)]
        writer.join()
    [served] = [r for r in replies if "result" in r]
    assert served["id"] == 1
    [refused] = [r for r in replies if "error" in r]
    assert_too_large(refused, limit)
    grown = footprint(pid).rss_kib - before
    assert grown < 48 * 1024, f"two 4 MiB frames cost the daemon {grown} KiB"


def test_a_client_that_disconnects_mid_frame_leaves_nothing(module_daemon: Daemon) -> None:
    pid = daemon_pid(module_daemon)
    before = footprint(pid)
    for size in (1, LIMIT - 1, LIMIT, LIMIT + 1, 10 * LIMIT):
        sock = socket.socket(socket.AF_UNIX)
        sock.connect(str(module_daemon.socket))
        sock.sendall(padded(max(size, 60))[:size])
        sock.close()
    with Rpc(module_daemon.socket) as rpc:
        assert rpc.call("daemon_info")["pid"] == pid
    assert settled_fds(pid, before.fds) <= before.fds
