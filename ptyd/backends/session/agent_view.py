"""What the owning agent has not been shown yet: the unread cursor of a session, and the shell commands that
ended since its last result (the seed's consuming output cursor, PtySendOperation.readOutput).

Every result an agent is given (a send's, a wait's, the output of a background send) starts where the previous
one it was given ended, not where its own call started: a command that finishes while the model thinks shows its
output and its exit status in the next result, whatever call that is. The cursor moves only when a result is
delivered (returned to a caller), so a result that never reached its agent (its caller went away, a background
send nobody asked after) is carried into the next one rather than lost.
"""

from __future__ import annotations

import re
import time
from collections import deque
from dataclasses import dataclass
from typing import final

from ptyd import protocol as p
from ptyd.backends.session_state import RunningState, SessionState, TypedState

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
        # Lines a send typed, not yet read by the shell: each one's text, when it was typed, and whether it can start
        # a command at a prompt (not empty or a comment).
        self._typed: deque[tuple[str, float, bool]] = deque(maxlen=TYPED_KEPT)
        self._ended_at = 0.0  # when the last command's end was seen
        self._marked = False  # the shell sends marks: its commands can be told apart
        # The command each shell runs now, and since when: the session's own (0), and those inside it that
        # terminal_integrate installed the hooks into (1, 2, ...; the ssh command of 0 runs on meanwhile).
        self._running: dict[int, tuple[str | None, float]] = {}
        # Lines the shell read of a command it has not run yet: it waits at its continuation prompt (PS2) for the
        # rest (an open quote, bracket or block). None: a line no send typed.
        self._partial: list[str | None] = []
        self.lost_lines = 0  # lines a crash lost that no result reported yet
        self._shown = ""  # the text ``line`` had when the last result showed it (as its cursor line)

    # --- what the session saw happen ------------------------------------------------------------------

    def typed(self, text: str) -> None:
        """A send wrote ``text``: the shell reads each line it submits in order (once the shell sends marks: the
        line that installs them is no command of the agent's), and each one starts a command, continues one, ends
        at the next prompt unrun (a syntax error; or an empty line, a comment), or went to the program running
        then: lines still queued when a send is typed at an idle prompt are forgotten then."""
        if self._marked:
            now = time.monotonic()
            self._typed.extend((line, now, bool(line) and not line.startswith("#")) for line in _lines(text))

    def forget_typed(self) -> None:
        self._typed.clear()

    def continued(self) -> None:
        """The shell's continuation mark: it read a line of a command it cannot run yet and asks for the rest."""
        self._marked = True
        self._partial.append(self._typed.popleft()[0] if self._typed else None)

    def command_started(self, line: str | None = None, depth: int = 0) -> None:
        """The command mark of the shell at ``depth``; ``line``: the command line, where the shell says it (fish:
        its editor joins the lines sent, continuations and all, into one)."""
        self._marked = True
        now = time.monotonic()
        if line is None:
            command, typed_at = self._next_line(now)
        else:  # its lines leave the queue with it (those a continuation took, taken already)
            command, typed_at = line, now
            for _ in range(min(len(self._typed), line.count("\n") + 1 - len(self._partial))):
                typed_at = self._typed.popleft()[1]
            self._partial = []
        self._running[depth] = (command, self._read_at(typed_at, now))

    def command_ended(self, status: int | None, cwd: str | None, depth: int = 0) -> p.CommandOutcome | None:
        """The prompt mark of the shell at ``depth``: the command before it (if any) ended with ``status``; what
        ran in shells inside it ended with them (their status unknown: the ssh connection closed). With none
        running, a line the shell read and did not run (a syntax error, or a command left incomplete and
        abandoned with Ctrl-C) ends here: the agent is told, with the shell's status, rather than shown a bare
        prompt. Returns the command that ended, if one did."""
        self._marked = True
        now = time.monotonic()
        for inner in sorted((d for d in self._running if d > depth), reverse=True):
            self._end(self._running.pop(inner), None, None, now)
        if depth in self._running:
            return self._end(self._running.pop(depth), status, cwd, now)
        if self._partial or (self._typed and self._typed[0][2]):
            command, typed_at = self._next_line(now)
            return self._end((command, self._read_at(typed_at, now)), status, cwd, now)
        if self._typed:  # a prompt with no command before it: an empty line, a comment, a Ctrl-C at an empty prompt
            self._typed.popleft()
        return None

    def _end(
        self, begun: tuple[str | None, float], status: int | None, cwd: str | None, now: float
    ) -> p.CommandOutcome:
        """``begun`` (a command and since when) ended now: kept for the next result."""
        command, started = begun
        self._ended_at = now
        outcome = p.CommandOutcome(command=command, exit_code=status, cwd=cwd, duration_ms=int((now - started) * 1000))
        self._ended.append(outcome)
        return outcome

    def _read_at(self, typed_at: float, now: float) -> float:
        """When the shell read a line typed at ``typed_at``: once typed and the command before it ended. A mark read
        late (a loaded machine) must not shorten a command's duration (seen: a `sleep 0.4` measured 397 ms), nor
        a line refused after a long command take that command's time."""
        return min(now, max(typed_at, self._ended_at))

    def _next_line(self, now: float) -> tuple[str | None, float]:
        """The command the shell took now: the lines it read at its continuation prompt, then the next line typed
        (None: no send typed it), and when its last line was typed."""
        line, typed_at, _ = self._typed.popleft() if self._typed else (None, now, False)
        partial, self._partial = self._partial, []
        if not partial:
            return line, typed_at
        return _joined([*partial, line]), typed_at

    def continuation(self) -> str | None:
        """The lines of a command the shell waits to complete (its continuation prompt), as typed; None when it
        waits for none (or no send typed them)."""
        return _joined(self._partial)

    def running(self) -> p.RunningCommand | None:
        """The command running in the innermost shell that runs one."""
        if not self._running:
            return None
        command, started = self._running[max(self._running)]
        return p.RunningCommand(command=command, running_ms=int((time.monotonic() - started) * 1000))

    @property
    def command_running(self) -> bool:
        return bool(self._running)

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

    def to_state(self, state: SessionState) -> None:
        """Write the view into ``state``, for the next daemon."""
        state.view_line, state.view_commands, state.lost_lines = self.line, list(self._ended), self.lost_lines
        state.view_marked, state.view_partial = self._marked, list(self._partial)
        state.view_running = [RunningState(depth, command, since) for depth, (command, since) in self._running.items()]
        state.view_typed = [TypedState(*typed) for typed in self._typed]

    def restore(self, state: SessionState, line: int) -> None:
        """The view a previous daemon kept in ``state``, its unread line ``line``. An older daemon's state says
        only that a command ran (``command_running``: which one, and since when, unknown)."""
        self.line = line
        self._shown = ""  # not kept: the line is shown again rather than risk hiding what it became
        self._ended.extend(state.view_commands)
        self.lost_lines = state.lost_lines
        self._marked = self._marked or state.view_marked or state.command_running
        self._running.update((kept.depth, (kept.command, kept.started)) for kept in state.view_running)
        if state.command_running and not self._running:
            self._running[0] = (None, time.monotonic())
        self._typed.extend((typed.text, typed.typed_at, typed.can_start) for typed in state.view_typed)
        self._partial = list(state.view_partial)


def _joined(lines: list[str | None]) -> str | None:
    """The lines a send typed, as one command's text (None: no send typed any of them)."""
    known = [line for line in lines if line is not None]
    return "\n".join(known) if known else None


def _lines(text: str) -> list[str]:
    """The lines ``text`` submits, stripped: each CR or LF ends one, as Enter does at a prompt (the part after the
    last is not submitted yet)."""
    return [line.strip() for line in _LINE_END.split(text)[:-1]]


_LINE_END = re.compile("[\r\n]")
