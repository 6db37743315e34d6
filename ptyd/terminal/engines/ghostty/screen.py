"""Ghostty's grid read out: rows as text, which rows soft-wrapped, the title, and the active screen as the daemon
reads it (``GhosttyScreen``, built once per change)."""

from __future__ import annotations

import re
from itertools import compress, repeat
from operator import ge
from typing import Any, Protocol, final

from pyghostty import ffi, lib
from pyghostty._ffi import check
from pyghostty.core import init_sized

from ptyd.terminal.engines.ghostty.history import GRID_REF

WRAP_SLACK = 16  # trailing blanks a soft-wrapped row may end in and still be found wrapped (see Grid.wraps)
# Characters outside these ranges may take two cells (CJK, emoji, a VS16 after a symbol): a row of these alone is
# as wide as it is long, so a progress bar of braille and box drawing is not asked of Ghostty row by row at each
# acknowledgement (10% of a worker rendering one).
_MAYBE_WIDE = re.compile(
    "[^ -~\u00a1-\u024f\u0391-\u03c9\u0400-\u04ff\u2010-\u2027\u2030-\u205e\u2190-\u22ff\u2500-\u25fc\u2800-\u28ff]"
)


@final
class Grid:
    """The rows of one Ghostty terminal, read by its formatter and its row flags; the C calls' scratch is kept."""

    def __init__(self, handle: Any) -> None:
        self._handle = handle
        self._fmt = init_sized("GhosttyTerminalSelectionFormatOptions")
        self._fmt.emit = lib.GHOSTTY_FORMATTER_FORMAT_PLAIN
        self._fmt.unwrap, self._fmt.trim = False, True
        self._sel = init_sized("GhosttySelection")
        self._fmt.selection = self._sel
        self._ref = init_sized("GhosttyGridRef")
        self._point = ffi.new("GhosttyPointS*")
        self._buf = ffi.new("uint8_t[]", 64 * 1024)
        self._written = ffi.new("size_t*")
        self._row = ffi.new("GhosttyRow*")
        self._wrap = ffi.new("bool*")
        # pyghostty's own getters allocate each time: a screen read once per acknowledged write adds up.
        self._u16 = ffi.new("uint16_t*")
        self._bool = ffi.new("bool*")
        self._mode = ffi.new("GhosttyTerminalModeConfig*")
        self._title = ffi.new("GhosttyString*")

    def rows(self, tag: int, start: int, end: int, cols: int) -> list[str]:
        """Rows ``[start, end)`` of the active screen (``GHOSTTY_POINT_TAG_ACTIVE``) or of Ghostty's history
        (``..._HISTORY``), as text."""
        if end <= start:
            return []
        sel, point = self._sel, self._point
        point.tag, point.value.x, point.value.y = tag, 0, start
        GRID_REF(self._handle, point[0], self._ref)
        sel.start = self._ref[0]
        point.value.x, point.value.y = cols - 1, end - 1
        GRID_REF(self._handle, point[0], self._ref)
        sel.end = self._ref[0]
        while True:
            result = lib.ghostty_terminal_selection_format_buf(
                self._handle, self._fmt[0], self._buf, len(self._buf), self._written
            )
            if result != lib.GHOSTTY_OUT_OF_SPACE:
                break
            self._buf = ffi.new("uint8_t[]", max(2 * len(self._buf), int(self._written[0])))
        text: bytes = ffi.buffer(self._buf, self._written[0])[:]
        rows = text.decode(errors="replace").split("\n")
        count = end - start
        return rows[:count] + [""] * (count - len(rows))

    def wraps(self, tag: int, start: int, rows: list[str], cols: int) -> list[tuple[int, int]]:
        """(index, width) of ``rows`` (read from row ``start`` of ``tag``) that continue on the next row. A row
        wraps when a character is written past its last cell, which is written then: only rows about as wide as
        the screen are asked of Ghostty (a few C calls each), so a flood of shorter lines costs nothing. A wrapped
        row ending in more than ``WRAP_SLACK`` blanks is taken as ending there."""
        near = cols - WRAP_SLACK
        found: list[tuple[int, int]] = []
        point, ref, row, wrap = self._point, self._ref, self._row, self._wrap
        # Rows shorter than half of ``near`` are passed over at C speed: a flood of short lines loops over none.
        half = (near + 1) // 2
        for index in compress(range(len(rows)), map(ge, map(len, rows), repeat(half))):
            text = rows[index]
            if len(text) < near and (text.isascii() or 2 * len(text) < near or not _MAYBE_WIDE.search(text)):
                continue
            point.tag, point.value.x, point.value.y = tag, 0, start + index
            GRID_REF(self._handle, point[0], ref)
            lib.ghostty_grid_ref_row(ref, row)
            lib.ghostty_row_get(row[0], lib.GHOSTTY_ROW_DATA_WRAP, wrap)
            if wrap[0]:
                found.append((index, cols))
        return found

    def title(self) -> str:
        out = self._title
        lib.ghostty_terminal_get(self._handle, lib.GHOSTTY_TERMINAL_DATA_TITLE, out)
        return ffi.buffer(out.ptr, out.len)[:].decode(errors="replace") if out.len else ""

    def cursor(self) -> tuple[int, int, bool, bool]:
        """The cursor: column, row, whether a wrap is pending (a character was written in the last column), and
        whether it is visible."""
        handle, u16, flag = self._handle, self._u16, self._bool
        check(lib.ghostty_terminal_get(handle, lib.GHOSTTY_TERMINAL_DATA_CURSOR_X, u16), "terminal_get cursor_x")
        x = int(u16[0])
        check(lib.ghostty_terminal_get(handle, lib.GHOSTTY_TERMINAL_DATA_CURSOR_Y, u16), "terminal_get cursor_y")
        y = int(u16[0])
        what = lib.GHOSTTY_TERMINAL_DATA_CURSOR_PENDING_WRAP
        check(lib.ghostty_terminal_get(handle, what, flag), "terminal_get cursor_pending_wrap")
        pending = bool(flag[0])
        check(lib.ghostty_terminal_get(handle, lib.GHOSTTY_TERMINAL_DATA_CURSOR_VISIBLE, flag), "terminal_get cursor")
        return x, y, pending, bool(flag[0])

    def mode(self, n: int) -> bool:
        """Whether DEC private mode ``n`` is set."""
        config = self._mode
        config.mode = n & 0x7FFF  # ghostty_mode_new's packing for a DEC mode (pyghostty's Terminal.mode)
        check(lib.ghostty_terminal_get(self._handle, lib.GHOSTTY_TERMINAL_DATA_MODE, config), f"terminal_get mode {n}")
        return bool(config.value)


