"""A session's recording as the event loop sees it: each call queues one event for the writer thread and returns.

The session calls ``output`` at its read point (after the shell-integration filter, so the signed marks never
reach a file), ``input`` at its write point and ``resize``; a session that records nothing holds ``NO_RECORDING``,
whose calls do nothing. Input written while a password prompt waits is recorded as ``[secret]``, never as typed.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import final

from ptyd import protocol as p
from ptyd.backends.recording.writer import EventKind, FileState, Header, RecordingWriter, part_path, parts

SECRET_MARK = b"[secret]"
FINISH_WAIT_S = 5.0  # a stop waits this long at most for the writer to complete the file


class NoRecording:
    """What a session that is not recorded holds: every call is free."""

    active = False
    path: Path | None = None

    def output(self, data: bytes) -> bytes:
        return data

    def input(self, data: bytes, secret: Callable[[], bool]) -> None:
        pass

    def resize(self, cols: int, rows: int) -> None:
        pass

    def close(self) -> None:
        pass

    def hide(self, secret: bytes) -> None:
        """Never write ``secret`` (the session's shell-integration key): it is replaced wherever it appears."""

    async def finished(self) -> None:
        """Wait (bounded) until the file is complete on disk after ``close``."""


NO_RECORDING = NoRecording()


@final
class Recording(NoRecording):
    active = True

    def __init__(self, writer: RecordingWriter, prefix: Path, header: Header, max_bytes: int, keep: int) -> None:
        self._writer = writer
        existing = parts(prefix)
        self._first = (existing[-1][0] if existing else 0) + 1  # a session's parts go on counting
        self._state = FileState(prefix=prefix, header=header, max_bytes=max_bytes, keep=keep, part=self._first - 1)
        self._dropped = 0  # events lost to a full queue since the last marker
        self.started_at_ms = int(time.time() * 1000)
        self.closed = False
        self._submit("rotate", b"")  # opens the first part now, so its header time is the start

    @property
    def path(self) -> Path | None:  # type: ignore[override]
        """The part being written (as far as the loop knows: the writer may have moved on to the next one)."""
        return part_path(self._state.prefix, max(self._state.part, self._first))

    @property
    def session_id(self) -> str:
        return self._state.header.session_id

    def describe(self) -> p.RecordingInfo:
        """The part being written as a listing shows it (before the writer made its file)."""
        h = self._state.header
        return p.RecordingInfo(
            session_id=h.session_id,
            part=max(self._state.part, self._first),
            path=str(self.path),
            bytes=0,
            started_at_ms=self.started_at_ms // 1000 * 1000,  # as the header has it: whole seconds
            cols=h.cols,
            rows=h.rows,
            title=h.title,
            active=True,
        )

    def _submit(self, kind: EventKind, data: bytes) -> None:
        if self.closed:
            return
        now = time.monotonic()
        if self._dropped:
            marker = f"ptyd: {self._dropped} events dropped (the recording queue was full)".encode()
            if not self._writer.submit(self._state, "m", now, marker):
                if kind in ("rotate", "end"):  # never refused while the writer runs
                    self._writer.submit(self._state, kind, now, data)
                else:
                    self._dropped += 1
                return
            self._dropped = 0
        if not self._writer.submit(self._state, kind, now, data):
            self._dropped += 1

    def output(self, data: bytes) -> bytes:
        if data:
            self._submit("o", data)
        return data

    def input(self, data: bytes, secret: Callable[[], bool]) -> None:
        if data:
            self._submit("i", SECRET_MARK if secret() else data)

    def resize(self, cols: int, rows: int) -> None:
        self._submit("r", f"{cols}x{rows}".encode())

    def hide(self, secret: bytes) -> None:
        self._state.secret = secret

    def close(self) -> None:
        if not self.closed:
            self._submit("end", b"")
            self.closed = True

    async def finished(self) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(FINISH_WAIT_S):
                await self._state.ended.wait()
