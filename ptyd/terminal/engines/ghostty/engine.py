"""The native engine: libghostty-vt, Ghostty's VT core, through pyghostty's cffi binding.

Ghostty parses and draws at a few hundred MB/s, answers queries (DSR, DA, colours) itself, and gets right what
pyte needed a sanitizer for (strings, C0 inside CSI, NEL, intermediates). What stays ours is the transcript:

- Rows that scroll into Ghostty's own scrollback are copied out as text after each write, into ptyd's numbered,
  memory-bounded ``Scrollback``. A tracked grid reference (the mark) sits on the newest history row already
  copied; Ghostty keeps it on that row as rows scroll and as it drops its oldest pages, so the rows past it are
  exactly the new ones. Ghostty keeps about a page of history (252-542 rows at 160x40; ``history_size`` measures
  the floor once per size), and each write is cut so that what it can scroll fits below that floor
  (``max_scrolls``, counted at C speed): the mark's row is never dropped. Erasing the history (ED 3) is cheap
  but the next scroll then maps a fresh page (~0.4 ms), so it is erased only once output has been quiet a
  while (``settle``), which frees the page of an idle session.
- Runs of plain lines (``plain``) are fast-forwarded: the first screenful and the last go through Ghostty, the
  rows between go straight to scrollback as text.
- A few sequences are acted on before Ghostty sees them, split out of the stream as output is queued: ED 2 on the
  main screen (``clear``) and RIS first move the screen's rows into scrollback, ED 3 from the program erases
  nothing of the transcript, and entering the alternate screen keeps a copy of the main screen's rows (Ghostty
  only reads the active screen) for the transcript while a full-screen program runs. DECSTR (soft reset), which
  Ghostty ignores, becomes the sequences it stands for.
"""

from __future__ import annotations

import re
import time
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any, final

import pyghostty
from pyghostty import ffi, lib
from pyghostty.core import init_sized

from ptyd.terminal import reports
from ptyd.terminal.emulator import Terminal
from ptyd.terminal.engines.ghostty.history import (
    GRID_REF,
    HISTORY_LINES,
    TRACK,
    TRACK_SET,
    history_size,
    max_scrolls,
    set_size,
)
from ptyd.terminal.plain import SGR, all_simple, rows_of
from ptyd.terminal.replay import TerminalState

SLICE = 64 * 1024  # bytes per write between budget checks (~0.2 ms); scrolling output is cut finer
_ERASE_HISTORY = b"\x1b[3J"
# The sequences acted on before Ghostty sees them (see the module's docstring; DECCOLM is ignored, as by pyte and
# by xterm unless told otherwise: it would resize the screen behind the PTY's back), and two written alone because
# a few bytes of them scroll many rows: SU (up to a screenful; any C0 inside it runs) and REP (up to 65535 cells).
_SPECIAL = re.compile(
    rb"\x1b\[(?:[23]J|\?(?:1049|1047|47)h|\?3[hl]|!p|[^@-~\x1b]*S|[0-9]*b|1[4689]t|\?6n)|\x1bc"
    rb"|\x1bP\+q" + reports.CAPABILITY_NAMES.encode() + rb"\x1b\\"  # the queries Ghostty leaves unanswered
)
# A chunk ending in an escape sequence not yet finished holds it for the next chunk: it may be one of those.
_PARTIAL = re.compile(rb"\x1b(?:\[[ -?]*)?\Z")
_PARTIAL_MAX = 32  # a longer unfinished sequence is no special one
WRAP_SLACK = 16  # trailing blanks a soft-wrapped row may end in and still be found wrapped (see read_wraps)
FAST_MIN_BYTES = 4096  # a shorter chunk of plain lines is not worth fast-forwarding
_PLAIN_PIECE = 32 * 1024  # plain lines fast-forwarded at once (~1 ms)
_DECCKM = 1  # application cursor keys
_DECLRMM = 69  # left and right margins: lines would wrap and scroll inside them
_REP_MAX = 65535  # Ghostty's bound on REP's count
# Default colours, reported to OSC 10/11 queries: the pyte engine answers the same.
FOREGROUND = (0xE5, 0xE5, 0xE5)
BACKGROUND = (0, 0, 0)


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

    def __init__(self, term: GhosttyTerminal) -> None:
        self._term = term
        self.lines = term.rows
        vt = term.vt
        x, y = vt.cursor
        if vt.get("cursor_pending_wrap", "bool"):
            x += 1  # past the last column, as pyte and tmux report it
        self.cursor = GhosttyCursor(int(x), int(y), not vt.get("cursor_visible", "bool"))
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


