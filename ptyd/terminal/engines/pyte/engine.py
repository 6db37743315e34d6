"""The pure-Python engine: pyte behind a sanitizer, with a fast path for floods of plain lines.

pyte renders at 0.5-2 MB/s while a PTY delivers ~70 MB/s, so output is split into two kinds as it arrives:

- *plain* runs of whole lines (printable ASCII and SGR colour only) on a screen that would simply scroll: only
  their first screenful and last screenful go through pyte (so the cursor state and the final screen are exact);
  the rows in between go straight to scrollback as text, and rows beyond the scrollback bound are only counted.
- everything else goes through pyte, in slices, under a time budget the session's feeder enforces.
"""

from __future__ import annotations

import codecs
import contextlib
import re
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import final

from ptyd.terminal.emulator import Terminal
from ptyd.terminal.engines.pyte.redraw import DECCKM, pyte_redraw
from ptyd.terminal.engines.pyte.sanitize import Sanitizer
from ptyd.terminal.engines.pyte.screen import TerminalScreen
from ptyd.terminal.engines.pyte.stream import TerminalStream
from ptyd.terminal.plain import SGR, all_plain, rows_of, wraps_of
from ptyd.terminal.replay import TerminalState
from ptyd.terminal.styled import StyledScreen, from_pyte

# Anything that makes a line not plain: non-SGR escapes, controls (tab too), lone CR or LF, non-ASCII.
_NOT_PLAIN = re.compile(r"\x1b(?!\[[0-9;]*m)|[\x00-\x09\x0b\x0c\x0e-\x1f\x7f]|\r(?!\n)|(?<!\r)\n|[^\x00-\x7f]")
# Faster single-class scan, usable when every CR and LF is part of a CRLF; SGR hits are skipped by hand.
_SUSPECT = re.compile(r"[\x00-\x09\x0b\x0c\x0e-\x1f\x7f-\U0010ffff]")
_PYTE_SLICE = 4096  # characters per pyte feed between budget checks
_FAST_MIN_CHARS = 2048
_HOLD_MAX = 64 * 1024  # a longer partial line is rendered rather than held


