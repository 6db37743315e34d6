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
  Ghostty ignores, becomes the sequences it stands for; so does TBC with its parameter omitted.

The queue of output is ``output``'s; reading rows and the screen is ``screen``'s; the handover's redraw is
``redraw``'s; freeing dropped terminals is ``lifetime``'s.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable
from typing import Any, final

import pyghostty
from pyghostty import ffi, lib

from ptyd.terminal import reports
from ptyd.terminal.emulator import Terminal
from ptyd.terminal.engines.ghostty.history import HISTORY_LINES, TRACK, TRACK_SET, history_size, max_scrolls, set_size
from ptyd.terminal.engines.ghostty.lifetime import drop, dropped, free_dropped, unmark
from ptyd.terminal.engines.ghostty.output import Coloured, OutputQueue
from ptyd.terminal.engines.ghostty.redraw import vt_dump
from ptyd.terminal.engines.ghostty.screen import GhosttyScreen, Grid
from ptyd.terminal.engines.ghostty.styled import from_ghostty
from ptyd.terminal.plain import SGR, after_lines, joined_rows_of, last_lines, longer_than, rows_of
from ptyd.terminal.replay import TerminalState
from ptyd.terminal.styled import StyledScreen

SLICE = 64 * 1024  # bytes per write between budget checks (~0.2 ms); scrolling output is cut finer
_ERASE_HISTORY = b"\x1b[3J"
_DECCKM = 1  # application cursor keys
_DECLRMM = 69  # left and right margins: lines would wrap and scroll inside them
_REP_MAX = 65535  # Ghostty's bound on REP's count
# Default colours, reported to OSC 10/11 queries: the pyte engine answers the same.
FOREGROUND = (0xE5, 0xE5, 0xE5)
BACKGROUND = (0, 0, 0)


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
        weakref.finalize(self, drop, self._mark, handle)
        free_dropped()
        pull = ffi.new("bool*", False)  # a growing screen must not take rows back from the (erased) history
        lib.ghostty_terminal_set(self._handle, lib.GHOSTTY_TERMINAL_OPT_RESIZE_PULL_SCROLLBACK, pull)
        # Grapheme clustering (mode 2027): a cluster is one cell of the width wcwidth gives it, as in the pyte
        # engine (VS16, ZWJ sequences, skin tones and flags are one 2-column cell).
        lib.ghostty_terminal_vt_write(self._handle, b"\x1b[?2027h", 8)
        self._cols, self._rows = cols, rows
        self._output = OutputQueue()
        self._head = 0  # bytes of the queue's first item written already
        self._slice = SLICE  # bytes to try writing at once: what fits at the density of the last write
        self._history_rows = self._size_history(cols, rows)
        self.main_screen: tuple[list[str], int] | None = None  # main rows and cursor row, while alt is active
        self.main_wraps: list[int] = []  # ...and which of those rows soft-wrapped
        self._screen: GhosttyScreen | None = None
        self._grid = Grid(self._handle)
        self._ground = ffi.new("bool*")
        self._count = ffi.new("size_t*")
        self._screen_tag = ffi.new("int*")
        self._width = ffi.new("uint16_t*")

    # --- input -----------------------------------------------------------------------------------------

    def feed(self, data: bytes, *, more: bool = False) -> None:
        if dropped:
            free_dropped()
        self.backlog += self._output.put(data)

    def flush(self) -> None:
        pass  # nothing is held back for speed: Ghostty draws a partial line as fast as a whole one

    def process(self, budget_s: float) -> bool:
        deadline = time.monotonic() + budget_s
        queue = self._output.items
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
        if not self._output.items and self._mark[0]:
            self._erase_history()  # all of it is in scrollback: free its page while the session is quiet

    @property
    def idle(self) -> bool:
        return not self._output.items

    def close(self) -> None:
        """Break the cycles through the session's reply callback (the session holds this terminal) and the cached
        screen: the native terminal is freed when the session drops it, at the next entry into the engine
        (``lifetime``), not at the collector's next full pass, which a worker reaches after thousands of sessions
        (issue 28: ~60 KiB a session). Reads still work until then; nothing is written after a close."""
        self._screen = None
        self.vt.on_reply(None)
        self._on_reply = _ignore_reply

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
        if seq == b"\x1b[g":  # TBC 0 with its parameter omitted, which Ghostty ignores (see ``output``)
            self._write(b"\x1b[0g")
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
        """Plain lines: the first screenful and the last through Ghostty, those between straight to scrollback.
        ASCII is cut where lines end, never split into a list of its lines (``seq``: 125,000 of them a MB), and
        its middle goes to scrollback joined; wider text (a ``tree`` listing) is split, once."""
        plain = SGR.sub("", text) if "\x1b" in text else text
        rows, cols = self._rows, self._cols
        count = text.count("\r\n")  # text ends with CRLF
        if plain.isascii():
            lines = None
            too_long = longer_than(plain, cols)
        else:  # wide characters take two cells: a line that might wrap is left to Ghostty
            lines = plain.split("\r\n")
            too_long = max(map(len, lines)) > cols // 2
        if count < 3 * rows or too_long or self._alt_active() or self.vt.mode(_DECLRMM):
            self._write_all(text.encode())
            return
        head = after_lines(text, rows)
        before = self.scrollback.total
        self._write_all(text[:head].encode())
        if self.scrollback.total == before or self.vt.cursor != (0, rows - 1):  # a scroll region holds the rows
            self._write_all(text[head:].encode())
            return
        tail = last_lines(text, rows - 1)
        # What scrolling the rest through would push off the top: the rows above the cursor, then the middle,
        # every line of it a row of its own (checked above).
        self._scroll_off(lib.GHOSTTY_POINT_TAG_ACTIVE, 0, rows - 1)
        if lines is not None:
            middle = lines[rows : count - (rows - 1)]
            self._scrolled_off(rows_of(middle, cols, strip=True) if " \r\n" in plain else middle)
        elif plain is text:
            self._scrolled_off_joined(joined_rows_of(text[head:tail]))
        else:
            self._scrolled_off_joined(joined_rows_of(plain[after_lines(plain, rows) : last_lines(plain, rows - 1)]))
        pen = "".join(SGR.findall(text, head, tail)) if plain is not text else ""
        self._write((pen + text[tail:]).encode(), harvest=False)
        self._skip_history()  # what the last screenful pushed into Ghostty's history is copied already

    def _fitting(self, data: bytes, start: int) -> bytes:
        """What to write now of ``data`` from ``start``: the rows it can scroll fit in Ghostty's history beside the
        mark."""
        room = self._history_rows - 2
        chunk = data[start : start + self._slice]
        scrolls = 1
        # Only SGR, or no escape at all: no control but CR moves the cursor left, unless margins are set.
        printed = (isinstance(data, Coloured) or b"\x1b" not in chunk) and not self._grid.mode(_DECLRMM)
        while len(chunk) > 1:
            scrolls = max_scrolls(chunk, self._cols, room, printed=printed)
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
        unmark(self._mark)

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
        """(index, width) of ``rows`` (read from row ``start`` of ``tag``) that continue on the next row."""
        return self._grid.wraps(tag, start, rows, self._cols)

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
        return self._grid.rows(tag, start, end, self._cols)

    def title(self) -> str:
        return self._grid.title()

    def cursor_state(self) -> tuple[int, int, bool, bool]:
        return self._grid.cursor()

    def current_screen(self) -> GhosttyScreen:
        if self._screen is None:
            self._screen = GhosttyScreen(self)
        return self._screen

    def styled(self) -> StyledScreen:
        cursor = self.current_screen().cursor
        return from_ghostty(self._handle, self.cols, self.rows, (cursor.x, cursor.y, cursor.hidden))

    # --- handover ----------------------------------------------------------------------------------------

    def _dump_screen(self) -> bytes:
        self._harvest()
        lib.ghostty_terminal_vt_write(self._handle, _ERASE_HISTORY, len(_ERASE_HISTORY))  # copied out above
        unmark(self._mark)
        self._screen = None
        return vt_dump(self._handle)

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
        unmark(self._mark)
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
        return self._grid.mode(_DECCKM)

    def _size_history(self, cols: int, rows: int) -> int:
        cap, held = history_size(cols, rows)
        set_size(self._handle, lib.GHOSTTY_TERMINAL_OPT_SCROLLBACK_MAX_BYTES, cap)
        return held


def _ignore_reply(data: bytes) -> None:
    pass


def _trimmed(rows: list[str]) -> list[str]:
    end = len(rows)
    while end and not rows[end - 1]:
        end -= 1
    return rows[:end]