@final
class GhosttyTerminal(Terminal):
    engine = "ghostty"

    def __init__(
        self,
        cols: int,
        rows: int,
        *,
        scrollback_lines: int,
        scrollback_bytes: int,
        on_reply: Callable[[bytes], None],
        emulator: str = "ghostty",
    ) -> None:
        super().__init__(
            cols, rows, scrollback_lines=scrollback_lines, scrollback_bytes=scrollback_bytes, on_reply=on_reply
        )
        self.vt: Any = pyghostty.Terminal(cols, rows, scrollback=HISTORY_LINES, fg=FOREGROUND, bg=BACKGROUND)
        self.vt.on_reply(on_reply)
        self._handle = self.vt._t[0]
        # The mark: a tracked reference to the newest history row already copied to scrollback (none while the
        # history is empty). Freed before the terminal it points into.
        self._mark = ffi.new("GhosttyTrackedGridRef*")
        self._point = ffi.new("GhosttyPointS*")
        self._coord = ffi.new("GhosttyPointCoordinate*")
        _, _, (handle,), _ = self.vt._free.detach()
        weakref.finalize(self, _drop, self._mark, handle)
        free_dropped()
        pull = ffi.new("bool*", False)  # a growing screen must not take rows back from the (erased) history
        lib.ghostty_terminal_set(self._handle, lib.GHOSTTY_TERMINAL_OPT_RESIZE_PULL_SCROLLBACK, pull)
        # Grapheme clustering (mode 2027): a cluster is one cell of the width wcwidth gives it, as in the pyte
        # engine (VS16, ZWJ sequences, skin tones and flags are one 2-column cell).
        lib.ghostty_terminal_vt_write(self._handle, b"\x1b[?2027h", 8)
        self._cols, self._rows = cols, rows
        # Output, plain output (as text) to fast-forward, and (sequence,) to act on.
        self._queue: deque[bytes | str | tuple[bytes]] = deque()
        self._head = 0  # bytes of the queue's first item written already
        self._tail = b""  # a possible start of a special sequence, completed by the next chunk
        self._slice = SLICE  # bytes to try writing at once: what fits at the density of the last write
        self._history_rows = self._size_history(cols, rows)
        self.main_screen: tuple[list[str], int] | None = None  # main rows and cursor row, while alt is active
        self.main_wraps: list[int] = []  # ...and which of those rows soft-wrapped
        self._screen: GhosttyScreen | None = None
        self._fmt = init_sized("GhosttyTerminalSelectionFormatOptions")
        self._fmt.emit = lib.GHOSTTY_FORMATTER_FORMAT_PLAIN
        self._fmt.unwrap, self._fmt.trim = False, True
        self._sel = init_sized("GhosttySelection")
        self._fmt.selection = self._sel
        self._ref = init_sized("GhosttyGridRef")
        self._buf = ffi.new("uint8_t[]", 64 * 1024)
        self._written = ffi.new("size_t*")
        self._ground = ffi.new("bool*")
        self._count = ffi.new("size_t*")
        self._screen_tag = ffi.new("int*")
        self._width = ffi.new("uint16_t*")
        self._row = ffi.new("GhosttyRow*")
        self._wrap = ffi.new("bool*")

    # --- input -----------------------------------------------------------------------------------------

    def feed(self, data: bytes, *, more: bool = False) -> None:
        if _dropped:
            free_dropped()
        if self._tail:
            data, self._tail = self._tail + data, b""
        esc = data.rfind(b"\x1b", max(0, len(data) - _PARTIAL_MAX))
        if esc >= 0 and _PARTIAL.match(data, esc):
            data, self._tail = data[:esc], data[esc:]
        self.backlog += len(data)
        # Plain lines are fast-forwarded: from the first line start (the read before may have cut a line, or a
        # character) to the last line end.
        first = data.find(b"\r\n") + 2
        cut = data.rfind(b"\r\n") + 2
        line_end = data.find(b"\r\n", first, cut)
        # A bare CR or LF in the first line (a progress bar redrawn) rules the run out before it is decoded.
        if cut - first >= FAST_MIN_BYTES and data.find(b"\r", first, cut) == line_end == data.find(b"\n", first) - 1:
            try:
                text = data[first:cut].decode()
            except UnicodeDecodeError:
                text = ""
            if text and all_simple(text) is not None:
                self.backlog -= cut - first - len(text)  # plain text is counted in characters
                self._queue_output(data[:first])
                start = 0
                while start < len(text):  # in pieces, so that process() keeps to its budget
                    end = text.find("\r\n", start + _PLAIN_PIECE)
                    end = len(text) if end < 0 else end + 2
                    self._queue.append(text[start:end])
                    start = end
                data = data[cut:]
        self._queue_output(data)

    def _queue_output(self, data: bytes) -> None:
        """Queue output to write, with the sequences to act on split out."""
        pos = 0
        if b"\x1b" in data:
            for m in _SPECIAL.finditer(data):
                if m.start() > pos:
                    self._queue.append(data[pos : m.start()])
                self._queue.append((m.group(),))
                pos = m.end()
        if pos < len(data):
            self._queue.append(data[pos:] if pos else data)

    def flush(self) -> None:
        pass  # nothing is held back for speed: Ghostty draws a partial line as fast as a whole one

    def process(self, budget_s: float) -> bool:
        deadline = time.monotonic() + budget_s
        queue = self._queue
        if queue:
            self._generation += 1
            self._screen = None
        while queue:
            item = queue[0]
            if isinstance(item, tuple):
                queue.popleft()
                self._special(item[0])
                self.backlog -= len(item[0])
            elif isinstance(item, str):
                queue.popleft()
                self._fast_forward(item)
                self.backlog -= len(item)
            else:
                chunk = self._fitting(item, self._head)
                self._head += len(chunk)
                if self._head >= len(item):
                    queue.popleft()
                    self._head = 0
                self._write(chunk)
                self.backlog -= len(chunk)
            if time.monotonic() >= deadline:
                break
        return bool(queue)

    def settle(self) -> None:
        if not self._queue and self._mark[0]:
            self._erase_history()  # all of it is in scrollback: free its page while the session is quiet

    @property
    def idle(self) -> bool:
        return not self._queue

    def _write(self, data: bytes, *, harvest: bool = True) -> None:
        lib.ghostty_terminal_vt_write(self._handle, data, len(data))
        self.vt._raise_cb_err()
        lib.ghostty_terminal_get(self._handle, lib.GHOSTTY_TERMINAL_DATA_COLS, self._width)
        if self._width[0] != self._cols:  # DECCOLM inside a longer mode sequence: the PTY's size stands
            lib.ghostty_terminal_resize(self._handle, self._cols, self._rows, 8, 16)
        if harvest:
            self._harvest()
        if self.main_screen is not None and not self._alt_active():
            self.main_screen = None

    def _special(self, seq: bytes) -> None:
        if seq.endswith(b"S"):  # SU: a screenful at most, which the history always has room for
            self._write(seq)
            return
        if seq.endswith(b"b"):  # REP: as several, each wrapping fewer rows than the history holds
            count = min(int(seq[2:-1] or 1) or 1, _REP_MAX)
            most = max(1, (self._history_rows - 3) * self._cols)
            while count > 0:
                self._write(b"\x1b[%db" % min(count, most))
                count -= most
            return
        if seq in (b"\x1b[?3h", b"\x1b[?3l"):
            return
        if seq.endswith(b"t"):
            self._on_reply(reports.size_report(int(seq[2:-1]), self._cols, self._rows).encode())
            return
        if seq == b"\x1b[?6n":
            x, y = self.vt.cursor
            self._on_reply(reports.cursor_report(y + 1, min(x, self._cols - 1) + 1).encode())
            return
        if seq.startswith(b"\x1bP"):
            self._on_reply(reports.capabilities_report(seq[4:-2].decode()).encode())
            return
        if seq == b"\x1b[!p":  # DECSTR, which Ghostty ignores: the modes it resets, as the pyte engine does
            x, y = self.vt.cursor
            self._write(reports.SOFT_RESET.encode() + f"\x1b[{y + 1};{x + 1}H".encode())  # DECSTBM homed the cursor
            return
        if seq == b"\x1b[3J":  # the program erases the terminal's scrollback: the transcript stays
            self._harvest()
            return
        if self._alt_active():
            if seq == b"\x1bc" and self.main_screen is not None:
                kept = _trimmed(self.main_screen[0])
                self._scrolled_off(kept, [(y, self._cols) for y in self.main_wraps if y < len(kept)])
                self.main_screen = None
        elif seq in (b"\x1b[2J", b"\x1bc"):
            self._harvest()
            self._scroll_off(lib.GHOSTTY_POINT_TAG_ACTIVE, 0, self._rows, trim=True)
            # The rows are in scrollback now, whatever Ghostty does with them: any it pushes to its history go.
            self._write(seq, harvest=False)
            self._erase_history(force=True)
            return
        else:  # entering the alternate screen
            rows = self.read_rows(lib.GHOSTTY_POINT_TAG_ACTIVE, 0, self._rows)
            self.main_screen = (rows, int(self.vt.cursor[1]))
            self.main_wraps = [index for index, _ in self.read_wraps(lib.GHOSTTY_POINT_TAG_ACTIVE, 0, rows)]
        self._write(seq)

    def _write_all(self, data: bytes) -> None:
        start = 0
        while start < len(data):
            chunk = self._fitting(data, start)
            self._write(chunk)
            start += len(chunk)

    def _fast_forward(self, text: str) -> None:
        """Plain lines: the first screenful and the last through Ghostty, those between straight to scrollback."""
        lines = text.split("\r\n")
        lines.pop()  # text ends with CRLF
        plain = SGR.sub("", text) if "\x1b" in text else text
        bare = plain.split("\r\n") if plain is not text else lines
        rows, cols = self._rows, self._cols
        # A line that might wrap is left to Ghostty: wide characters take two cells.
        width = cols if plain.isascii() else cols // 2
        if len(lines) < 3 * rows or max(map(len, bare)) > width or self._alt_active() or self.vt.mode(_DECLRMM):
            self._write_all(text.encode())
            return
        before = self.scrollback.total
        self._write_all(("\r\n".join(lines[:rows]) + "\r\n").encode())
        if self.scrollback.total == before or self.vt.cursor != (0, rows - 1):  # a scroll region holds the rows
            self._write_all(("\r\n".join(lines[rows:]) + "\r\n").encode())
            return
        tail = len(lines) - (rows - 1)
        # What scrolling the rest through would push off the top: the rows above the cursor, then the middle.
        self._scroll_off(lib.GHOSTTY_POINT_TAG_ACTIVE, 0, rows - 1)
        middle = bare[rows:tail]  # every line fits its row (checked above): rows of their own unless trimmed
        self._scrolled_off(rows_of(middle, cols, strip=True) if " \r\n" in plain else middle)
        pen = "".join(SGR.findall("\r\n".join(lines[rows:tail]))) if plain is not text else ""
        self._write((pen + "\r\n".join(lines[tail:]) + "\r\n").encode(), harvest=False)
        self._skip_history()  # what the last screenful pushed into Ghostty's history is copied already

    def _fitting(self, data: bytes, start: int) -> bytes:
        """What to write now of ``data`` from ``start``: the rows it can scroll fit in Ghostty's history beside the
        mark."""
        room = self._history_rows - 2
        chunk = data[start : start + self._slice]
        scrolls = 1
        while len(chunk) > 1:
            scrolls = max_scrolls(chunk, self._cols, room)
            if scrolls <= room:
                break
            chunk = chunk[: max(1, min(len(chunk) - 1, len(chunk) * room // scrolls))]
        # Output changes its kind slowly: the next slice is what would fit at this one's density, less a margin so
        # that it is counted once, not cut and counted again.
        if len(data) - start > len(chunk):
            self._slice = max(1, min(SLICE, len(chunk) * room * 7 // (8 * max(scrolls, 1))))
        return chunk

    def _harvest(self) -> None:
        """Copy the rows that scrolled into Ghostty's history since the last harvest to scrollback."""
        if self._alt_active():
            return  # the alternate screen has no history, and the main screen's cannot grow meanwhile
        handle = self._handle
        lib.ghostty_terminal_get(handle, lib.GHOSTTY_TERMINAL_DATA_SCROLLBACK_ROWS, self._count)
        total = int(self._count[0])
        first = 0
        mark = self._mark[0]
        # No longer there: its row was dropped, with rows never copied (what writes are cut to prevent).
        if mark and lib.ghostty_tracked_grid_ref_has_value(mark):
            lib.ghostty_tracked_grid_ref_point(mark, lib.GHOSTTY_POINT_TAG_SCREEN, self._coord)
            first = int(self._coord.y) + 1
        if total > first:
            self._scroll_off(lib.GHOSTTY_POINT_TAG_HISTORY, first, total)
            self._mark_row(total - 1)

    def _mark_row(self, y: int) -> None:
        """Mark history row ``y`` (and all before it) as copied."""
        point = self._point
        point.tag, point.value.x, point.value.y = lib.GHOSTTY_POINT_TAG_HISTORY, 0, y
        if self._mark[0]:
            TRACK_SET(self._mark[0], self._handle, point[0])
        else:
            TRACK(self._handle, point[0], self._mark)

    def _skip_history(self) -> None:
        """Mark all of Ghostty's history as copied."""
        lib.ghostty_terminal_get(self._handle, lib.GHOSTTY_TERMINAL_DATA_SCROLLBACK_ROWS, self._count)
        if self._count[0]:
            self._mark_row(int(self._count[0]) - 1)

    def _erase_history(self, *, force: bool = False) -> None:
        """Erase Ghostty's history (ED 3): copied already, or (``force``) rows not to copy."""
        if self._alt_active():
            return
        lib.ghostty_terminal_get(self._handle, lib.GHOSTTY_TERMINAL_DATA_VT_GROUND, self._ground)
        if not self._ground[0]:  # mid-sequence, ED 3 would become part of it: the page stays until later
            if force:
                self._skip_history()
            return
        lib.ghostty_terminal_vt_write(self._handle, _ERASE_HISTORY, len(_ERASE_HISTORY))
        _unmark(self._mark)

    def _alt_active(self) -> bool:
        lib.ghostty_terminal_get(self._handle, lib.GHOSTTY_TERMINAL_DATA_ACTIVE_SCREEN, self._screen_tag)
        return bool(self._screen_tag[0] == lib.GHOSTTY_TERMINAL_SCREEN_ALTERNATE)

    # --- reading ---------------------------------------------------------------------------------------

    def _scroll_off(self, tag: int, start: int, end: int, *, trim: bool = False) -> None:
        """Rows ``[start, end)`` of ``tag`` go to scrollback, with which of them soft-wrapped."""
        rows = self.read_rows(tag, start, end)
        if trim:
            rows = _trimmed(rows)
        self._scrolled_off(rows, self.read_wraps(tag, start, rows))

    def read_wraps(self, tag: int, start: int, rows: list[str]) -> list[tuple[int, int]]:
        """(index, width) of ``rows`` (read from row ``start`` of ``tag``) that continue on the next row. A row
        wraps when a character is written past its last cell, which is written then: only rows about as wide as
        the screen are asked of Ghostty (a few C calls each), so a flood of shorter lines costs nothing. A wrapped
        row ending in more than ``WRAP_SLACK`` blanks is taken as ending there."""
        cols = self._cols
        near = cols - WRAP_SLACK
        found: list[tuple[int, int]] = []
        point, ref, row, wrap = self._point, self._ref, self._row, self._wrap
        for index, text in enumerate(rows):
            if len(text) < near and (text.isascii() or 2 * len(text) < near):
                continue
            point.tag, point.value.x, point.value.y = tag, 0, start + index
            GRID_REF(self._handle, point[0], ref)
            lib.ghostty_grid_ref_row(ref, row)
            lib.ghostty_row_get(row[0], lib.GHOSTTY_ROW_DATA_WRAP, wrap)
            if wrap[0]:
                found.append((index, cols))
        return found

    def _screen_wraps(self, start: int, end: int) -> list[int]:
        if self.main_screen is not None:  # the main screen's rows are a copy while a full-screen program runs
            return [y for y in self.main_wraps if start <= y < end]
        rows = self.current_screen().main_rows(start, end)
        return [start + index for index, _ in self.read_wraps(lib.GHOSTTY_POINT_TAG_ACTIVE, start, rows)]

    def _active_wraps(self, rows: list[str]) -> list[int]:
        return [index for index, _ in self.read_wraps(lib.GHOSTTY_POINT_TAG_ACTIVE, 0, rows)]

    def read_rows(self, tag: int, start: int, end: int) -> list[str]:
        """Rows ``[start, end)`` of the active screen (``GHOSTTY_POINT_TAG_ACTIVE``) or of Ghostty's history
        (``..._HISTORY``), as text."""
        if end <= start:
            return []
        sel, point = self._sel, self._point
        point.tag, point.value.x, point.value.y = tag, 0, start
        GRID_REF(self._handle, point[0], self._ref)
        sel.start = self._ref[0]
        point.value.x, point.value.y = self._cols - 1, end - 1
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

    def title(self) -> str:
        out = ffi.new("GhosttyString*")
        lib.ghostty_terminal_get(self._handle, lib.GHOSTTY_TERMINAL_DATA_TITLE, out)
        return ffi.buffer(out.ptr, out.len)[:].decode(errors="replace") if out.len else ""

    def current_screen(self) -> GhosttyScreen:
        if self._screen is None:
            self._screen = GhosttyScreen(self)
        return self._screen

    # --- handover ----------------------------------------------------------------------------------------

    def _dump_screen(self) -> bytes:
        self._harvest()
        lib.ghostty_terminal_vt_write(self._handle, _ERASE_HISTORY, len(_ERASE_HISTORY))  # copied out above
        _unmark(self._mark)
        self._screen = None
        return _vt_dump(self._handle)

    def _main_under_alt(self) -> tuple[list[str], tuple[int, int]] | None:
        if self.main_screen is None:
            return None
        return list(self.main_screen[0]), (0, self.main_screen[1])

    def _replay(self, data: bytes, state: TerminalState) -> None:
        self.vt.on_reply(None)
        try:
            self._write(data, harvest=False)
            lib.ghostty_terminal_vt_write(self._handle, _ERASE_HISTORY, len(_ERASE_HISTORY))
        finally:
            self.vt.on_reply(self._on_reply)
        _unmark(self._mark)
        self._screen = None
        if state.main_rows is not None and self._alt_active():
            rows = (state.main_rows + [""] * self._rows)[: self._rows]
            self.main_screen = (rows, (state.main_cursor or (0, 0))[1])
            self.main_wraps = [y for y in state.main_wraps or () if y < self._rows]

    # --- geometry ----------------------------------------------------------------------------------------

    def resize(self, cols: int, rows: int) -> None:
        self.process(float("inf"))
        self.settle()  # rows copied already must not be reflowed into rows that look new
        self.vt.resize(cols, rows)
        old_cols = self._cols
        self._cols, self._rows = cols, rows
        self._history_rows = self._size_history(cols, rows)
        self._generation += 1
        self._screen = None
        if self.main_screen is not None:
            main, y = self.main_screen
            top = max(0, y - (rows - 1))
            kept = [row[:cols] for row in main[top : top + rows]]
            self.main_screen = (kept + [""] * (rows - len(kept)), y - top)  # a taller screen: blank rows below
            # A wrapped row no longer fills a wider or narrower row: only a height change keeps the flags.
            same_width = cols == old_cols
            self.main_wraps = [w - top for w in self.main_wraps if same_width and top <= w < top + rows]
        self._harvest()

    @property
    def cols(self) -> int:
        return self._cols

    @property
    def rows(self) -> int:
        return self._rows

    @property
    def alt_screen(self) -> bool:
        return self._alt_active()

    @property
    def app_cursor_keys(self) -> bool:
        return bool(self.vt.mode(_DECCKM))

    def _size_history(self, cols: int, rows: int) -> int:
        cap, held = history_size(cols, rows)
        set_size(self._handle, lib.GHOSTTY_TERMINAL_OPT_SCROLLBACK_MAX_BYTES, cap)
        return held


def _unmark(mark: Any) -> None:
    if mark[0]:
        _GRID_REF_FREE(mark[0])
        mark[0] = ffi.NULL


# A dropped terminal's finalizer runs wherever the collector happens to run: possibly inside cffi while it holds
# its (non-reentrant) lock to parse a type, where looking up a library function would deadlock the daemon, or
# inside a Ghostty call on another terminal (a reply callback). So it only queues the terminal, which is freed
# at the next entry into this engine. The functions are looked up once, here.
_GRID_REF_FREE = lib.ghostty_tracked_grid_ref_free
_TERMINAL_FREE = lib.ghostty_terminal_free
_dropped: list[tuple[Any, Any]] = []


def _drop(mark: Any, terminal: Any) -> None:
    _dropped.append((mark, terminal))


def free_dropped() -> None:
    """Free the terminals dropped since the last call (their marks first: they point into them)."""
    while _dropped:
        mark, terminal = _dropped.pop()
        _unmark(mark)
        _TERMINAL_FREE(terminal)


def _vt_dump(handle: Any) -> bytes:
    """Ghostty's own VT formatter over the whole terminal: cells with their styles, modes, scroll region, tab
    stops, charsets and the cursor (the palette is left out: ptyd never changes it)."""
    opts = init_sized("GhosttyFormatterTerminalOptions")
    opts.emit = lib.GHOSTTY_FORMATTER_FORMAT_VT
    opts.unwrap, opts.trim = True, False
    extra = opts.extra
    extra.size = ffi.sizeof("GhosttyFormatterTerminalExtra")
    extra.modes = extra.scrolling_region = extra.tabstops = extra.pwd = extra.keyboard = True
    extra.screen.size = ffi.sizeof("GhosttyFormatterScreenExtra")
    screen = extra.screen
    screen.cursor = screen.style = screen.hyperlink = screen.protection = screen.kitty_keyboard = True
    screen.charsets = True
    formatter = ffi.new("GhosttyFormatter*")
    if lib.ghostty_formatter_terminal_new(ffi.NULL, formatter, handle, opts[0]) != lib.GHOSTTY_SUCCESS:
        raise RuntimeError("libghostty-vt could not create a formatter")
    try:
        size = 64 * 1024
        while True:
            buf = ffi.new("uint8_t[]", size)
            written = ffi.new("size_t*")
            result = lib.ghostty_formatter_format_buf(formatter[0], buf, size, written)
            if result != lib.GHOSTTY_OUT_OF_SPACE:
                break
            size = max(2 * size, int(written[0]))
        if result != lib.GHOSTTY_SUCCESS:
            raise RuntimeError(f"libghostty-vt could not format the screen ({result})")
        return bytes(ffi.buffer(buf, written[0]))
    finally:
        lib.ghostty_formatter_free(formatter[0])


def _trimmed(rows: list[str]) -> list[str]:
    end = len(rows)
    while end and not rows[end - 1]:
        end -= 1
    return rows[:end]
