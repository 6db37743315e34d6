"""Every fd the daemon got is closed or kept, on the paths that fail: a pipe that cannot be made after openpty
(EMFILE), and a keeper message whose fds and names do not pair up."""

from __future__ import annotations

import array
import errno
import os
import socket
from pathlib import Path

import pytest

from ptyd.backends.os import spawn
from ptyd.continuity.keeper_link import Keeper
from ptyd.errors import SpawnFailed


def open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def test_a_pipe_failing_after_openpty_leaks_neither_end(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_pipe() -> tuple[int, int]:
        raise OSError(errno.EMFILE, os.strerror(errno.EMFILE))  # what the last fds being taken looks like

    monkeypatch.setattr(spawn.os, "pipe", no_pipe)
    before = open_fds()
    with pytest.raises(SpawnFailed) as err:
        spawn.spawn(["/bin/true"], "/", {"PATH": "/usr/bin:/bin"}, 80, 24)
    assert err.value.data["reason"] == "EMFILE"
    assert open_fds() == before


def send_fds(sock: socket.socket, text: str, fds: list[int]) -> None:
    sock.sendmsg([text.encode()], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds).tobytes())])


def test_take_closes_fds_that_no_session_name_matches() -> None:
    daemon_side, keeper_side = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    mine = [os.open("/dev/null", os.O_RDONLY) for _ in range(3)]
    try:
        send_fds(keeper_side, "FDS pty-a", mine[:2])  # two fds, one name
        send_fds(keeper_side, "FDS pty-b pty-c", mine[2:])  # one fd, two names: pty-c was not kept
        keeper_side.send(b"END")
        before = open_fds()
        taken = Keeper(Path("/nonexistent"), 0, daemon_side).take()
        assert sorted(taken) == ["pty-a", "pty-b"]
        # The two taken are open (the daemon's now); the unmatched one was closed, not leaked.
        assert len(open_fds()) == len(before) + 2
        for fd in taken.values():
            os.fstat(fd)
        assert keeper_side.recv(64) == b"TAKE"
    finally:
        for fd in [*mine, *locals().get("taken", {}).values()]:
            os.close(fd)
        daemon_side.close()
        keeper_side.close()
