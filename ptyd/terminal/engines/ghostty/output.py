"""Output queued for Ghostty, split as it is queued: bytes to write, runs of plain lines (as text) to fast-forward,
and the sequences the engine acts on before Ghostty sees them (see the engine's docstring)."""

from __future__ import annotations

import re
from collections import deque
from typing import final

from ptyd.terminal import reports
from ptyd.terminal.plain import all_simple

# The sequences acted on before Ghostty sees them (see the engine's docstring; DECCOLM is ignored, as by pyte and
# by xterm unless told otherwise: it would resize the screen behind the PTY's back), and two written alone because
# a few bytes of them scroll many rows: SU (up to a screenful; any C0 inside it runs) and REP (up to 65535 cells).
# TBC with its parameter omitted (``CSI g``) is ignored by libghostty-vt (pyghostty 0.1.3; ``CSI 0 g`` and
# ``CSI ; g`` work): it is written as ``CSI 0 g``. Upstream report, input and expectation: after
# ``printf '\e[9G\e[g\r\tX'`` the X is in column 17 (the stop at 9 cleared, as xterm, VT100 and libvterm's
# t/21state_tabstops.test), Ghostty draws it in column 9 (tests/test_fidelity.py "TBC, parameter omitted").
# SU's and REP's parameters are scanned once, never backtracked through: every SGR of coloured output is tried
# against this (progress bar: 7.8 -> 6.3 ms/MB).
_SPECIAL = re.compile(
    rb"\x1b\[(?:[23]J|\?(?:1049|1047|47)h|\?3[hl]|!p|1[4689]t|\?6n|g|[0-9]*+(?:b|[^@-~\x1b]*+S))|\x1bc"
    rb"|\x1bP\+q" + reports.CAPABILITY_NAMES.encode() + rb"\x1b\\"  # the queries Ghostty leaves unanswered
)
# An escape sequence that may move the cursor: SGR never does (see ``Coloured``).
_NOT_SGR = re.compile(rb"\x1b(?!\[[0-9;:]*m)")
# A chunk ending in an escape sequence not yet finished holds it for the next chunk: it may be one of those.
_PARTIAL = re.compile(rb"\x1b(?:\[[ -?]*)?\Z")
_PARTIAL_MAX = 32  # a longer unfinished sequence is no special one
FAST_MIN_BYTES = 4096  # a shorter chunk of plain lines is not worth fast-forwarding
_PLAIN_PIECE = 32 * 1024  # plain lines fast-forwarded at once (~1 ms)


@final
class Coloured(bytes):
    """Output to write whose only escape sequences are SGR: what it can scroll is told from its CRs and linefeeds
    (``history.max_scrolls``), not from each colour as a possible wrap."""


@final
class OutputQueue:
    """``items``: output to write (bytes), plain output to fast-forward (str), and (sequence,) to act on."""

    def __init__(self) -> None:
        self.items: deque[bytes | str | tuple[bytes]] = deque()
        self._tail = b""  # a possible start of a special sequence, completed by the next chunk

    def put(self, data: bytes) -> int:
        """Queue ``data``; returns what it adds to the backlog (plain text counts in characters, the rest in
        bytes)."""
        if self._tail:
            data, self._tail = self._tail + data, b""
        esc = data.rfind(b"\x1b", max(0, len(data) - _PARTIAL_MAX))
        if esc >= 0 and _PARTIAL.match(data, esc):
            data, self._tail = data[:esc], data[esc:]
        added = len(data)
        # Plain lines are fast-forwarded: from the first line start (the read before may have cut a line, or a
        # character) to the last line end.
        first = data.find(b"\r\n") + 2
        cut = data.rfind(b"\r\n") + 2
        run = data[first:cut] if cut - first >= FAST_MIN_BYTES else b""
        # A bare CR or LF in the first line (a progress bar redrawn) rules the run out before it is copied or decoded.
        # CRLF text through a tty that adds a CR of its own (`cat` of a CRLF file) ends its lines in CR twice, which
        # moves to the line's start as once does.
        lf = run.find(b"\n")
        cr = run.find(b"\r")
        if len(run) >= FAST_MIN_BYTES and lf > 0 and (cr == lf - 1 or (cr == lf - 2 and run[cr + 1] == 13)):
            if b"\r\r\n" in run:
                run = run.replace(b"\r\r\n", b"\r\n")
            try:
                text = run.decode()
            except UnicodeDecodeError:
                text = ""
            if text and all_simple(text) is not None:
                added -= cut - first - len(text)  # plain text is counted in characters
                self._split(data[:first])
                start = 0
                while start < len(text):  # in pieces, so that the engine's process() keeps to its budget
                    end = text.find("\r\n", start + _PLAIN_PIECE)
                    end = len(text) if end < 0 else end + 2
                    self.items.append(text[start:end])
                    start = end
                data = data[cut:]
        self._split(data)
        return added

    def _split(self, data: bytes) -> None:
        """Queue output to write, with the sequences to act on split out."""
        pos = 0
        if b"\x1b" in data:
            if _NOT_SGR.search(data) is None:  # no special sequence either: found at half the cost of looking for one
                self.items.append(Coloured(data))
                return
            for m in _SPECIAL.finditer(data):
                if m.start() > pos:
                    self.items.append(data[pos : m.start()])
                self.items.append((m.group(),))
                pos = m.end()
        if pos < len(data):
            self.items.append(data[pos:] if pos else data)
