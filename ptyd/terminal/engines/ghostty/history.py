"""Ghostty's history, seen from the engine that copies rows out of it: how many rows it surely keeps at a size,
how many rows a write can scroll into it, and the C calls that take points by value (tracked references).
"""

from __future__ import annotations

from itertools import repeat
from operator import floordiv
from typing import Any

import pyghostty
from pyghostty import ffi, lib
from pyghostty.core import union_fn

# Ghostty's history is bounded by its byte bound, Ghostty's default (one page, ~400 KiB) unless a page holds too
# few rows at that size: more pages would let writes be cut less finely but cost their memory in every flooding
# session. Its line bound is not the one that binds.
HISTORY_LINES = 1 << 20
_HISTORY: dict[tuple[int, int], tuple[int, int]] = {}  # (cols, rows) -> (byte bound, rows surely kept)
_DROPS = 3  # page drops watched while measuring the floor
_STEP = 8  # rows scrolled at a time while measuring it
_MIN_HISTORY_SCREENS = 2  # the history must hold a scroll-up of a screenful (SU, a shrinking resize) and more
# Every byte but those of IND (ESC D) and NEL (ESC E), and CSI's bracket (so "\x1b[0mDone" cannot look like IND).
_NOT_IND_NEL = bytes(set(range(256)) - set(b"\x1b[DE"))
TRACK = union_fn(
    "ghostty_terminal_grid_ref_track", "GhosttyResult(*)(GhosttyTerminal, GhosttyPointS, GhosttyTrackedGridRef*)"
)
TRACK_SET = union_fn(
    "ghostty_tracked_grid_ref_set", "GhosttyResult(*)(GhosttyTrackedGridRef, GhosttyTerminal, GhosttyPointS)"
)
GRID_REF = union_fn("ghostty_terminal_grid_ref", "GhosttyResult(*)(GhosttyTerminal, GhosttyPointS, GhosttyGridRef*)")


def history_size(cols: int, rows: int) -> tuple[int, int]:
    """Ghostty's history byte bound at this size and the rows it then surely holds: the fewest it keeps just after
    it drops its oldest page, whatever the rows hold. Measured once per size with a scratch terminal, scrolling a
    few rows at a time past three drops (~2 ms; a drop within a step may have kept up to a step fewer). The bound
    starts at Ghostty's default (one page) and doubles until the history holds a few screenfuls (one page holds
    56 rows at 300x100)."""
    size = (cols, rows)
    cap = 0
    while size not in _HISTORY:
        scratch = pyghostty.Terminal(cols, rows, scrollback=HISTORY_LINES)
        if cap:
            set_size(scratch._t[0], lib.GHOSTTY_TERMINAL_OPT_SCROLLBACK_MAX_BYTES, cap)
        else:
            cap = int(scratch.get("scrollback_max_bytes", "size_t"))
        kept, drops, last = 1 << 30, 0, 0
        while drops < _DROPS:
            scratch.feed(b"x\r\n" * _STEP)
            held = int(scratch.get("scrollback_rows", "size_t"))
            if held < last:
                drops += 1
            if drops:
                kept = min(kept, held - _STEP + 1)
            last = held
        scratch.close()
        if kept >= _MIN_HISTORY_SCREENS * rows or cap >= 64 << 20:
            _HISTORY[size] = (cap, kept)
        cap = max(2 * cap, 2 << 20)
    return _HISTORY[size]


def max_scrolls(data: bytes, cols: int, room: int, *, printed: bool = False) -> int:
    """At most how many rows writing ``data`` (with no SU or REP in it) can push into the history, counted at C
    speed.

    A linefeed (LF, VT, FF, IND, NEL) scrolls one. A row wraps after ``cols`` printed cells (a cell takes at least
    a byte), or sooner once a control has moved the cursor right or kept its column (any escape sequence, TAB, a
    linefeed not after CR): at most one more wrap for each. Where that is over ``room``, it is told more finely:

    - ``printed``: output whose only escape sequences are SGR, written with no left and right margins set
      (coloured output: a progress bar, a compiler's diagnostics, whose every colour would count as a wrap, and be
      cut into writes of a few KiB): only printing moves the cursor right, a cell at most per byte, and CR takes it
      back to the first column, so a row wraps only where a run between two CRs is longer than a row. The first run
      begins where the cursor is, and the write may begin by completing a sequence the last one cut (a wrap or a
      scroll more);
    - otherwise IND and NEL are told from other escapes, and a linefeed after CR from a bare one (rare: the tty turns
      LF into CRLF)."""
    lf = data.count(b"\n")
    vertical = sum(data.count(control) for control in (b"\x0b", b"\x0c") if control in data)
    tabs = data.count(b"\t") if b"\t" in data else 0
    escapes = data.count(b"\x1b") if b"\x1b" in data else 0
    n = 2 * (lf + vertical) + len(data) // cols + 1 + tabs + escapes
    if n + escapes <= room:
        return n + escapes
    if printed and lf + vertical + tabs < room:  # (else splitting its many lines would be for nothing)
        runs = data.split(b"\r")
        wraps = len(runs[0]) // cols + 3
        if len(runs) > 1 and max(map(len, runs)) >= cols:
            wraps += sum(map(floordiv, map(len, runs[1:]), repeat(cols)))
        return min(n + escapes, lf + vertical + tabs + wraps)
    if escapes:  # each pass costs ~1 ms/MB
        marks = data.translate(None, _NOT_IND_NEL)  # ESC, [, D, E: "\x1bD" here is IND or a longer escape
        n += marks.count(b"\x1bD") + marks.count(b"\x1bE")
    if n > room and lf and n - lf <= room:
        n -= data.count(b"\r\n")
    return n


def set_size(handle: Any, option: int, value: int) -> None:
    lib.ghostty_terminal_set(handle, option, ffi.new("size_t*", value))
