"""The native engine: libghostty-vt, Ghostty's VT core, through pyghostty's cffi binding.

Ghostty parses and draws at a few hundred MB/s, answers queries (DSR, DA, colours) itself, and gets right what
pyte needed a sanitizer for (strings, C0 inside CSI, NEL, intermediates). What stays ours is the transcript:

- Rows that scroll into Ghostty's own scrollback are copied out as text after each write, into ptyd's numbered,
  memory-bounded ``Scrollback``. Ghostty keeps about a page of history (254-542 rows at 160 columns: measured
  once per size with a scratch terminal, ``history_rows``), so each write is cut to scroll at most what still
  fits (newlines counted at C speed), and the history is erased (ED 3) once half full and its parser is between
  sequences. Erasing costs ~0.3 ms (Ghostty reallocates the
  page), the one cost here that grows with output that scrolls.
- A few sequences are acted on before Ghostty sees them, split out of the stream as output is queued: ED 2 on the
  main screen (``clear``) and RIS first move the screen's rows into scrollback, ED 3 from the program erases
  nothing of the transcript, and entering the alternate screen keeps a copy of the main screen's rows (Ghostty
  only reads the active screen) for the transcript while a full-screen program runs. DECSTR (soft reset), which
  Ghostty ignores, becomes the sequences it stands for.
"""

from __future__ import annotations

import re
import time
from collections import deque
from collections.abc import Callable
from typing import Any, final

import pyghostty
from pyghostty import ffi, lib
from pyghostty.core import init_sized

from ptyd.terminal.emulator import Terminal
from ptyd.terminal.replay import TerminalState
from ptyd.terminal.sanitize import SOFT_RESET

SLICE = 16 * 1024  # bytes per write between budget checks and scrollback harvests (~50 us)
_ERASE_HISTORY = b"\x1b[3J"
# The sequences acted on before Ghostty sees them; a chunk ending in a prefix of one holds it for the next chunk.
_SPECIAL = re.compile(rb"\x1b\[(?:[23]J|\?(?:1049|1047|47)h|!p)|\x1bc")
_SPECIALS = (b"\x1b[2J", b"\x1b[3J", b"\x1b[?1049h", b"\x1b[?1047h", b"\x1b[?47h", b"\x1bc", b"\x1b[!p")
_LONGEST = max(map(len, _SPECIALS))
# Default colours, reported to OSC 10/11 queries: the pyte engine answers the same.
FOREGROUND = (0xE5, 0xE5, 0xE5)
BACKGROUND = (0, 0, 0)
# Ghostty's history is bounded by its byte bound, left at Ghostty's default (one page): with more pages, each
# erase frees and maps them all and writes get ~6x slower. Its line bound is not the one that binds.
_HISTORY_LINES = 1 << 20
_HISTORY_ROWS: dict[tuple[int, int], int] = {}