class ScreenSource(Protocol):
    """What a screen reads of its engine (a GhosttyTerminal): read when asked, as the engine has it then."""

    @property
    def vt(self) -> Any: ...
    @property
    def rows(self) -> int: ...
    @property
    def main_screen(self) -> tuple[list[str], int] | None: ...
    def title(self) -> str: ...
    def cursor_state(self) -> tuple[int, int, bool, bool]: ...
    def read_rows(self, tag: int, start: int, end: int) -> list[str]: ...


@final
class GhosttyCursor:
    __slots__ = ("hidden", "x", "y")

    def __init__(self, x: int, y: int, hidden: bool) -> None:
        self.x = x
        self.y = y
        self.hidden = hidden


@final
class GhosttyScreen:
    """The active screen, read once per change: rows as text, the cursor, the title."""

    def __init__(self, term: ScreenSource) -> None:
        self._term = term
        self.lines = term.rows
        x, y, pending_wrap, visible = term.cursor_state()
        if pending_wrap:
            x += 1  # past the last column, as pyte and tmux report it
        self.cursor = GhosttyCursor(x, y, not visible)
        self._rows: list[str] | None = None

    @property
    def title(self) -> str:
        return self._term.title()

    @property
    def main_cursor_y(self) -> int:
        main = self._term.main_screen
        return main[1] if main is not None else self.cursor.y

    def visible_rows(self) -> list[str]:
        if self._rows is None:
            self._rows = self._term.read_rows(lib.GHOSTTY_POINT_TAG_ACTIVE, 0, self.lines)
        return list(self._rows)

    def main_rows(self, start: int = 0, end: int | None = None) -> list[str]:
        main = self._term.main_screen
        rows = main[0] if main is not None else self.visible_rows()
        return rows[max(start, 0) : self.lines if end is None else min(end, self.lines)]
