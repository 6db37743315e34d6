"""Reaps every child of the daemon and reports the exits of the ones a session watches.

uvloop reserves SIGCHLD for its own subprocess support (which ptyd does not use), so exits are noticed through a
pidfd per watched process, and orphans that the subreaper setting hands to the daemon are collected by the same
``reap`` (called on every pidfd wake-up, during teardown, and from a slow periodic sweep). A process the daemon
adopted after a crash is not its child (its parent, systemd, reaps it): its exit is reported from the pidfd alone,
without an exit status.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Callable
from typing import final

ExitCallback = Callable[[int | None, str | None], None]  # (exit_code, signal name)
ENDS_KEPT = 256


def decode_wait(code: int, status: int) -> tuple[int | None, str | None]:
    if code == os.CLD_EXITED:
        return status, None
    try:
        return None, signal.Signals(status).name
    except ValueError:
        return None, f"SIG{status}"


@final
class ChildReaper:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._watched: dict[int, tuple[int, ExitCallback]] = {}  # pid -> (pidfd, callback)
        self.reaped_orphans = 0
        # How the last unwatched children ended (an engine worker's owner asks after it: ``exit_of``).
        self._ends: dict[int, str] = {}

    def watch(self, pid: int, callback: ExitCallback, *, child: bool = True) -> None:
        pidfd = os.pidfd_open(pid)
        self._watched[pid] = (pidfd, callback)
        self._loop.add_reader(pidfd, self.reap if child else lambda: self._gone(pid))

    def _gone(self, pid: int) -> None:
        entry = self._watched.pop(pid, None)
        if entry is not None:
            pidfd, callback = entry
            self._loop.remove_reader(pidfd)
            os.close(pidfd)
            callback(None, None)

    def reap(self) -> None:
        while True:
            try:
                info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG)
            except ChildProcessError:
                return
            if info is None:
                return
            entry = self._watched.pop(info.si_pid, None)
            if entry is None:
                self.reaped_orphans += 1
                code, name = decode_wait(info.si_code, info.si_status)
                self._ends[info.si_pid] = name if name is not None else f"exit status {code}"
                while len(self._ends) > ENDS_KEPT:
                    del self._ends[next(iter(self._ends))]
                continue
            pidfd, callback = entry
            self._loop.remove_reader(pidfd)
            os.close(pidfd)
            callback(*decode_wait(info.si_code, info.si_status))

    def exit_of(self, pid: int) -> str | None:
        """How unwatched child ``pid`` ended, if this reaper collected it lately ("SIGKILL", "exit status 1")."""
        return self._ends.get(pid)

    def close(self) -> None:
        for pidfd, _ in self._watched.values():
            self._loop.remove_reader(pidfd)
            with contextlib.suppress(OSError):
                os.close(pidfd)
        self._watched.clear()
