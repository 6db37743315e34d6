"""The recordings' writer thread: asciicast v2 files written off the event loop.

The loop only appends (recording, kind, time, bytes) to a queue bounded in bytes; one thread for every session's
recording decodes the output as UTF-8 (incrementally, so a character split across two reads stays whole), encodes
each event as a JSON line, rotates a file past its size bound and deletes the oldest parts past the count kept.
A full queue never blocks the loop: the event is dropped and counted, and a marker event says so in the file.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import logging
import os
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, final

import msgspec

log = logging.getLogger("ptyd.recording")

EventKind = Literal["o", "i", "r", "m", "rotate", "end"]
_encode = msgspec.json.Encoder().encode
# The thread takes what queued up over this long in one go: each wake-up takes the GIL from the event loop, and
# a wake-up per read of a flood would hand it back and forth thousands of times a second.
BATCH_S = 0.025
REDACTED = b"[ptyd key]"


@dataclass(slots=True)
class Header:
    """What the first line of every part says (asciicast v2)."""

    cols: int
    rows: int
    title: str
    env: dict[str, str]
    session_id: str


@final
class Ended:
    """That a recording's file is complete and closed: set by the writer thread, awaited on the event loop.

    Awaited without a thread of the daemon's few for blocking work (``ptyd.daemon.blocking``) sitting in a wait
    for a disk that may stall.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._set = False
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    def is_set(self) -> bool:
        return self._set

    def set(self) -> None:
        with self._lock:
            self._set = True
            waiters, self._waiters = self._waiters, []
        for loop, waiter in waiters:
            with contextlib.suppress(RuntimeError):  # that loop is closed: nobody waits any more
                loop.call_soon_threadsafe(_resolve, waiter)

    async def wait(self) -> None:
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        with self._lock:
            if self._set:
                return
            self._waiters.append((loop, waiter))
        await waiter


