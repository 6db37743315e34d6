"""A send's named wait: ``until`` (a pattern in the output since the send) and ``until_stable_ms`` (a screen that
stopped changing), checked on rendered lines as they arrive.

Lines that left the screen are final: each is searched once, as scrollback grows. Rows still on the screen may be
redrawn (a progress bar, a cursor moving up), so the rows from the scan's start to the cursor are searched again
whenever the screen changed: at most a screenful per check, however long the output. Checks come at the send's
probe cadence (every few ms at most while output pours in), so a flood costs one search per line in all.
"""

from __future__ import annotations

import re
import time
from typing import final

from ptyd import protocol as p
from ptyd.terminal.emulator import Terminal


@final
class NamedWait:
    def __init__(
        self, until: re.Pattern[str] | None, stable_s: float | None, terminal: Terminal, anchor: int, typed: bool
    ) -> None:
        self.until = until
        self.stable_s = stable_s
        # The line the input is echoed on (the prompt and the command) is not output of the command. Without
        # input, that line counts once it changed.
        self._scanned = anchor + 1 if typed else anchor
        self._anchor_text = None if typed else _line(terminal, anchor)
        self._anchor = anchor
        self._seen_generation = -1
        self._screen_key: tuple[int, int, int, int] | None = None
        self.stable_since = time.monotonic()
        self.match: p.SendMatch | None = None

    def check(self, terminal: Terminal) -> p.WaitReason | None:
        """``matched`` or ``stable`` once the wait is over, else None."""
        now = time.monotonic()
        changed = terminal.generation != self._seen_generation
        self._seen_generation = terminal.generation
        if self.until is not None and self._scan(terminal, changed):
            return "matched"
        if self.stable_s is not None:
            if changed:
                key = _screen_key(terminal)
                if key != self._screen_key:
                    self._screen_key = key
                    self.stable_since = now
            if now - self.stable_since >= self.stable_s:
                return "stable"
        return None

    def next_due(self) -> float | None:
        """When the stable condition could next be met (monotonic time), if one is named."""
        return None if self.stable_s is None else self.stable_since + self.stable_s

    def _scan(self, terminal: Terminal, changed: bool) -> bool:
        pattern = self.until
        assert pattern is not None
        if terminal.alt_screen:  # a full-screen program: its screen is the output
            if changed:
                for row in terminal.visible_rows():
                    if (m := pattern.search(row)) is not None:
                        self.match = p.SendMatch(text=m.group(), line=None)
                        return True
            return False
        sb = terminal.scrollback
        start = max(self._scanned, sb.first)
        if start < sb.total:  # final lines, searched once
            if self._search(terminal, start, sb.total):
                return True
            self._scanned = sb.total
            start = sb.total
        if not changed:
            return False
        return self._search(terminal, start, terminal.cursor_line + 1)  # rows on the screen: again while they change

    def _search(self, terminal: Terminal, start: int, end: int) -> bool:
        pattern = self.until
        assert pattern is not None
        for number, line in enumerate(terminal.transcript(start, end), start):
            if number == self._anchor and self._anchor_text is not None:
                if line == self._anchor_text:
                    continue
                self._anchor_text = None  # it changed: from now on it is output like any other line
            if (m := pattern.search(line)) is not None:
                self.match = p.SendMatch(text=m.group(), line=number)
                return True
        return False


def _line(terminal: Terminal, number: int) -> str:
    lines = terminal.transcript(number, number + 1)
    return lines[0] if lines else ""


def _screen_key(terminal: Terminal) -> tuple[int, int, int, int]:
    """What the screen shows, in a few ints: its rows' hash, the cursor, and which screen."""
    screen = terminal.current_screen()
    return hash(tuple(screen.visible_rows())), int(screen.cursor.x), int(screen.cursor.y), int(terminal.alt_screen)
