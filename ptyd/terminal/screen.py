"""pyte's Screen with what ptyd needs and pyte 0.8.2 lacks, kept in this one class.

- Alternate screen (modes 1049, 1047, 47): full-screen programs draw on their own buffer; leaving restores the
  shell's screen (and, for 1049, the cursor).
- Scrollback: a row leaving the top of the full-screen scroll region on the main screen is handed to
  ``on_scroll_off`` as plain text; rows leaving a DECSTBM region or the alternate screen are not (TUI scrolling
  is not transcript). Clearing the main screen (ED 2) first hands its rows over too, so output survives ``clear``.
- Zero-width characters (ZWJ, VS16, ZWSP) are skipped instead of silently dropping the rest of the text run.
- Cells are interned per attribute set, so a full screen costs a few hundred kB rather than a namedtuple a cell.
- Resize keeps the cursor on the screen and moves rows pushed off the top into scrollback.
- Replies to terminal queries (DSR, DA) go to ``on_reply`` instead of nowhere.
"""

from __future__ import annotations

import copy
import unicodedata
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import pyte
from pyte import modes as mo
from pyte.screens import Char, StaticDefaultDict
from wcwidth import wcwidth

_ALT_MODES = frozenset({1049 << 5, 1047 << 5, 47 << 5})
_ALT_WITH_CURSOR = 1049 << 5
_MAX_INTERNED = 8192


def render_line(line: StaticDefaultDict[int, Char], columns: int) -> str:
    """One buffer row as text; a wide character's stub cell holds "" and so adds nothing."""
    if not line:
        return ""
    get = line.get
    last = min(max(line), columns - 1)
    return "".join([c.data if (c := get(x)) is not None else " " for x in range(last + 1)]).rstrip()


