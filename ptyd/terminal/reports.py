"""Answers to the terminal queries neither engine answers itself, formatted once for both.

A program that asks and gets no answer waits out its own timeout (often 0.5-1 s) on every start, and ptyd's
readiness then waits with it: answering as xterm does is both faster and what the program expects.

- XTWINOPS size reports: ``CSI 18 t`` / ``CSI 19 t`` (text area / screen in cells), ``CSI 14 t`` (text area in
  pixels) and ``CSI 16 t`` (one cell in pixels). There are no pixels; a cell is said to be CELL_PX, the size the
  Ghostty engine is given.
- DECXCPR, ``CSI ? 6 n``: the cursor position with its page, ``CSI ? row ; col ; 1 R``.
- XTGETTCAP, ``DCS + q names ST``: no capability is known, ``DCS 0 + r names ST`` (a program then falls back on
  its terminfo entry, as it does under terminals without the query).
"""

from __future__ import annotations

import re

CELL_PX = (8, 16)  # width, height
SIZE_QUERIES = (14, 16, 18, 19)
CAPABILITY_NAMES = "[0-9A-Fa-f;]{0,256}"  # XTGETTCAP's, hex-encoded: only these are echoed in the answer (input)

# Output ending in a terminal query: DSR, DA, the size reports (CSI 11-21 t), kitty's keyboard flags, DECRQM,
# XTVERSION, an OSC colour or clipboard query, DECRQSS or XTGETTCAP.
_QUERY_AT_END = re.compile(
    rb"(?:\x1b\[(?:[?>=]?[0-9;]*[cn]|(?:1[1-9]|2[01])t|\?u|\??[0-9;]+\$p|>0?q)"
    rb"|\x1b\][0-9;a-z]*;\?(?:\x07|\x1b\\)|\x1bP[$+]q[^\x1b]*\x1b\\)\Z"
)


def ends_in_query(output: bytes) -> bool:
    """``output`` (its last bytes) ends in a query, which the program may now be waiting to have answered."""
    return _QUERY_AT_END.search(output) is not None


def size_report(code: int, cols: int, rows: int) -> str:
    width, height = CELL_PX
    if code == 14:
        return f"\x1b[4;{rows * height};{cols * width}t"
    if code == 16:
        return f"\x1b[6;{height};{width}t"
    return f"\x1b[{code - 10};{rows};{cols}t"  # 18 -> 8, 19 -> 9


def cursor_report(row: int, col: int) -> str:
    """DECXCPR for a 1-based row and column."""
    return f"\x1b[?{row};{col};1R"


def capabilities_report(names: str) -> str:
    return f"\x1bP0+r{names}\x1b\\"


# DECSTR (soft reset, ``ESC[!p``, part of ``reset``, which Ghostty ignores) as the sequences both engines know: no
# scroll region, replace mode, autowrap, cursor shown, default rendition, ASCII. The cursor stays where it is.
SOFT_RESET = "\x1b[r\x1b[4l\x1b[?7h\x1b[?25h\x1b[m\x1b(B"
