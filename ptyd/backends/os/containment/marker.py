"""Containment by subreaper and marker: the daemon is a child subreaper, so orphans come back to it rather than
to init, and every session process carries ``PTYD_SESSION=<id>`` in its environment. Members are the descendants
of the top process, its session, and any process carrying the marker. A process that both scrubs its environment
and escapes the session (``setsid env -i ...``) is not found; it is reparented to the daemon and killed when the
daemon stops."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import final

from ptyd.backends.os import procfs
from ptyd.backends.os.containment.scope import MARKER_VAR, Scope, alive, signal_fenced


@final
class MarkerScope:
    def __init__(self, session_id: str) -> None:
        self.marker = f"{MARKER_VAR}={session_id}".encode()
        self.cgroup: str | None = None
        self.top: int | None = None

    def attach(self, pid: int) -> None:
        self.top = pid

    def pids(self, *, thorough: bool = False) -> list[int]:
        found = set(procfs.descendants(self.top)) if self.top is not None else set()
        if thorough:
            for pid in procfs.all_pids():
                if pid in found:
                    continue
                stat = procfs.read_stat(pid)
                if stat is None:
                    continue
                if stat.session == self.top or procfs.environ_has(pid, self.marker):
                    found.add(pid)
        return sorted(found)

    def kill_all(self) -> None:
        for stat in alive(self.pids(thorough=True)):
            signal_fenced(stat.pid, stat.starttime, signal.SIGKILL)

    def remove(self) -> bool:
        return True


@final
class SubreaperContainment:
    name = "subreaper"

    leaf_parent: Path | None = None

    def scope(self, session_id: str, group: str | None = None) -> MarkerScope:
        return MarkerScope(session_id)

    def leftovers(self) -> list[Scope]:
        return []

    def close(self) -> None:
        pass


def kill_left(session_id: str, pid: int, starttime: int | None) -> int:
    """Kill what a dead daemon left of a session found by marker: the processes in its leader's session, while the
    leader is the same process, and those carrying its marker; never this daemon. Returns processes killed."""
    marker = f"{MARKER_VAR}={session_id}".encode()
    top = procfs.read_stat(pid)
    # The session id of the dead tree is only meaningful while its leader is the same process.
    session = pid if top is not None and top.starttime == starttime else None
    killed = 0
    for candidate in procfs.all_pids():
        stat = procfs.read_stat(candidate)
        if stat is None or candidate == os.getpid():
            continue
        mine = (session is not None and stat.session == session) or procfs.environ_has(candidate, marker)
        if mine and signal_fenced(candidate, stat.starttime, signal.SIGKILL):
            killed += 1
    return killed