class TerminalScreen(pyte.Screen):
    def __init__(
        self,
        columns: int,
        lines: int,
        on_scroll_off: Callable[[list[str]], None],
        on_reply: Callable[[str], None],
    ) -> None:
        self._on_scroll_off = on_scroll_off
        self._on_reply = on_reply
        self._cells: dict[Char, dict[str, Char]] = {}
        self.alt = False
        # (buffer, cursor, restore cursor on exit) of the main screen while the alternate one is active
        self._main: tuple[Any, Any, bool] | None = None
        self.phantom_rows = 0  # rows at the top that must not reach scrollback when they scroll off
        super().__init__(columns, lines)

    # --- rendering -------------------------------------------------------------------------------------

    def row_text(self, y: int) -> str:
        return render_line(self.buffer[y], self.columns) if y in self.buffer else ""

    def main_rows(self) -> list[str]:
        """The main screen's rows as text (the saved ones while the alternate screen is active)."""
        buffer = self._main[0] if self._main is not None else self.buffer
        return [render_line(buffer[y], self.columns) if y in buffer else "" for y in range(self.lines)]

    def visible_rows(self) -> list[str]:
        return [self.row_text(y) for y in range(self.lines)]

    @property
    def main_cursor_y(self) -> int:
        return int(self._main[1].y) if self._main is not None else int(self.cursor.y)

    @property
    def fast_forward_ok(self) -> bool:
        """Plain lines may bypass pyte only where they would simply scroll: main screen, no region, wrap on."""
        return (
            not self.alt
            and self.margins is None
            and mo.DECAWM in self.mode
            and mo.IRM not in self.mode
            and mo.LNM not in self.mode
            and not self.charset
            and self.tabstops == set(range(8, self.columns, 8))
        )

    # --- drawing ---------------------------------------------------------------------------------------

    def draw(self, data: str) -> None:
        data = data.translate(self.g1_charset if self.charset else self.g0_charset)
        cursor = self.cursor
        columns = self.columns
        autowrap = mo.DECAWM in self.mode
        insert = mo.IRM in self.mode
        attrs = cursor.attrs
        cells = self._cells.get(attrs)
        if cells is None:
            if len(self._cells) > _MAX_INTERNED:
                self._cells.clear()
            cells = self._cells[attrs] = {}
        for char in data:
            width = 1 if " " <= char < "\x7f" else wcwidth(char)
            if width <= 0 and not (width == 0 and unicodedata.combining(char)):
                continue  # zero-width or unprintable: pyte would stop drawing the whole run here
            if cursor.x == columns:
                if autowrap:
                    self.carriage_return()
                    self.linefeed()
                elif width > 0:
                    cursor.x -= width
            if insert and width > 0:
                self.insert_characters(width)
            line = self.buffer[cursor.y]
            if width == 0:  # a combining mark joins the previous cell
                if cursor.x:
                    last = line[cursor.x - 1]
                    line[cursor.x - 1] = last._replace(data=unicodedata.normalize("NFC", last.data + char))
                continue
            cell = cells.get(char)
            if cell is None:
                cell = cells[char] = attrs._replace(data=char)
            line[cursor.x] = cell
            if width == 2 and cursor.x + 1 < columns:
                line[cursor.x + 1] = attrs._replace(data="")
            cursor.x = min(cursor.x + width, columns)

    # --- scrolling -------------------------------------------------------------------------------------

    def index(self) -> None:
        if (
            self.cursor.y == self.lines - 1
            and not self.alt
            and (self.margins is None or (self.margins.top == 0 and self.margins.bottom == self.lines - 1))
        ):
            if self.phantom_rows:
                self.phantom_rows -= 1
            else:
                self._on_scroll_off([self.row_text(0)])
        super().index()

    def erase_in_display(self, how: int = 0, *args: Any, **kwargs: Any) -> None:
        if how in (2, 3) and not self.alt:
            rows = self.visible_rows()
            while rows and not rows[-1]:
                rows.pop()
            if rows:
                self._on_scroll_off(rows)
                # Rows moved to scrollback: what was row y is now above the screen.
                self.buffer.clear()
        super().erase_in_display(how, *args, **kwargs)

    # --- alternate screen ------------------------------------------------------------------------------

    def set_mode(self, *modes: int, **kwargs: Any) -> None:
        if kwargs.get("private"):
            shifted = {m << 5 for m in modes}
            if shifted & _ALT_MODES and not self.alt:
                self._main = (self.buffer, copy.copy(self.cursor), _ALT_WITH_CURSOR in shifted)
                self.buffer = defaultdict(lambda: StaticDefaultDict(self.default_char))
                self.alt = True
            modes = tuple(m for m in modes if (m << 5) not in _ALT_MODES)
        super().set_mode(*modes, **kwargs)

    def reset_mode(self, *modes: int, **kwargs: Any) -> None:
        if kwargs.get("private"):
            shifted = {m << 5 for m in modes}
            if shifted & _ALT_MODES and self.alt and self._main is not None:
                buffer, saved_cursor, restore = self._main
                self.buffer = buffer
                if restore:
                    self.cursor = saved_cursor
                self._main = None
                self.alt = False
                self._clamp_cursor()
            modes = tuple(m for m in modes if (m << 5) not in _ALT_MODES)
        super().reset_mode(*modes, **kwargs)

    # --- size ------------------------------------------------------------------------------------------

    def resize(self, lines: int | None = None, columns: int | None = None) -> None:
        lines = lines or self.lines
        columns = columns or self.columns
        if lines < self.lines:
            # Drop blank rows below the cursor first; rows above that leave through the top (to scrollback).
            top = max(0, self.cursor.y - (lines - 1))
            if top:
                if not self.alt:
                    self._on_scroll_off([self.row_text(y) for y in range(top)])
                for y in range(self.lines):
                    if y + top < self.lines and (y + top) in self.buffer:
                        self.buffer[y] = self.buffer[y + top]
                    else:
                        self.buffer.pop(y, None)
                self.cursor.y -= top
            for y in range(lines, self.lines):
                self.buffer.pop(y, None)
            self.lines = lines
        super().resize(lines, columns)
        if self._main is not None:
            main_buffer = self._main[0]
            for y in [y for y in main_buffer if y >= lines]:
                main_buffer.pop(y, None)
        self._clamp_cursor()

    def _clamp_cursor(self) -> None:
        self.cursor.x = min(self.cursor.x, self.columns - 1)
        self.cursor.y = min(self.cursor.y, self.lines - 1)

    # --- queries ---------------------------------------------------------------------------------------

    def write_process_input(self, data: str) -> None:
        self._on_reply(data)
