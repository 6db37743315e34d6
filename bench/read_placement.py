"""Where a session's PTY is best read, measured on the bare pipeline: ``python -m bench.read_placement FILE|seq:K
[--reps 3] [--modes raw,split,worker,worker-thread]``.

Issue 29's first design item has the engine worker read the PTY itself, so that output never crosses the daemon.
This asks what that buys before building it, with nothing of ptyd but its engine host and its messages: a program
(``cat FILE``, or ``seq 1 K``, which writes a line at a time) on a PTY of 160x40, and

- ``raw``: one process reads the PTY and drops what it reads (the floor every figure is a ratio to);
- ``split``: today's shape. One process reads the PTY and frames each wake-up's reads to a worker over a socket
  pair; the worker renders (``EngineHost``, the native engine) and acknowledges; the reader takes the acks (their
  scrolled rows) as the daemon does;
- ``worker``: the design item's shape. The worker reads the PTY between its renders and sends only the acks;
- ``worker-thread``: as ``worker``, with the PTY read by a thread of the worker's (the render thread holds the GIL
  only between the engine's calls).

Modes alternate, each run a fresh program; every run prints MB/s, and the last line the medians as ratios to
``raw``. The worker acknowledges when nothing more is waiting, and every ``ACK_S`` while output keeps coming.
"""

from __future__ import annotations

import argparse
import collections
import fcntl
import os
import select
import socket
import statistics
import struct
import termios
import threading
import time
from collections.abc import Callable
from pathlib import Path

from ptyd.terminal.workers import messages as m
from ptyd.terminal.workers.host import EngineHost
from ptyd.terminal.workers.main import warm

COLS, ROWS = 160, 40
ACK_S = 0.005
READS_PER_WAKEUP = 4  # as the daemon's channel
DONE = m.Hello(pid=0, native=True)  # after the worker's last ack, in the ``worker`` modes: it saw the PTY's end
MODES = ("raw", "split", "worker", "worker-thread")


def spawn(program: list[str]) -> tuple[int, int]:
    pid, master = os.forkpty()
    if pid == 0:
        os.execvp(program[0], program)
    fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
    os.set_blocking(master, False)
    return pid, master


def read_burst(fd: int) -> tuple[list[bytes], bool]:
    """What one wake-up reads (as the daemon's channel does), and whether the PTY has no writer left."""
    reads: list[bytes] = []
    for _ in range(READS_PER_WAKEUP):
        try:
            data = os.read(fd, 65536)
        except BlockingIOError:
            return reads, False
        except OSError:  # EIO: the program and every other holder of the slave are gone
            return reads, True
        if not data:
            return reads, True
        reads.append(data)
    return reads, False


class Renderer:
    """The worker's side: an engine host for one session, fed and acknowledged."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.host = EngineHost()
        self.host.handle(m.Open(sid=1, engine="ghostty", cols=COLS, rows=ROWS, end=0))
        self.end = 0
        self.acked_at = 0.0

    def feed(self, data: bytes, *, last: bool = False) -> None:
        self.end += len(data) + last
        self.host.handle(m.Feed(sid=1, end=self.end, data=data, more=not last, flush=last))

    def ack(self, *, waiting: bool, last: bool = False) -> None:
        now = time.monotonic()
        if waiting and not last and now - self.acked_at < ACK_S:
            return
        self.acked_at = now
        wire = bytearray()
        for msg in self.host.finish() + ([DONE] if last else []):
            m.frame_into(msg, wire)
        self.sock.sendall(wire)


def serve_feeds(sock: socket.socket) -> None:
    """``split``'s worker: render what the reader sends."""
    renderer, buffer = Renderer(sock), bytearray()
    while data := sock.recv(1 << 20):
        buffer += data
        for body in m.frames(buffer):
            msg = m.to_worker.decode(body)
            assert isinstance(msg, m.Feed)
            renderer.host.handle(msg)
            renderer.end = msg.end
        renderer.ack(waiting=bool(select.select([sock], [], [], 0)[0]))


def serve_pty(sock: socket.socket, master: int) -> None:
    """``worker``: read the PTY between renders."""
    renderer = Renderer(sock)
    while True:
        select.select([master], [], [])
        reads, ended = read_burst(master)
        for data in reads:
            renderer.feed(data)
        if ended:
            renderer.feed(b"", last=True)
            renderer.ack(waiting=False, last=True)
            return
        renderer.ack(waiting=bool(select.select([master], [], [], 0)[0]))


