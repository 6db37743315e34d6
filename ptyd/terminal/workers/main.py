"""An engine worker process: ``python -m ptyd.terminal.workers.main FD``, FD its end of a socketpair.

It renders what the daemon sends a slice of one session at a time (``inbox``), taking everything readable between
slices, and acknowledges each slice. It holds nothing the daemon cannot rebuild: when it dies, the daemon starts
another and replays each session from its last snapshot. It ends when the daemon's end closes.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import time

from ptyd.terminal.engines import native_available
from ptyd.terminal.workers import messages as m
from ptyd.terminal.workers.early import preload
from ptyd.terminal.workers.host import EngineHost
from ptyd.terminal.workers.inbox import Inbox
from ptyd.terminal.workers.memory import give_back

TAKE_BYTES = 8 << 20  # read at most before rendering again (the daemon's socket buffer holds 4 MiB)
# A session acknowledged at least this often while it renders: the daemon reads nothing while its backlog waits
# for acks, and a quiet PTY that long would look like a program gone idle (idle_ms).
ACK_INTERVAL_S = 0.05


def serve(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    native = native_available()
    if native:
        warm()
    # pyte too (~0.3 s, 1.5 s under load): a worker's first pyte session (a quarantine, a spare taking a dead
    # worker's sessions) would otherwise show no progress that long, which a short stall time takes for a hang.
    preload()
    host = EngineHost()
    sock.sendall(m.frame(m.Hello(pid=os.getpid(), native=native)))
    buffer = bytearray()
    inbox = Inbox()
    while True:
        if not inbox:  # nothing left to render: wait for the daemon
            if host.closed:  # what closed sessions held goes back first
                host.closed = 0
                give_back()
            sock.setblocking(True)
            data = sock.recv(1 << 20)
            if not data:
                return
            buffer += data
        _take_readable(sock, buffer)
        for body in m.frames(buffer):
            inbox.put(m.to_worker.decode(body))
        # One slice of one session, then whatever arrived meanwhile is taken before the next is chosen.
        snapshots: list[m.ToDaemon] = []
        due = time.monotonic() + ACK_INTERVAL_S
        for msg in inbox.take():
            snapshots.extend(host.handle(msg))
            if time.monotonic() >= due:  # a slow engine (pyte) acknowledges as it goes
                snapshots = _send(sock, host, snapshots)
                due = time.monotonic() + ACK_INTERVAL_S
        _send(sock, host, snapshots)


def _take_readable(sock: socket.socket, buffer: bytearray) -> None:
    """What the daemon sent that is readable now, without waiting (its end closed: the next wait sees that)."""
    sock.setblocking(False)
    while len(buffer) < TAKE_BYTES:
        try:
            data = sock.recv(1 << 20)
        except BlockingIOError:
            return
        if not data:
            return
        buffer += data


def warm() -> None:
    """Load what a process's first native terminal loads (the library and its declarations, ~0.3 s) and its
    first snapshot builds (~25 ms), before the hello: a new worker's first session, or the sessions a replaced
    one takes over, would otherwise wait that long for their first acknowledgement. A failure here is left to
    the real sessions to meet (and report)."""
    host = EngineHost()
    with contextlib.suppress(Exception):
        host.handle(m.Open(sid=0, engine="ghostty", cols=8, rows=2, end=0))
        host.handle(m.Feed(sid=0, end=1, data=b"\x1b[1mwarm\x1b[0m\r\n", more=False))
        host.finish()
        for snapshot in host.handle(m.Snap(sid=0)):
            if isinstance(snapshot, m.Snapshot):
                host.handle(m.Restore(sid=0, end=2, state=snapshot.state))
        host.finish()
    with contextlib.suppress(Exception):
        host.handle(m.Close(sid=0))


def _send(sock: socket.socket, host: EngineHost, snapshots: list[m.ToDaemon]) -> list[m.ToDaemon]:
    # Acks first: a snapshot the daemon waits on for a handover then finds every row before it delivered.
    out = host.finish() + snapshots
    if out:
        wire = bytearray()
        for msg in out:
            m.frame_into(msg, wire)
        sock.setblocking(True)
        sock.sendall(wire)
    return []


def main() -> None:
    # Ctrl-C in the daemon's terminal reaches its whole process group: the daemon decides, the worker follows
    # when its socket closes.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    sock = socket.socket(fileno=int(sys.argv[1]))
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the daemon is gone
        serve(sock)


if __name__ == "__main__":
    main()
