"""How long what is in front of the terminal sat unchanged, and blocked: when keys pressed after a send's input
act on what the input started rather than on the gap between the shell reading the line and the command running."""

from __future__ import annotations

import time
from typing import final

from ptyd.backends import procfs

BLOCKED = frozenset({"S", "D"})  # sleeping or waiting: not running, not runnable


@final
class FrontSettle:
    def __init__(self) -> None:
        self._key: tuple[int, tuple[int, ...]] | None = None  # the group in front and its members
        self._since = 0.0  # ...unchanged since
        self._blocked_since: float | None = None  # ...every member blocked since

    def look(self, pgid: int, pids: list[int]) -> tuple[float, float]:
        """Seconds the group ``pgid`` (with its members among ``pids``) has been blocked, and in front unchanged."""
        members = tuple(sorted(procfs.group_members(pids, pgid)))
        stats = [procfs.read_stat(pid) for pid in members]
        blocked = bool(stats) and all(stat is not None and stat.state in BLOCKED for stat in stats)
        now = time.monotonic()
        key = (pgid, members)
        if key != self._key:
            self._key, self._since = key, now
            self._blocked_since = now if blocked else None
        elif not blocked:
            self._blocked_since = None
        elif self._blocked_since is None:
            self._blocked_since = now
        blocked_s = now - self._blocked_since if self._blocked_since is not None else 0.0
        return blocked_s, now - self._since
