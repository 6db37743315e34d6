"""pyte's Screen with what ptyd needs and pyte 0.8.2 lacks or gets wrong, kept in this one class.

- Alternate screen (modes 1049, 1047, 47): full-screen programs draw on their own buffer; leaving restores the
  shell's screen (and, for 1049, the cursor).
- Scrollback: a row leaving the top of the full-screen scroll region on the main screen is handed to
  ``on_scroll_off`` as plain text; rows leaving a DECSTBM region or the alternate screen are not (TUI scrolling
  is not transcript). Clearing the main screen (ED 2, RIS) first hands its rows over too, so output survives
  ``clear``; ED 3 (erase the terminal's scrollback) is ignored.
- Text: grapheme clusters and widths as in ``cells`` (pyte drops the rest of a text run at a ZWJ or VS16); a wide
  character that does not fit in the last column wraps first; overwriting half of a wide character blanks the
  other half; DEC line drawing (``ESC ( 0``) is drawn as box characters.
- Resize keeps the cursor on the screen (both screens' cursors), moves rows pushed off the top of the main screen
  into scrollback, resets the scroll region and extends the tab stops.
- Cursor reports (DSR) never name a column past the last; CUU/CUD end a pending wrap; the saved cursor (DECSC) is
  one slot, as in xterm.
- Sequences pyte lacks: SU, SD, REP, SCOSC/SCORC, CHT, CBT, HPA, HPB, VPB (see ``stream``), mode 1048 (save and
  restore the cursor). DECCOLM is ignored: the PTY's size is the screen's size.
- Scroll regions as xterm: LF, RI, CUU and CUD outside the region move to the screen's edge (pyte pulled the cursor
  into the region), and DECSTBM homes the cursor, ``CSI r`` too.
- Soft wraps: a row the cursor wrapped from at the right margin carries ``wrapped`` (an attribute of the row
  object, so it moves with the row through scrolling, inserted and deleted lines and the alternate screen), and
  rows handed to ``on_scroll_off`` say which wrapped. Erasing a row's end clears it; so does a width change
  (pyte does not reflow).
- Answers to terminal queries (DSR, DA) go to ``on_reply``, in the order of the queries, those the sanitizer
  answers included; DECRQM and DECRQSS from the state at the query (``queries``).
- Cells are interned per attribute set, so a full screen costs a few hundred kB rather than a namedtuple a cell.
"""

from __future__ import annotations

import copy
from collections import defaultdict, deque
from collections.abc import Callable, Sequence
from typing import Any

import pyte
from pyte import charsets as cs
from pyte import modes as mo
from pyte.screens import Char, Cursor, Margins, StaticDefaultDict
from wcwidth import wcwidth

from ptyd.terminal import reports
from ptyd.terminal.engines.pyte import queries
from ptyd.terminal.engines.pyte.cells import MAX_CLUSTER, ZWJ, joined_width, may_join, render_line
from ptyd.terminal.engines.pyte.sanitize import SETTINGS, Report

_ALT_MODES = frozenset({1049 << 5, 1047 << 5, 47 << 5})
_ALT_WITH_CURSOR = 1049 << 5
_IGNORED_MODES = frozenset({3 << 5})  # DECCOLM would resize the screen to 132 columns behind the PTY's back
_SAVE_CURSOR = 1048 << 5  # set: DECSC, reset: DECRC (xterm); an action, not a state
_UNRECORDED_MODES = _ALT_MODES | _IGNORED_MODES | {_SAVE_CURSOR}
_CHARSETS = {"B": cs.LAT1_MAP, "0": cs.VT100_MAP}  # other national sets are drawn as ASCII
_MAX_INTERNED = 8192

Buffer = dict[int, StaticDefaultDict[int, Char]]
ScrollOff = Callable[[list[str], Sequence[tuple[int, int]]], None]
"""Rows that left the top of the main screen, and (index, width) of those that wrapped onto the next."""


def _wraps(line: object) -> bool:
    return bool(getattr(line, "wrapped", False))


def _unwrap(line: object) -> None:
    if _wraps(line):
        del line.wrapped  # type: ignore[attr-defined]


