"""What the owning agent has not been shown yet: the unread cursor of a session, and the shell commands that
ended since its last result (the seed's consuming output cursor, PtySendOperation.readOutput).

Every result an agent is given (a send's, a wait's, the output of a background send) starts where the previous
one it was given ended, not where its own call started: a command that finishes while the model thinks shows its
output and its exit status in the next result, whatever call that is. The cursor moves only when a result is
delivered (returned to a caller), so a result that never reached its agent (its caller went away, a background
send nobody asked after) is carried into the next one rather than lost.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from typing import final

from ptyd import protocol as p

COMMANDS_KEPT = 64  # command ends kept for the next result: an agent away that long reads the rest with terminal_read
TYPED_KEPT = 64  # lines typed by sends, waiting for the shell to start them


@dataclass(frozen=True, slots=True)
class Unread:
    """Where a result's output starts (a transcript line) and the command ends it reports."""

    line: int
    commands: tuple[p.CommandOutcome, ...]
    lost_lines: int


@final
class AgentView:
    def __init__(self, line: int = 0) -> None:
        self.line = line  # the first transcript line the agent has not been shown whole
        self._ended: deque[p.CommandOutcome] = deque(maxlen=COMMANDS_KEPT)
        # Lines a send typed, not yet started by the shell, and when each was typed.
        self._typed: deque[tuple[str, float]] = deque(maxlen=TYPED_KEPT)
        self._ended_at = 0.0  # when the last command's end was seen
        self._marked = False  # the shell sends marks: its commands can be told apart
        self._running: tuple[str | None, float] | None = None  # the command the shell runs now, since when
        self.lost_lines = 0  # lines a crash lost that no result reported yet
        self._shown = ""  # the text ``line`` had when the last result showed it (as its cursor line)

    # --- what the session saw happen ------------------------------------------------------------------

    def typed(self, text: str) -> None:
        """A send wrote ``text``: each line it submits that is not empty or a comment is a command the shell
        starts next, in order (once the shell sends marks: the line that installs them is no command of the
        agent's). Lines that start none (a syntax error) are forgotten at the next send typed at an idle prompt."""
        if self._marked:
            now = time.monotonic()
            self._typed.extend((line, now) for line in _lines(text))

    def forget_typed(self) -> None:
        self._typed.clear()

    def command_started(self) -> None:
        self._marked = True
        now = time.monotonic()
        if not self._typed:
            self._running = (None, now)
            return
        # It started once it was typed and the command before it ended: a start mark read late (a loaded
        # machine) must not shorten its duration (seen: a `sleep 0.4` measured 397 ms).
        command, typed_at = self._typed.popleft()
        self._running = (command, min(now, max(typed_at, self._ended_at)))

    def command_ended(self, status: int | None, cwd: str | None) -> None:
        """The shell's prompt mark: the command before it (if any) ended with ``status``."""
        self._marked = True
        if self._running is None:
            return  # a prompt with no command before it: an empty line, a Ctrl-C at the prompt
        command, started = self._running
        self._running = None
        self._ended_at = time.monotonic()
        duration = int((time.monotonic() - started) * 1000)
        self._ended.append(p.CommandOutcome(command=command, exit_code=status, cwd=cwd, duration_ms=duration))

    def running(self) -> p.RunningCommand | None:
        if self._running is None:
            return None
        command, started = self._running
        return p.RunningCommand(command=command, running_ms=int((time.monotonic() - started) * 1000))

    @property
    def command_running(self) -> bool:
        return self._running is not None

    def lost(self, lines: int) -> None:
        self.lost_lines += lines

    # --- what a result reports, and its delivery -------------------------------------------------------

    @property
    def mark(self) -> tuple[int, int, int]:
        """Changes whenever what ``to_state`` returns does (for the state saver)."""
        return self.line, len(self._ended), self.lost_lines

    def unread(self) -> Unread:
        return Unread(self.line, tuple(self._ended), self.lost_lines)

    def start(self, cursor_line: int, text_now: str) -> int:
        """Where a result that starts at ``line`` starts now: past it if the last result showed it as its cursor
        line and it only ended since (the same text, the cursor below it: seen with a raw-mode program's line
        whose newline came in a later write); a line that grew is shown again, whole."""
        if self.line < cursor_line and self._shown and text_now == self._shown:
            return self.line + 1
        return self.line

    def delivered(self, end_line: int, reported: Unread, end_text: str = "") -> None:
        """A result covering output up to ``end_line`` (its cursor line, shown as ``end_text``) and the command
        ends of ``reported`` reached the agent."""
        if end_line >= self.line:
            self._shown = end_text
        self.line = max(self.line, end_line)
        for outcome in reported.commands:
            if self._ended and self._ended[0] is outcome:
                self._ended.popleft()
        self.lost_lines = max(0, self.lost_lines - reported.lost_lines)

    # --- continuity ------------------------------------------------------------------------------------

    def to_state(self) -> tuple[int, list[p.CommandOutcome], int]:
        return self.line, list(self._ended), self.lost_lines

    def restore(self, line: int, ended: list[p.CommandOutcome], lost_lines: int, *, running: bool) -> None:
        """The view a previous daemon kept; ``running``: a command was running then (since when is unknown)."""
        self.line = line
        self._shown = ""  # not kept: the line is shown again rather than risk hiding what it became
        self._ended.extend(ended)
        self.lost_lines = lost_lines
        self._marked = self._marked or running
        if running and self._running is None:
            self._running = (None, time.monotonic())


def _lines(text: str) -> list[str]:
    """The non-empty lines ``text`` submits (the part after its last newline is not submitted yet)."""
    lines = (line.strip() for line in text.split("\n")[:-1])
    return [line for line in lines if line and not line.startswith("#")]
