"""Answers to a session's first terminal queries, given by the daemon while the session's worker is not up yet.

A worker takes ~1 s to start (its interpreter, then the native library; 3 s under load), and programs that probe
the terminal as they start (DA1, a cursor report) give up after 100-500 ms. Until the session's worker said hello,
its output is also fed to a pyte terminal here, which only answers; each ``Feed`` it saw goes to the worker marked
``answered``, so the worker drops its own answers to that output (``host``): every query is answered once, by the
daemon before the hello, by the worker after. The session's screen and transcript are the worker's as always.

The terminal identifies as the session's engine does (DA1, DA2, XTVERSION: vim reads the version from DA2), so a
program sees one terminal before the hello and after. Other answers are pyte's, and a query pyte does not answer
(kitty's keyboard flags, the OSC 4 palette) goes unanswered then, as by a terminal without it: programs that
probe such a query follow it with DA1, whose answer tells them. Past ``EARLY_BYTES`` of output the daemon stops
rendering a session's output (pyte takes ~1 ms a KiB on the daemon's loop) and its worker answers, late, as it
did before.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import final

from ptyd.terminal.emulator import Terminal
from ptyd.terminal.engines import open_terminal

EARLY_BYTES = 64 * 1024  # a session's output answered here at most (~50 ms of pyte), then the worker's
# pyte's identity -> the native engine's (tests/test_cold_start.py checks them against libghostty-vt's own).
AS_GHOSTTY = {
    b"\x1b[?6c": b"\x1b[?62;22c",  # DA1
    b"\x1b[>1;10;0c": b"\x1b[>1;0;0c",  # DA2
    b"\x1bP>|ptyd(pyte)\x1b\\": b"\x1bP>|libghostty\x1b\\",  # XTVERSION
}


@final
class EarlyAnswers:
    def __init__(self, cols: int, rows: int, on_reply: Callable[[bytes], None], engine: str) -> None:
        self._on_reply = on_reply
        self._identity = AS_GHOSTTY if engine == "ghostty" else {}
        self._size = (cols, rows)
        # Opened at the first output: a session a handover brought is restored (its worker answers) before any.
        self._term: Terminal | None = None
        self._bytes = 0

    def _reply(self, data: bytes) -> None:
        self._on_reply(self._identity.get(data, data))

    def answer(self, data: bytes, *, more: bool) -> bool:
        """Render ``data`` for its queries' answers (written at once); False once past the bound (not rendered)."""
        self._bytes += len(data)
        if self._bytes > EARLY_BYTES:
            return False
        if self._term is None:
            cols, rows = self._size
            self._term = open_terminal(
                cols, rows, scrollback_lines=1, scrollback_bytes=1, on_reply=self._reply, emulator="pyte"
            )
        self._term.feed(data, more=more)
        self._term.process(float("inf"))
        return True

    def resize(self, cols: int, rows: int) -> None:
        self._size = (cols, rows)
        if self._term is not None:
            self._term.resize(cols, rows)

    def close(self) -> None:
        if self._term is not None:
            self._term.close()


def preload() -> None:
    """Load pyte now (~0.1 s), not at the first session's first output."""
    importlib.import_module("ptyd.terminal.engines.pyte.engine")