@final
class PyteTerminal(Terminal):
    engine = "pyte"

    def __init__(
        self,
        cols: int,
        rows: int,
        *,
        scrollback_lines: int,
        scrollback_bytes: int,
        on_reply: Callable[[bytes], None],
        emulator: str = "pyte",
    ) -> None:
        super().__init__(
            cols, rows, scrollback_lines=scrollback_lines, scrollback_bytes=scrollback_bytes, on_reply=on_reply
        )
        self._sanitizer = Sanitizer()
        self.screen = TerminalScreen(cols, rows, self._scrolled_off, self._reply, answers=self._sanitizer.answers)
        self._stream = TerminalStream(self.screen)
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._queue: deque[tuple[bool, str]] = deque()  # (plain, text) not yet rendered
        # The last screenful of a fast-forwarded run, not yet drawn: the screen is blank phantom rows with the
        # cursor at the bottom. Drawn only when something looks at the screen or non-plain output follows, so
        # a flood of plain lines never goes through pyte at all.
        self._deferred: list[str] | None = None
        # A partial last line of plain output held back while more output is on its way: queued alone it would
        # go through pyte (and draw the deferred screenful) once per read, only to be completed by the next.
        self._held = ""

    # --- input -------------------------------------------------------------------------------------------

    def feed(self, data: bytes, *, more: bool = False) -> None:
        clean = self._sanitizer.filter(self._decoder.decode(data))
        if self._held:
            clean, self._held = self._held + clean, ""
        if clean:
            self._split(clean, more)

    def flush(self) -> None:
        if self._held:
            self._queue.append((False, self._held))
            self.backlog += len(self._held)
            self._held = ""

    def _split(self, text: str, more: bool = False) -> None:
        """Queue ``text`` as alternating plain and pyte segments, cut at line ends."""
        self.backlog += len(text)
        if len(text) < _FAST_MIN_CHARS:
            self._queue.append((False, text))
            return
        if all_plain(text):  # the common case, checked at C speed
            self._queue_plain(text, 0, more)
            return
        crlf = text.count("\r\n")
        paired = text.count("\r") == crlf and text.count("\n") == crlf
        pos = 0
        for start, end in _not_plain(text, paired):
            if start < pos:
                continue
            line_start = text.rfind("\r\n", pos, start)
            line_start = pos if line_start < 0 else line_start + 2
            line_end = text.find("\r\n", end)
            line_end = len(text) if line_end < 0 else line_end + 2
            if line_start > pos:
                self._queue.append((True, text[pos:line_start]))
            self._queue.append((False, text[line_start:line_end]))
            pos = line_end
        if pos < len(text):
            self._queue_plain(text, pos, more)

    def _queue_plain(self, text: str, pos: int, more: bool) -> None:
        """Queue plain ``text[pos:]``: its whole lines for fast-forward, a partial last line for pyte (or held,
        when more output is on its way and will likely complete it)."""
        cut = text.rfind("\r\n", pos) + 2
        if cut > pos + 1:
            self._queue.append((True, text[pos:cut]))
            pos = cut
        if pos < len(text):
            if more and cut > 1 and len(text) - pos <= _HOLD_MAX:
                self._held = text[pos:]
                self.backlog -= len(self._held)
            else:
                self._queue.append((False, text[pos:]))

    def process(self, budget_s: float) -> bool:
        deadline = time.monotonic() + budget_s
        queue = self._queue
        if queue:
            self._generation += 1
        while queue:
            plain, text = queue[0]
            if plain:
                queue.popleft()
                self.backlog -= len(text)
                self._fast_forward(text)
            elif len(text) > _PYTE_SLICE:
                queue[0] = (False, text[_PYTE_SLICE:])
                self.backlog -= _PYTE_SLICE
                self._pyte(text[:_PYTE_SLICE])
            else:
                queue.popleft()
                self.backlog -= len(text)
                self._pyte(text)
            if time.monotonic() >= deadline:
                break
        return bool(queue)

    @property
    def idle(self) -> bool:
        return not self._queue and not self._held

    def _pyte(self, text: str) -> None:
        if self._deferred is not None:
            self._draw_deferred()
        # pyte must never take the session down (e.g. ValueError on a digit run past CPython's int limit);
        # its parser resets itself after an exception.
        with contextlib.suppress(Exception):
            self._stream.feed(text)

    def _draw_deferred(self) -> None:
        tail, self._deferred = self._deferred, None
        if tail:
            self._generation += 1
            self._pyte("\r\n".join(tail) + "\r\n")  # scrolls the phantom rows away, silently
        self.screen.phantom_rows = 0

    def _fast_forward(self, text: str) -> None:
        screen = self.screen
        rows, cols = screen.lines, screen.columns
        if "\x1b" in text:
            text = SGR.sub("", text)
        lines = text.split("\r\n")
        lines.pop()  # text ends with CRLF
        strip = " \r\n" in text
        if self._deferred is not None:
            # The screen holds only phantom rows: the deferred lines and these form one run of plain lines.
            lines = self._deferred + lines
            self._deferred = None
            self._push_plain(lines[: -(rows - 1)], cols, strip or any(line.endswith(" ") for line in lines[:rows]))
            self._deferred = lines[-(rows - 1) :]
            return
        lead = rows - screen.cursor.y + 1
        if not screen.fast_forward_ok or len(lines) < lead + rows + 8:
            self._pyte(text)
            return
        # Exact for the first lines: afterwards the cursor sits at column 0 of a freshly scrolled bottom row.
        self._pyte("\r\n".join(lines[:lead]) + "\r\n")
        if screen.cursor.y != rows - 1 or screen.cursor.x != 0 or not screen.fast_forward_ok:
            self._pyte("\r\n".join(lines[lead:]) + "\r\n")
            return
        # The rows above the cursor scroll off first, then every row of the middle.
        self._scrolled_off(
            [screen.row_text(y) for y in range(rows - 1)], [(y, cols) for y in screen.main_wraps(0, rows - 1)]
        )
        self._push_plain(lines[lead : -(rows - 1)], cols, strip)
        # The last screenful is drawn later (``_draw_deferred``); the blank rows now above the cursor must not
        # reach scrollback when it scrolls them away.
        screen.buffer.clear()
        screen.phantom_rows = rows - 1
        self._deferred = lines[-(rows - 1) :]

    def _push_plain(self, middle: list[str], cols: int, strip: bool) -> None:
        """Plain lines that scrolled off the screen: to scrollback, or only counted beyond its bound."""
        keep = self.scrollback.max_lines
        if len(middle) > keep:
            dropped, middle = middle[:-keep], middle[-keep:]
            self._skipped(dropped, cols, strip)
        self._scrolled_off(rows_of(middle, cols, strip), wraps_of(middle, cols))

    def _skipped(self, lines: list[str], cols: int, strip: bool) -> None:
        """Count rows that would be dropped by the scrollback bound anyway, without rendering them."""
        capture = self.capture
        first = self.scrollback.total
        for i in range(0, len(lines), 256):  # rendered only while the capture has room
            if capture is None or capture.room <= 0:
                break
            rows = rows_of(lines[i : i + 256], cols, strip)
            capture.offer(first, rows)
            first += len(rows)
        wide = max(map(len, lines)) > cols
        self.scrollback.skip(sum(max(1, -(-len(line) // cols)) for line in lines) if wide else len(lines))

    def _reply(self, data: str) -> None:
        self._on_reply(data.encode())

    # --- handover ----------------------------------------------------------------------------------------

    def _dump_screen(self) -> bytes:
        return pyte_redraw(self.current_screen())

    def _main_under_alt(self) -> tuple[list[str], tuple[int, int]] | None:
        screen = self.current_screen()
        if not screen.alt:
            return None
        return screen.main_rows(), (0, screen.main_cursor_y)

    def _replay(self, data: bytes, state: TerminalState) -> None:
        screen = self.screen
        scroll_off, reply = screen._on_scroll_off, screen._on_reply
        screen._on_scroll_off = lambda _rows, _wraps: None
        screen._on_reply = lambda _data: None
        try:
            self._stream.feed(data.decode(errors="replace"))
        finally:
            screen._on_scroll_off, screen._on_reply = scroll_off, reply
        self._generation += 1

    # --- geometry ----------------------------------------------------------------------------------------

    def resize(self, cols: int, rows: int) -> None:
        self.process(float("inf"))
        self.current_screen()
        self._generation += 1
        self.screen.resize(rows, cols)

    def _screen_wraps(self, start: int, end: int) -> list[int]:
        return self.current_screen().main_wraps(start, end)

    def _active_wraps(self, rows: list[str]) -> list[int]:
        return self.current_screen().active_wraps()

    def current_screen(self) -> TerminalScreen:
        if self._deferred is not None:
            self._draw_deferred()
        return self.screen

    def styled(self) -> StyledScreen:
        return from_pyte(self.current_screen())

    @property
    def cols(self) -> int:
        return int(self.screen.columns)

    @property
    def rows(self) -> int:
        return int(self.screen.lines)

    @property
    def alt_screen(self) -> bool:
        return bool(self.screen.alt)

    @property
    def app_cursor_keys(self) -> bool:
        return DECCKM in self.screen.mode


def _not_plain(text: str, paired: bool) -> Iterator[tuple[int, int]]:
    """Spans of what makes a line not plain, in order."""
    if not paired:
        for m in _NOT_PLAIN.finditer(text):
            yield m.span()
        return
    for m in _SUSPECT.finditer(text):
        start = m.start()
        if text[start] == "\x1b" and SGR.match(text, start):
            continue
        yield start, m.end()