def serve_pty_threaded(sock: socket.socket, master: int) -> None:
    """``worker-thread``: a thread reads the PTY (blocking) into a queue; the main thread renders what is queued."""
    renderer, queue = Renderer(sock), collections.deque[bytes]()
    wake_r, wake_w = os.pipe()

    def read() -> None:
        os.set_blocking(master, True)
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:
                data = b""
            was_empty = not queue
            queue.append(data)
            if was_empty:
                os.write(wake_w, b".")
            if not data:
                return

    threading.Thread(target=read, daemon=True).start()
    while True:
        os.read(wake_r, 4096)
        while queue:
            data = queue.popleft()
            if not data:
                renderer.feed(b"", last=True)
                renderer.ack(waiting=False, last=True)
                return
            renderer.feed(data)
        renderer.ack(waiting=bool(queue))


def run(mode: str, program: list[str]) -> tuple[float, int]:
    """Seconds from the program's start until the last of its output is rendered and acknowledged; and how many
    rows scrolled off (a check that every mode rendered the same output)."""
    pid, master = spawn(program)
    start = time.perf_counter()
    rows = 0
    if mode == "raw":
        while True:
            select.select([master], [], [])
            if read_burst(master)[1]:
                break
    else:
        rows = _pipeline(mode, master)
    elapsed = time.perf_counter() - start
    os.close(master)
    os.waitpid(pid, 0)
    return elapsed, rows


def _pipeline(mode: str, master: int) -> int:
    ours, theirs = socket.socketpair()
    for sock in (ours, theirs):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    serve: dict[str, Callable[[], None]] = {
        "split": lambda: serve_feeds(theirs),
        "worker": lambda: serve_pty(theirs, master),
        "worker-thread": lambda: serve_pty_threaded(theirs, master),
    }
    worker = os.fork()
    if worker == 0:
        ours.close()
        try:
            serve[mode]()
        finally:
            os._exit(0)
    theirs.close()
    reading = mode == "split"
    sent = acked = rows = 0
    buffer = bytearray()
    done = False
    while not done:
        ready = select.select([ours.fileno(), master] if reading else [ours.fileno()], [], [])[0]
        if reading and master in ready:
            reads, ended = read_burst(master)
            wire = bytearray()
            for data in reads:
                sent += len(data)
                m.frame_into(m.Feed(sid=1, end=sent, data=data, more=True), wire)
            if ended:
                sent += 1
                m.frame_into(m.Feed(sid=1, end=sent, data=b"", more=False, flush=True), wire)
                reading = False
            ours.sendall(wire)
        if ours.fileno() in ready:
            data = ours.recv(1 << 20)
            if not data:
                break
            buffer += data
            for body in m.frames(buffer):
                ack = m.to_daemon.decode(body)
                if isinstance(ack, m.Hello):
                    done = True
                    continue
                assert isinstance(ack, m.Ack)
                acked = ack.end
                rows += sum(b if isinstance(b, int) else len(m.scrolled_rows(b)) for b in ack.scrolled)
            done = done or (mode == "split" and not reading and acked >= sent)
    ours.close()
    os.waitpid(worker, 0)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.read_placement", description=__doc__.splitlines()[0])
    parser.add_argument("source", help="a file to cat, or seq:K")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--modes", default=",".join(MODES))
    args = parser.parse_args()
    modes = args.modes.split(",")
    if args.source.startswith("seq:"):
        count = int(args.source.removeprefix("seq:"))
        program = ["seq", "1", str(count)]
        size = sum(len(str(i)) + 1 for i in range(1, count + 1))
    else:
        program, size = ["cat", args.source], Path(args.source).stat().st_size
    warm()  # what a worker loads before its hello: forked workers start with it
    rates: dict[str, list[float]] = {mode: [] for mode in modes}
    for _ in range(args.reps):
        for mode in modes:
            elapsed, rows = run(mode, program)
            rates[mode].append(size / 1e6 / elapsed)
            print(f"{mode:14} {rates[mode][-1]:6.1f} MB/s  {rows} rows scrolled", flush=True)
    floor = statistics.median(rates["raw"]) if "raw" in rates else None
    print(
        "medians: "
        + ", ".join(
            f"{mode} {statistics.median(r):.1f} MB/s" + (f" ({statistics.median(r) / floor:.2f}x raw)" if floor else "")
            for mode, r in rates.items()
        )
    )


if __name__ == "__main__":
    main()
