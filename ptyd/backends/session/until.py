"""A send's named wait: ``until`` (a pattern in the output since the send) and ``until_stable_ms`` (a screen that
stopped changing), checked on rendered lines as they arrive.

Lines are logical lines: rows the terminal soft-wrapped are joined first, so a long line split by the width still
matches. Lines that left the screen are final: each is searched once, as scrollback grows. Rows still on the
screen may be redrawn (a progress bar, a cursor moving up), so the rows from the scan's start to the cursor are
searched again whenever the screen changed: at most a screenful per check, however long the output. Checks come
at the send's probe cadence (every few ms at most while output pours in), so a flood costs one search per line in all.
"""

from __future__ import annotations

import re
import time
from typing import final

from ptyd import protocol as p
from ptyd.terminal.engine import TerminalEngine
from ptyd.terminal.logical import join


@final
class NamedWait:
    def __init__(
        self,
        until: re.Pattern[str] | None,
        stable_s: float | None,
        anchor: int,
        typed: bool,
        anchor_text: str | None,
        *,
        scan_from: int | None = None,
    ) -> None:
        self.until = until
        self.stable_s = stable_s
        self.typed = typed  # the send wrote input (a command), rather than only waiting
        # The line the input is echoed on (the prompt and the command, however many rows) is not output of the
        # command. Without input, that line counts once it changed.
        # The first row of the first logical line not searched for good: from the output the agent was not shown
        # yet (a line printed between calls matches too).
        self._scanned = anchor if scan_from is None else min(scan_from, anchor)
        self._anchor_text = None if typed else anchor_text  # None with typed: the line is skipped whatever it holds
        self._anchor = anchor
        self._seen_generation = -1
        self._screen_key: tuple[int, int, int, int] | None = None
        self.stable_since = time.monotonic()
        self.match: p.SendMatch | None = None

    def check(self, terminal: TerminalEngine) -> p.WaitReason | None:
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

    def _scan(self, terminal: TerminalEngine, changed: bool) -> bool:
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
        if start < sb.total:  # final lines, searched once; one that goes on onto the screen stays with the screen
            lines, firsts, wraps = _logical(terminal, start, sb.total)
            complete = len(lines) - (1 if sb.total - 1 in wraps else 0)
            if self._search(lines[:complete], firsts[:complete]):
                return True
            self._scanned = firsts[complete] if complete < len(lines) else sb.total
            changed = True
        if not changed:
            return False
        lines, firsts, _ = _logical(terminal, self._scanned, terminal.cursor_line + 1)
        return self._search(lines, firsts)  # rows on the screen: again while they change

    def _search(self, lines: list[str], firsts: list[int]) -> bool:
        pattern = self.until
        assert pattern is not None
        for number, line in zip(firsts, lines, strict=True):
            if number == self._anchor:
                if self._anchor_text is None or line == self._anchor_text:
                    continue  # the typed command, or an unchanged line the wait started on
                self._anchor_text = None  # it changed: from now on it is output like any other line
                self._anchor = -1
            if (m := pattern.search(line)) is not None:
                self.match = p.SendMatch(text=m.group(), line=number)
                return True
        return False


def _logical(terminal: TerminalEngine, start: int, end: int) -> tuple[list[str], list[int], dict[int, int]]:
    """Transcript rows ``[start, end)`` as logical lines, each with its first row; and the rows that wrapped."""
    wraps = terminal.wraps(start, end)
    lines, firsts = join(terminal.transcript(start, end), start, wraps)
    return lines, firsts, wraps


def line_text(terminal: TerminalEngine, number: int) -> str:
    """Transcript line ``number`` as it is now (empty if it is not retained)."""
    lines = terminal.transcript(number, number + 1)
    return lines[0] if lines else ""


def _screen_key(terminal: TerminalEngine) -> tuple[int, int, int, int]:
    """What the screen shows, in a few ints: its rows' hash, the cursor, and which screen."""
    screen = terminal.current_screen()
    return hash(tuple(screen.visible_rows())), int(screen.cursor.x), int(screen.cursor.y), int(terminal.alt_screen)