def history_rows(cols: int, rows: int) -> int:
    """Rows Ghostty's history surely holds at this size: the fewest it keeps once it drops whole pages (measured
    once per size with a scratch terminal, ~2 ms). Fewer than it holds before it first drops any."""
    size = (cols, rows)
    if size not in _HISTORY_ROWS:
        scratch = pyghostty.Terminal(cols, rows, scrollback=_HISTORY_LINES)
        held = []
        for _ in range(200):
            scratch.feed(b"x\r\n" * 50)
            held.append(int(scratch.get("scrollback_rows", "size_t")))
        _HISTORY_ROWS[size] = max(min(held[len(held) // 5 :]), 8)
        scratch.close()
    return _HISTORY_ROWS[size]


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
            self._rows = self._term.read_rows("active", 0, self.lines)
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
        self.vt: Any = pyghostty.Terminal(cols, rows, scrollback=_HISTORY_LINES, fg=FOREGROUND, bg=BACKGROUND)
        self.vt.on_reply(on_reply)
        self._handle = self.vt._t[0]
        pull = ffi.new("bool*", False)  # a growing screen must not take rows back from the (erased) history
        lib.ghostty_terminal_set(self._handle, lib.GHOSTTY_TERMINAL_OPT_RESIZE_PULL_SCROLLBACK, pull)
        # Grapheme clustering (mode 2027): a cluster is one cell of the width wcwidth gives it, as in the pyte
        # engine (VS16, ZWJ sequences, skin tones and flags are one 2-column cell).
        lib.ghostty_terminal_vt_write(self._handle, b"\x1b[?2027h", 8)
        self._cols, self._rows = cols, rows
        self._queue: deque[bytes | int] = deque()  # output, and the index in _SPECIALS of a sequence to act on
        self._tail = b""  # a possible start of a special sequence, completed by the next chunk
        self._taken = 0  # rows of Ghostty's history already copied to scrollback
        self._history_rows = history_rows(cols, rows)
        self.main_screen: tuple[list[str], int] | None = None  # main rows and cursor row, while alt is active
        self._screen: GhosttyScreen | None = None
        self._fmt = init_sized("GhosttyTerminalSelectionFormatOptions")
        self._fmt.emit = lib.GHOSTTY_FORMATTER_FORMAT_PLAIN
        self._fmt.unwrap, self._fmt.trim = False, True
        self._sel = init_sized("GhosttySelection")
        self._fmt.selection = self._sel
        self._buf = ffi.new("uint8_t[]", 64 * 1024)
        self._written = ffi.new("size_t*")
        self._ground = ffi.new("bool*")
        self._count = ffi.new("size_t*")

    # --- input -----------------------------------------------------------------------------------------

    def feed(self, data: bytes, *, more: bool = False) -> None:
        if self._tail:
            data, self._tail = self._tail + data, b""
        esc = data.rfind(b"\x1b", max(0, len(data) - _LONGEST))
        if esc >= 0 and any(s.startswith(data[esc:]) and len(s) > len(data) - esc for s in _SPECIALS):
            data, self._tail = data[:esc], data[esc:]
        pos = 0
        if b"\x1b" in data:
            for m in _SPECIAL.finditer(data):
                if m.start() > pos:
                    self._queue.append(data[pos : m.start()])
                self._queue.append(_SPECIALS.index(m.group()))
                pos = m.end()
        if pos < len(data):
            self._queue.append(data[pos:] if pos else data)
        self.backlog += len(data)

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
            if isinstance(item, int):
                queue.popleft()
                self._special(_SPECIALS[item])
                self.backlog -= len(_SPECIALS[item])
            else:
                size = self._fitting(item[:SLICE])
                if len(item) > size:
                    queue[0], item = item[size:], item[:size]
                else:
                    queue.popleft()
                self._write(item)
                self.backlog -= len(item)
            if time.monotonic() >= deadline:
                break
        return bool(queue)

    @property
    def idle(self) -> bool:
        return not self._queue

    def _write(self, data: bytes, *, harvest: bool = True) -> None:
        lib.ghostty_terminal_vt_write(self._handle, data, len(data))
        self.vt._raise_cb_err()
        if harvest:
            self._harvest()
        if self.main_screen is not None and not self._alt_active():
            self.main_screen = None

    def _special(self, seq: bytes) -> None:
        if seq == b"\x1b[!p":  # DECSTR, which Ghostty ignores: the modes it resets, as the pyte engine does
            x, y = self.vt.cursor
            self._write(SOFT_RESET.encode() + f"\x1b[{y + 1};{x + 1}H".encode())  # DECSTBM homed the cursor
            return
        if seq == b"\x1b[3J":  # the program erases the terminal's scrollback: the transcript stays
            self._harvest()
            return
        if self._alt_active():
            if seq == b"\x1bc" and self.main_screen is not None:
                self._scrolled_off(_trimmed(self.main_screen[0]))
                self.main_screen = None
        elif seq in (b"\x1b[2J", b"\x1bc"):
            self._harvest()
            self._scrolled_off(_trimmed(self.read_rows("active", 0, self._rows)))
            # The rows are in scrollback now, whatever Ghostty does with them: any it pushes to its history go.
            self._write(seq, harvest=False)
            self._write(_ERASE_HISTORY, harvest=False)
            self._taken = 0
            return
        else:  # entering the alternate screen
            self.main_screen = (self.read_rows("active", 0, self._rows), int(self.vt.cursor[1]))
        self._write(seq)

    def _fitting(self, data: bytes) -> int:
        """How much of ``data`` to write so that the rows it can scroll fit in Ghostty's history."""
        room = max(self._history_rows - self._taken, 1)
        while len(data) > 1:
            scrolls = (
                data.count(b"\n") + data.count(b"\x0b") + data.count(b"\x0c") + data.count(b"\x1bD")
                + data.count(b"\x1bE") + len(data) // self._cols + 1
            )  # fmt: skip
            if scrolls <= room:
                break
            data = data[: max(1, len(data) * room // scrolls // 2)]
        return len(data)

    def _harvest(self) -> None:
        """Copy rows that scrolled into Ghostty's history to scrollback, then erase its copy."""
        handle = self._handle
        lib.ghostty_terminal_get(handle, lib.GHOSTTY_TERMINAL_DATA_SCROLLBACK_ROWS, self._count)
        total = int(self._count[0])
        if total < self._taken:
            self._taken = 0
        if total > self._taken:
            self._scrolled_off(self.read_rows("history", self._taken, total))
            self._taken = total
        if total >= self._history_rows // 2:
            lib.ghostty_terminal_get(handle, lib.GHOSTTY_TERMINAL_DATA_VT_GROUND, self._ground)
            if self._ground[0]:  # mid-sequence, ED 3 would become part of it: erase after a later slice
                lib.ghostty_terminal_vt_write(handle, _ERASE_HISTORY, len(_ERASE_HISTORY))
                self._taken = 0

    def _alt_active(self) -> bool:
        return bool(self.vt.get("active_screen", "int") == lib.GHOSTTY_TERMINAL_SCREEN_ALTERNATE)

    # --- reading ---------------------------------------------------------------------------------------

    def read_rows(self, tag: str, start: int, end: int) -> list[str]:
        """Rows ``[start, end)`` of the active screen ("active") or of Ghostty's history, as text."""
        if end <= start:
            return []
        sel = self._sel
        sel.start = self.vt.ref(0, start, tag)[0]
        sel.end = self.vt.ref(self._cols - 1, end - 1, tag)[0]
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
        self._taken = 0
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
        self._taken = 0
        self._screen = None
        if state.main_rows is not None and self._alt_active():
            rows = (state.main_rows + [""] * self._rows)[: self._rows]
            self.main_screen = (rows, (state.main_cursor or (0, 0))[1])

    # --- geometry ----------------------------------------------------------------------------------------

    def resize(self, cols: int, rows: int) -> None:
        self.process(float("inf"))
        self.vt.resize(cols, rows)
        self._cols, self._rows = cols, rows
        self._history_rows = history_rows(cols, rows)
        self._generation += 1
        self._screen = None
        if self.main_screen is not None:
            main, y = self.main_screen
            top = max(0, y - (rows - 1))
            self.main_screen = ([row[:cols] for row in main[top : top + rows]], y - top)
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


def _vt_dump(handle: Any) -> bytes:
    """Ghostty's own VT formatter over the whole terminal: cells with their styles, modes, scroll region, tab
    stops, charsets and the cursor (the palette is left out: ptyd never changes it)."""
    opts = init_sized("GhosttyFormatterTerminalOptions")
    opts.emit = lib.GHOSTTY_FORMATTER_FORMAT_VT
    opts.unwrap, opts.trim = False, False
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