def _resolve(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


@dataclass(slots=True)
class FileState:
    """A recording's open part; touched by the writer thread only."""

    prefix: Path  # <dir>/<session id>: parts are <prefix>.<n>.cast
    header: Header
    max_bytes: int
    keep: int
    part: int = 0
    fd: int = -1
    written: int = 0
    t0: float = 0.0  # monotonic time of the part's start
    buffer: bytearray = field(default_factory=bytearray)
    decoder: Any = None
    ended: Ended = field(default_factory=lambda: Ended())  # the file is complete and closed
    secret: bytes = b""  # never written: the session's shell-integration key (terminal_integrate types it)
    carry: bytes = b""  # output held back: it may be the start of the secret, cut by a read


def _redact(state: FileState, data: bytes) -> bytes:
    """``data`` with the secret replaced, less a tail that may be its start (kept for the next chunk)."""
    secret = state.secret
    if not secret:
        return data
    data = (state.carry + data).replace(secret, REDACTED)
    for keep in range(min(len(secret) - 1, len(data)), 0, -1):
        if data.endswith(secret[:keep]):
            state.carry = data[-keep:]
            return data[:-keep]
    state.carry = b""
    return data


def part_path(prefix: Path, part: int) -> Path:
    return prefix.with_name(f"{prefix.name}.{part:04d}.cast")


def parts(prefix: Path) -> list[tuple[int, Path]]:
    """The parts of ``prefix`` on disk, oldest first."""
    found = []
    for path in prefix.parent.glob(f"{prefix.name}.*.cast"):
        number = path.name[len(prefix.name) + 1 : -len(".cast")]
        if number.isdigit():
            found.append((int(number), path))
    return sorted(found)


@final
class RecordingWriter:
    """One thread writing every recording's events, fed through a queue bounded by ``max_pending`` bytes."""

    def __init__(self, max_pending: int) -> None:
        self.max_pending = max_pending
        self._cond = threading.Condition()
        self._queue: deque[tuple[FileState, EventKind, float, bytes]] = deque()
        self._pending = 0
        self._thread: threading.Thread | None = None
        self._closing = False
        self.dropped = 0  # events dropped on a full queue since start (all recordings)

    @property
    def pending(self) -> int:
        """Bytes queued, not yet taken by the thread."""
        return self._pending

    def submit(self, state: FileState, kind: EventKind, when: float, data: bytes) -> bool:
        """Queue one event; False (dropped) when the queue is full. Called on the event loop: never blocks on I/O."""
        size = len(data) + 64
        with self._cond:
            if self._closing:
                return False
            if self._pending + size > self.max_pending and kind not in ("rotate", "end"):
                self.dropped += 1
                return False
            self._queue.append((state, kind, when, data))
            self._pending += size
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="ptyd recordings", daemon=True)
                self._thread.start()
            if len(self._queue) == 1:  # the thread waits only on an empty queue
                self._cond.notify()
        return True

    def close(self, timeout: float = 5.0) -> None:
        """Write what is queued, close every file and end the thread (bounded by ``timeout``)."""
        with self._cond:
            self._closing = True
            self._cond.notify()
            thread = self._thread
        if thread is not None:
            thread.join(timeout)

    # --- the thread ------------------------------------------------------------------------------------

    def _run(self) -> None:
        live: dict[int, FileState] = {}  # recordings with a file open
        while True:
            with self._cond:
                while not self._queue and not self._closing:
                    self._cond.wait()
            if not self._closing:
                time.sleep(BATCH_S)  # the batching window (GIL released), not a wait for a condition
            with self._cond:
                batch = list(self._queue)
                self._queue.clear()
                self._pending = 0
                closing = self._closing and not batch
            for state, kind, when, data in batch:
                try:
                    self._event(state, kind, when, data)
                except OSError as exc:
                    log.error("recording %s: %s; this recording stops", state.prefix.name, exc.strerror)
                    with contextlib.suppress(OSError):
                        self._close_file(state)
                    state.keep = 0
                if state.fd >= 0:
                    live[id(state)] = state
                else:
                    live.pop(id(state), None)
            for state in list(live.values()):
                try:
                    if closing:
                        self._end(state)
                    else:
                        self._flush(state)
                except OSError as exc:
                    log.error("recording %s: %s", state.prefix.name, exc.strerror)
            if closing:
                return

    def _event(self, state: FileState, kind: EventKind, when: float, data: bytes) -> None:
        if state.keep <= 0:  # a write failed earlier: nothing more for this recording
            if kind == "end":
                state.ended.set()
            return
        if kind == "end":
            self._end(state)
            return
        if state.fd < 0 or kind == "rotate" or state.written >= state.max_bytes:
            self._rotate(state, when)
            if kind == "rotate":
                return
        t = round(max(0.0, when - state.t0), 6)
        if kind == "o":
            text = state.decoder.decode(_redact(state, data))
            if not text:
                return
        elif kind == "r":
            cols, _, rows = data.decode().partition("x")
            state.header.cols, state.header.rows = int(cols), int(rows)
            text = data.decode()
        elif kind == "m":
            state.decoder = codecs.getincrementaldecoder("utf-8")("replace")  # output was lost: a fresh start
            text = data.decode(errors="replace")
        else:  # "i"
            text = (data.replace(state.secret, REDACTED) if state.secret else data).decode(errors="replace")
        self._line(state, _encode([t, kind, text]))

    def _line(self, state: FileState, line: bytes) -> None:
        state.buffer += line
        state.buffer += b"\n"
        state.written += len(line) + 1
        if len(state.buffer) >= 65536:
            self._flush(state)

    def _flush(self, state: FileState) -> None:
        while state.buffer and state.fd >= 0:
            n = os.write(state.fd, state.buffer)
            del state.buffer[:n]

    def _rotate(self, state: FileState, when: float) -> None:
        self._close_file(state)  # a character split at the cut stays in the decoder: it goes to the next part
        existing = parts(state.prefix)
        state.part = max(state.part, existing[-1][0] if existing else 0) + 1
        path = part_path(state.prefix, state.part)
        state.prefix.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        state.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        state.t0 = when
        state.written = 0
        if state.decoder is None:
            state.decoder = codecs.getincrementaldecoder("utf-8")("replace")
        h = state.header
        header = {
            "version": 2,
            "width": h.cols,
            "height": h.rows,
            "timestamp": int(time.time() - (time.monotonic() - when)),
            "title": h.title,
            "env": h.env,
        }
        self._line(state, _encode(header))
        for _, old in parts(state.prefix)[: -state.keep]:
            with contextlib.suppress(FileNotFoundError):
                old.unlink()

    def _end(self, state: FileState) -> None:
        try:
            if state.fd >= 0 and state.decoder is not None:
                tail = state.decoder.decode(state.carry, final=True)
                state.carry = b""
                if tail:
                    self._line(state, _encode([round(time.monotonic() - state.t0, 6), "o", tail]))
            self._close_file(state)
        finally:
            state.keep = 0
            state.ended.set()

    def _close_file(self, state: FileState) -> None:
        if state.fd < 0:
            return
        try:
            self._flush(state)
        finally:
            os.close(state.fd)
            state.fd = -1
            state.buffer.clear()
