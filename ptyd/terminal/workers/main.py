"""An engine worker process: ``python -m ptyd.terminal.workers.main FD``, FD its end of a socketpair.

It renders what the daemon sends, one batch at a time: everything readable is taken, rendered, and acknowledged
once per session. It holds nothing the daemon cannot rebuild: when it dies, the daemon starts another and
replays each session from its last snapshot. It ends when the daemon's end closes.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import time
from collections.abc import Iterable

from ptyd.terminal.engines import native_available
from ptyd.terminal.workers import messages as m
from ptyd.terminal.workers.host import EngineHost

BATCH_BYTES = 512 << 10  # taken at most before rendering: what arrives meanwhile (a send's echo) waits that long
# ...and a session acknowledged at least this often within a batch: the daemon reads nothing while its backlog
# waits for acks, and a quiet PTY that long would look like a program gone idle (idle_ms).
ACK_INTERVAL_S = 0.05


def serve(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    native = native_available()
    if native:
        warm()
    host = EngineHost()
    sock.sendall(m.frame(m.Hello(pid=os.getpid(), native=native)))
    buffer = bytearray()
    while True:
        sock.setblocking(True)
        data = sock.recv(1 << 20)
        if not data:
            return
        buffer += data
        sock.setblocking(False)
        while len(buffer) < BATCH_BYTES:
            try:
                data = sock.recv(1 << 20)
            except BlockingIOError:
                break
            if not data:
                break
            buffer += data
        for group in by_session(m.to_worker.decode(body) for body in m.frames(buffer)):
            # Each session acknowledged as soon as its part is rendered, the smallest first: an interactive
            # session's few bytes do not wait behind the floods that share its worker.
            snapshots: list[m.ToDaemon] = []
            due = time.monotonic() + ACK_INTERVAL_S
            for msg in group:
                snapshots.extend(host.handle(msg))
                if time.monotonic() >= due:  # a slow engine (pyte) acknowledges as it goes
                    snapshots = _send(sock, host, snapshots)
                    due = time.monotonic() + ACK_INTERVAL_S
            _send(sock, host, snapshots)


def by_session(messages: Iterable[m.ToWorker]) -> list[list[m.ToWorker]]:
    """A batch's messages by session, each session's in order, the sessions with the fewest bytes first."""
    groups: dict[int, list[m.ToWorker]] = {}
    size: dict[int, int] = {}
    for msg in messages:
        groups.setdefault(msg.sid, []).append(msg)
        size[msg.sid] = size.get(msg.sid, 0) + (len(msg.data) if isinstance(msg, m.Feed) else 0)
    return [groups[sid] for sid in sorted(groups, key=size.__getitem__)]


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
