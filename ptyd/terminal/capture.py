"""The head of one send's output, kept apart from scrollback so a flood cannot push it out before it is read."""

from __future__ import annotations

from typing import final

from ptyd.terminal.scrollback import utf8_len


@final
class HeadCapture:
    """Keeps the first rows of one send's output, so its head survives even if scrollback drops it."""

    def __init__(self, start_line: int, budget_bytes: int) -> None:
        self.start_line = start_line
        self.room = budget_bytes
        self.lines: list[str] = []
        self.end_line = start_line  # one past the last captured line

    def offer(self, first: int, rows: list[str]) -> None:
        """Rows ``first``, ``first + 1``... left the screen; keep those past the capture's end while room lasts."""
        if self.room <= 0 or first + len(rows) <= self.end_line:
            return
        if first > self.end_line:  # rows in between were never offered: the head ends at the gap
            self.room = 0
            return
        for row in rows[max(0, self.end_line - first) :]:
            size = utf8_len(row) + 1
            if size > self.room:
                self.room = 0
                return
            self.lines.append(row)
            self.room -= size
            self.end_line += 1
