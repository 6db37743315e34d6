"""How long what is in front of the terminal sat unchanged, and blocked: when keys pressed after a send's input
act on what the input started rather than on the gap between the shell reading the line and the command running."""

from __future__ import annotations

import time
from typing import final

from ptyd.backends.os import procfs

BLOCKED = frozenset({"S", "D"})  # sleeping or waiting: not running, not runnable


@final
class FrontSettle:
    def __init__(self) -> None:
        self._pgid = -1  # the group in front
        self._since = 0.0  # ...in front since
        self._members: tuple[int, ...] = ()  # its members when last looked at
        self._blocked_since: float | None = None  # ...every one of them blocked, and the same ones, since

    def look(self, pgid: int, pids: list[int]) -> tuple[float, float]:
        """Seconds the group ``pgid`` (its members among ``pids``) has sat blocked with the same members, and
        seconds it has been in front."""
        members = tuple(sorted(procfs.group_members(pids, pgid)))
        stats = [procfs.read_stat(pid) for pid in members]
        blocked = bool(stats) and all(stat is not None and stat.state in BLOCKED for stat in stats)
        now = time.monotonic()
        if pgid != self._pgid:
            self._pgid, self._since = pgid, now
        if not blocked:
            self._blocked_since = None
        elif members != self._members or self._blocked_since is None:
            self._blocked_since = now
        self._members = members
        blocked_s = now - self._blocked_since if self._blocked_since is not None else 0.0
        return blocked_s, now - self._since
