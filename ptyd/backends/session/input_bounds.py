"""Input a send is refused before anything is written: more than the daemon may hold unread, or a line the
terminal's canonical mode would cut short."""

from __future__ import annotations

import re
import termios

from ptyd.backends.readiness.foreground import ForegroundGroup
from ptyd.backends.readiness.tracker import ReadinessTracker
from ptyd.errors import InvalidArgument, LimitExceeded

CANONICAL_LINE_MAX = 4095  # bytes a canonical-mode line can hold (N_TTY_BUF_SIZE less its newline)
_LINE_ENDS = re.compile(rb"[\r\n\x04]")
# Programs that run the next lines they read as commands, which read them in canonical mode.
SHELLS = frozenset({"bash", "sh", "dash", "zsh", "ksh", "mksh", "fish", "ash", "busybox"})


def check_room(data: bytes, pending: int, limit: int) -> None:
    """Refuse input the daemon would have to hold beyond its bound: the program has not read what came before."""
    if pending + len(data) > limit:
        raise LimitExceeded(
            f"{pending} bytes sent earlier are still unread by the program; nothing was written. "
            "Wait for it to read them (or interrupt it: terminal_signal)",
            limit="max_pending_input_bytes",
            value=limit,
            reason="input_pending",
            pending_bytes=pending,
        )


def check_deliverable(
    data: bytes, tracker: ReadinessTracker, foreground: ForegroundGroup, master: int, exited: bool
) -> None:
    """Refuse input that a canonical-mode reader would receive cut short: a line over the kernel's limit.
    Lines after the first that a shell will run a command for are held to it too (commands read canonically)."""
    lines = _LINE_ENDS.split(data)
    if max(len(line) for line in lines) <= CANONICAL_LINE_MAX:
        return
    target = tracker.target()
    lflag = target.flags(master)[1] if target is not None else None
    if lflag is not None and lflag & termios.ICANON:
        checked = lines
    else:
        front = foreground.describe(exited)
        checked = lines[1:] if front is not None and front.name in SHELLS else []
    longest = max((len(line) for line in checked), default=0)
    if longest > CANONICAL_LINE_MAX:
        raise InvalidArgument(
            f"a line of {longest} bytes would be cut to {CANONICAL_LINE_MAX} by the terminal's canonical "
            "mode; nothing was written. Split it, or send a file's content through a command "
            "(base64 -d, a heredoc of short lines) instead",
            reason="line_too_long",
            field="input",
            limit=CANONICAL_LINE_MAX,
            line_bytes=longest,
        )
