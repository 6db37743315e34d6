"""The terminal's foreground process group (ForegroundGroup): who it is, whether it waits on the tty, and
whether it may be signalled."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import final

from ptyd import protocol as p
from ptyd.backends.os import procfs
from ptyd.backends.os.spawn import Spawned
from ptyd.backends.readiness import blocked_read
from ptyd.errors import InvalidArgument

RunCounts = dict[tuple[int, int], int]
VERIFY_ATTEMPTS = 5


@final
class ForegroundGroup:
    def __init__(self, proc: Spawned, members: Callable[[], list[int]]) -> None:
        self._proc = proc
        self._members_of_session = members  # the session's processes (its scope's, but its sandbox's helpers)

    def pgid(self) -> int | None:
        """The tty's foreground process group, read from the master."""
        try:
            pgid = os.tcgetpgrp(self._proc.master)
        except OSError:
            return None
        return pgid if pgid > 0 else None

    def candidates(self, pgid: int) -> list[int]:
        """Processes that may be in group ``pgid``. An interactive shell at its prompt is alone in its group
        and has no children: then the session's process list is not read at all. (A non-interactive top, such
        as ``bash -c 'a; b'``, runs its children in its own group, which is why the children are checked.)"""
        if pgid == self._proc.leader() and not procfs.children(pgid):
            return [pgid]
        return sorted({pgid, *self._members_of_session()})

    def _members(self, pgid: int) -> list[procfs.ProcStat]:
        members = []
        for pid in self.candidates(pgid):
            stat = procfs.read_stat(pid)
            if stat is not None and stat.pgrp == pgid and stat.state not in ("Z", "X"):
                members.append(stat)
        return members

    def describe(self, top_exited: bool) -> p.Foreground | None:
        """The group, named after the member that reads the terminal (``less`` in ``seq | less``)."""
        pgid = self.pgid()
        if pgid is None or (top_exited and pgid == self._proc.leader()):
            return None
        members = self._members(pgid)
        if not members:
            return None
        chosen = members[0]
        if len(members) > 1:
            for stat in members:
                if blocked_read.group_waits_on_tty([stat.pid], pgid, self._proc.tty_rdev, self._proc.master):
                    chosen = stat
                    break
            else:
                chosen = next((m for m in members if m.pid == pgid), members[-1])
        return p.Foreground(pid=chosen.pid, pgid=pgid, name=chosen.comm)

    def verified_pgid(self) -> int:
        """The foreground group, checked to hold a live process of this terminal's session (never a recycled
        group id of someone else's). A group that exits while it is checked (a loop of short commands) is
        looked up again: the terminal hands the foreground to the next one at once."""
        for _ in range(VERIFY_ATTEMPTS):
            pgid = self.pgid()
            if pgid is None:
                break
            if any(stat.session == self._proc.pid for stat in self._members(pgid)):
                return pgid
        raise InvalidArgument("the terminal has no foreground process group to signal", reason="no_foreground")

    def input_wait(self, pgid: int) -> blocked_read.Wait:
        return blocked_read.group_waits_on_tty(self.candidates(pgid), pgid, self._proc.tty_rdev, self._proc.master)

    def idle_at_input(self, pgid: int, *, at_rest: bool = False) -> bool:
        """The group waits to read the terminal, and that says it has nothing else to do: not a reader thread's
        wait (jshell's thread reads all along while the JVM runs a snippet). ``at_rest``: nor is another thread of
        it at work for it (fish's highlighter: fish wakes to draw its work, and a SIGINT then is lost)."""
        wait = blocked_read.group_wait(self.candidates(pgid), pgid, self._proc.tty_rdev, self._proc.master)
        return wait.kind != blocked_read.Wait.NONE and wait.leader and not (at_rest and wait.helped)

    def run_counts(self, pgid: int) -> RunCounts:
        return procfs.group_run_counts(self.candidates(pgid), pgid)


def ran_since(before: RunCounts, now: RunCounts) -> bool:
    """Some thread of the group was scheduled since ``before``: it left the wait it was in."""
    return any(count > before.get(key, count) for key, count in now.items())