class TerminalScreen(pyte.Screen):
    def __init__(
        self,
        columns: int,
        lines: int,
        on_scroll_off: ScrollOff,
        on_reply: Callable[[str], None],
        *,
        answers: deque[str | Report] | None = None,
    ) -> None:
        self._on_scroll_off = on_scroll_off
        self._on_reply = on_reply
        self._answers: deque[str | Report] = deque() if answers is None else answers  # the sanitizer's, see send_answer
        self._cells: dict[Char, dict[str, Char]] = {}
        self._ready = False  # pyte's __init__ calls reset() before the screen exists
        self.alt = False
        self.alt_mode: int | None = None  # the mode (47, 1047, 1049) that entered the alternate screen
        # (buffer, cursor, restore cursor on exit) of the main screen while the alternate one is active
        self._main: tuple[Buffer, Cursor, bool] | None = None
        self.phantom_rows = 0  # rows at the top that must not reach scrollback when they scroll off
        self._wide = False  # a wide character was drawn: overwrites must check for split halves from now on
        self._zwj = False  # the last character joined to a cell was a ZWJ: the next one may join it too
        self._last_drawn = ""  # for REP
        super().__init__(columns, lines)
        self._ready = True

    # --- rendering -------------------------------------------------------------------------------------

    def row_text(self, y: int) -> str:
        return render_line(self.buffer[y], self.columns) if y in self.buffer else ""

    def main_wraps(self, start: int = 0, end: int | None = None) -> list[int]:
        """Rows ``[start, end)`` of the main screen that soft-wrapped onto the next row."""
        buffer = self._main[0] if self._main is not None else self.buffer
        stop = self.lines if end is None else min(end, self.lines)
        return [y for y in range(max(start, 0), stop) if y in buffer and _wraps(buffer[y])]

    def active_wraps(self) -> list[int]:
        """Rows of the active screen (main or alternate) that soft-wrapped onto the next row."""
        buffer = self.buffer
        return [y for y in range(self.lines) if y in buffer and _wraps(buffer[y])]

    def _wrap_list(self, buffer: Buffer, rows: range) -> list[tuple[int, int]]:
        return [(i, self.columns) for i, y in enumerate(rows) if y in buffer and _wraps(buffer[y])]

    def main_rows(self, start: int = 0, end: int | None = None) -> list[str]:
        """Rows ``[start, end)`` of the main screen as text (the saved ones while the alternate screen is active)."""
        buffer = self._main[0] if self._main is not None else self.buffer
        stop = self.lines if end is None else min(end, self.lines)
        return [render_line(buffer[y], self.columns) if y in buffer else "" for y in range(max(start, 0), stop)]

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
            and (self.g1_charset if self.charset else self.g0_charset) is cs.LAT1_MAP
            and self.tabstops == set(range(8, self.columns, 8))
        )

    # --- drawing ---------------------------------------------------------------------------------------

    def draw(self, data: str) -> None:
        if self.charset or self.g0_charset is not cs.LAT1_MAP:
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
        wide = self._wide
        for char in data:
            if " " <= char < "\x7f":
                width = 1
            else:
                width = wcwidth(char)
                if width == 0 or self._zwj or may_join(char):
                    joined = self._join(char, width)
                    wide = self._wide
                    if joined:
                        continue
                if width <= 0:
                    continue  # unprintable
                if width == 2:
                    self._wide = wide = True
            if cursor.x + width > columns:  # past the last column, or a wide character that does not fit
                if autowrap:
                    setattr(self.buffer[cursor.y], "wrapped", True)  # noqa: B010 - pyte's row type declares no such field
                    self.carriage_return()
                    self.linefeed()
                else:
                    cursor.x = columns - width
            if insert:
                self.insert_characters(width)
            line = self.buffer[cursor.y]
            x = cursor.x
            if wide and (
                ((old := line.get(x)) is not None and not old.data)
                or ((after := line.get(x + width)) is not None and not after.data)
            ):
                self._unsplit(line, x, width)  # a stub ("") under or just after the new cell
            cell = cells.get(char)
            if cell is None:
                cell = cells[char] = attrs._replace(data=char)
            line[x] = cell
            if width == 2:
                line[x + 1] = attrs._replace(data="")
            cursor.x = x + width
        self._last_drawn = data

    def _join(self, char: str, width: int) -> bool:
        """Add ``char`` to the cell before the cursor if it belongs to that cluster; False if it starts a cell."""
        self._zwj = False
        cursor = self.cursor
        x = min(cursor.x, self.columns) - 1
        line = self.buffer[cursor.y]
        cell = line.get(x) if x >= 0 else None
        if cell is not None and cell.data == "" and x > 0:  # the stub of a wide character
            x -= 1
            cell = line.get(x)
        if cell is None or not cell.data:
            return width <= 0  # nothing to join: a zero-width character is dropped
        new_width = joined_width(cell.data, char, width)
        if new_width is None:
            return False
        if len(cell.data) < MAX_CLUSTER:
            line[x] = cell._replace(data=cell.data + char)
            self._zwj = char == ZWJ
            stub = line.get(x + 1)
            if new_width == 2 and (stub is None or stub.data != "") and x + 2 <= self.columns:
                self._unsplit(line, x + 1, 1)
                line[x + 1] = cell._replace(data="")  # VS16 made it wide
                cursor.x = x + 2
                self._wide = True
        return True

    def _unsplit(self, line: StaticDefaultDict[int, Char], x: int, width: int) -> None:
        """Overwriting one half of a wide character blanks the other half, as terminals do."""
        old = line.get(x)
        if old is not None and old.data == "" and x > 0 and (left := line.get(x - 1)) is not None:
            line[x - 1] = left._replace(data=" ")
        after = line.get(x + width)
        if after is not None and after.data == "":
            line[x + width] = after._replace(data=" ")

    def repeat_last(self, count: int | None = None, *_params: int) -> None:
        last = next((c for c in reversed(self._last_drawn) if wcwidth(c) > 0), None)
        if last is not None:
            self.draw(last * min(count or 1, self.columns * self.lines))

    def define_charset(self, code: str, mode: str) -> None:
        charset = _CHARSETS.get(code, cs.LAT1_MAP)
        if mode == "(":
            self.g0_charset = charset
        elif mode == ")":
            self.g1_charset = charset

    # --- scrolling -------------------------------------------------------------------------------------

    def index(self) -> None:
        if self.margins is not None and self.cursor.y > self.margins.bottom:  # below the region: down to the last row
            self.cursor.y = min(self.cursor.y + 1, self.lines - 1)
            return
        if self.cursor.y == self.lines - 1 and not self.alt and self.margins is None:
            if self.phantom_rows:
                self.phantom_rows -= 1
            else:
                self._on_scroll_off([self.row_text(0)], self._wrap_list(self.buffer, range(1)))
        super().index()

    def reverse_index(self) -> None:
        if self.margins is not None and self.cursor.y < self.margins.top:  # above the region: up to the first row
            self.cursor.y = max(self.cursor.y - 1, 0)
            return
        super().reverse_index()

    def next_line(self) -> None:
        self.index()
        self.carriage_return()

    def scroll_up(self, count: int | None = None, *_params: int) -> None:
        top, bottom = self.margins or Margins(0, self.lines - 1)
        x, y = self.cursor.x, self.cursor.y
        self.cursor.y = bottom
        for _ in range(min(count or 1, bottom - top + 1)):
            self.index()
        self.cursor.x, self.cursor.y = x, y

    def scroll_down(self, count: int | None = None, *_params: int) -> None:
        top, bottom = self.margins or Margins(0, self.lines - 1)
        x, y = self.cursor.x, self.cursor.y
        self.cursor.y = top
        for _ in range(min(count or 1, bottom - top + 1)):
            self.reverse_index()
        self.cursor.x, self.cursor.y = x, y

    def erase_in_display(self, how: int = 0, *args: Any, **kwargs: Any) -> None:
        # ED 3 erases the terminal's scrollback, not the screen; ptyd's scrollback is the transcript and stays.
        if how not in (0, 1, 2):
            return
        if how == 2 and not self.alt:
            self._scroll_off_screen()
        y = self.cursor.y
        for row in range(y, self.lines) if how == 0 else range(y) if how == 1 else range(self.lines):
            if row in self.buffer:
                _unwrap(self.buffer[row])
        super().erase_in_display(how, *args, **kwargs)

    def erase_in_line(self, how: int = 0, private: bool = False) -> None:
        if how in (0, 1, 2):
            if how != 1 and self.cursor.y in self.buffer:  # the row's last cell is erased: it no longer goes on
                _unwrap(self.buffer[self.cursor.y])
            super().erase_in_line(how, private)

    def _scroll_off_screen(self) -> None:
        rows = self.visible_rows()
        while rows and not rows[-1]:
            rows.pop()
        if rows:
            self._on_scroll_off(rows, self._wrap_list(self.buffer, range(len(rows))))
            # Rows moved to scrollback: what was row y is now above the screen.
            self.buffer.clear()

    def reset(self) -> None:
        if self._ready:
            if self._main is not None:
                self._leave_alt(restore_cursor=False)
            self._scroll_off_screen()
        super().reset()
        self.g1_charset = cs.LAT1_MAP  # a stray SO in binary output must not switch to line drawing
        self.savepoints.clear()
        self._zwj = False
        self._last_drawn = ""

    # --- cursor ----------------------------------------------------------------------------------------

    def save_cursor(self) -> None:
        super().save_cursor()
        del self.savepoints[:-1]

    def restore_cursor(self) -> None:
        saved = self.savepoints[-1] if self.savepoints else None
        super().restore_cursor()
        if saved is not None:  # DECRC does not consume the saved cursor
            self.savepoints.append(saved._replace(cursor=copy.copy(saved.cursor)))

    def save_cursor_ansi(self, *_params: int) -> None:
        self.save_cursor()

    def restore_cursor_ansi(self, *_params: int) -> None:
        self.restore_cursor()

    # The margins stop CUU and CUD only for a cursor inside the scroll region (pyte moved a cursor below it up to
    # its bottom): outside, the screen's edge does, as in xterm.
    def cursor_up(self, count: int | None = None) -> None:
        top = self.margins.top if self.margins is not None and self.cursor.y >= self.margins.top else 0
        self.cursor.y = max(self.cursor.y - (count or 1), top)

    def cursor_down(self, count: int | None = None) -> None:
        inside = self.margins is not None and self.cursor.y <= self.margins.bottom
        bottom = self.margins.bottom if self.margins is not None and inside else self.lines - 1
        self.cursor.y = min(self.cursor.y + (count or 1), bottom)

    def set_margins(self, top: int | None = None, bottom: int | None = None, *_params: int) -> None:
        """DECSTBM as xterm: an omitted or 0 margin is the screen's edge (pyte kept the old one), the whole screen
        is no region at all (the fast path stays open), and a valid region, ``CSI r`` included, homes the cursor
        (pyte did not for ``CSI r``)."""
        top = max(1, min(top or 1, self.lines)) - 1
        bottom = max(1, min(bottom or self.lines, self.lines)) - 1
        if bottom <= top:
            return  # a region of one row or less is ignored, cursor and all
        self.margins = None if (top, bottom) == (0, self.lines - 1) else Margins(top, bottom)
        self.cursor_position()

    # CUU and CUD end a pending wrap (as tmux and xterm do); LF and RI, which pyte also moves with, keep it.
    def move_up(self, count: int | None = None, *_params: int) -> None:
        self.cursor.x = min(self.cursor.x, self.columns - 1)
        self.cursor_up(count)

    def move_down(self, count: int | None = None, *_params: int) -> None:
        self.cursor.x = min(self.cursor.x, self.columns - 1)
        self.cursor_down(count)

    def cursor_to_line(self, line: int | None = None, *_params: int) -> None:
        top = self.margins.top if self.margins is not None and mo.DECOM in self.mode else 0
        self.cursor.y = (line or 1) - 1 + top
        self.ensure_vbounds()

    def forward_tab(self, count: int | None = None, *_params: int) -> None:
        for _ in range(min(count or 1, self.columns)):
            self.tab()

    def back_tab(self, count: int | None = None, *_params: int) -> None:
        for _ in range(min(count or 1, self.columns)):
            self.cursor.x = max((t for t in self.tabstops if t < self.cursor.x), default=0)

    # --- alternate screen ------------------------------------------------------------------------------

    def set_mode(self, *modes: int, **kwargs: Any) -> None:
        if kwargs.get("private"):
            shifted = {m << 5 for m in modes}
            if shifted & _ALT_MODES and not self.alt:
                self._main = (self.buffer, copy.copy(self.cursor), _ALT_WITH_CURSOR in shifted)
                self.buffer = defaultdict(lambda: StaticDefaultDict(self.default_char))
                self.alt = True
                self.alt_mode = next(m for m in modes if m << 5 in _ALT_MODES)
            if _SAVE_CURSOR in shifted:
                self.save_cursor()
            modes = tuple(m for m in modes if (m << 5) not in _UNRECORDED_MODES)
        super().set_mode(*modes, **kwargs)

    def reset_mode(self, *modes: int, **kwargs: Any) -> None:
        if kwargs.get("private"):
            shifted = {m << 5 for m in modes}
            if shifted & _ALT_MODES and self._main is not None:
                self._leave_alt(restore_cursor=True)
            if _SAVE_CURSOR in shifted:
                self.restore_cursor()
            modes = tuple(m for m in modes if (m << 5) not in _UNRECORDED_MODES)
        super().reset_mode(*modes, **kwargs)

    def _leave_alt(self, *, restore_cursor: bool) -> None:
        assert self._main is not None
        buffer, saved_cursor, restore = self._main
        self.buffer = buffer
        if restore and restore_cursor:
            self.cursor = saved_cursor
        self._main = None
        self.alt = False
        self.alt_mode = None
        self.cursor.y = min(self.cursor.y, self.lines - 1)

    # --- size ------------------------------------------------------------------------------------------

    def resize(self, lines: int | None = None, columns: int | None = None) -> None:
        lines = lines or self.lines
        columns = columns or self.columns
        if lines == self.lines and columns == self.columns:
            return
        screens: list[tuple[Buffer, Cursor, bool]] = [(self.buffer, self.cursor, not self.alt)]
        if self._main is not None:
            screens.append((self._main[0], self._main[1], True))
        for buffer, cursor, main in screens:
            if lines < self.lines:
                self._drop_top(buffer, cursor, lines, to_scrollback=main)
            if columns < self.columns:
                for line in buffer.values():
                    for x in range(columns, self.columns):
                        line.pop(x, None)
            if columns != self.columns:  # rows keep their old width: a wrapped one no longer fills its row
                for line in buffer.values():
                    _unwrap(line)
        old_columns = self.columns
        self.lines, self.columns = lines, columns
        self.margins = None
        self.tabstops = {t for t in self.tabstops if t < columns} | set(range(-(-old_columns // 8) * 8, columns, 8))
        self.dirty.update(range(lines))
        for _, cursor, _ in screens:
            self._clamp(cursor)

    def _drop_top(self, buffer: Buffer, cursor: Cursor, lines: int, *, to_scrollback: bool) -> None:
        """Shrink ``buffer`` to ``lines`` rows: blank rows below the cursor go first, then rows off the top."""
        top = max(0, cursor.y - (lines - 1))
        if top:
            if to_scrollback:
                rows = [render_line(buffer[y], self.columns) if y in buffer else "" for y in range(top)]
                self._on_scroll_off(rows, self._wrap_list(buffer, range(top)))
            for y in range(self.lines):
                if y + top < self.lines and (y + top) in buffer:
                    buffer[y] = buffer[y + top]
                else:
                    buffer.pop(y, None)
            cursor.y -= top
        for y in range(lines, self.lines):
            buffer.pop(y, None)

    def _clamp(self, cursor: Cursor) -> None:
        cursor.x = min(cursor.x, self.columns - 1)
        cursor.y = min(cursor.y, self.lines - 1)

    # --- queries ---------------------------------------------------------------------------------------

    def report_device_status(self, mode: int = 0, *_params: int, **__: Any) -> None:
        if mode == 5:
            self.write_process_input("\x1b[0n")
        elif mode == 6:
            self.write_process_input("\x1b[{};{}R".format(*self._cursor_report()))

    def _cursor_report(self) -> tuple[int, int]:
        """The cursor as DSR reports it: 1-based, within the margins under DECOM. pyte has column ``columns``
        after the last column is written (the pending wrap)."""
        y = self.cursor.y + 1
        if self.margins is not None and mo.DECOM in self.mode:
            y -= self.margins.top
        return y, min(self.cursor.x, self.columns - 1) + 1

    def send_answer(self, marker: int | None = None, *_params: int) -> None:
        """The sanitizer answered a query here; its answer goes out now, after those of earlier queries. (Or, for
        ``sanitize.MARGINS_OFF_MARKER``, a soft reset unsets the scroll region here, the cursor staying.)"""
        if marker == 1:
            self.margins = None
        elif self._answers:
            answer = self._answers.popleft()
            if isinstance(answer, tuple):  # computed now: the state as it is at the query
                kind, code = answer
                if kind == "size":
                    answer = reports.size_report(code, self.columns, self.lines)
                elif kind == "cursor":
                    answer = reports.cursor_report(*self._cursor_report())
                elif kind == "setting" and SETTINGS[code] == "m":
                    answer = queries.sgr_report(self.cursor.attrs)
                elif kind == "setting":
                    answer = queries.margins_report(self)
                else:
                    answer = queries.mode_report(self, code, private=kind == "private_mode")
            self.write_process_input(answer)

    def write_process_input(self, data: str) -> None:
        self._on_reply(data)
