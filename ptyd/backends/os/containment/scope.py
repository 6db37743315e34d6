"""What every containment strategy shares: a session's set of processes (Scope), the marker its processes carry,
and signals fenced by start time so a recycled pid is never hit."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Protocol

from ptyd.backends.os import procfs

MARKER_VAR = "PTYD_SESSION"
GROUP_PREFIX = "agent-"  # a directory of one agent's session cgroups (its aggregate limits), never a session's


class Scope(Protocol):
    """The set of processes of one session."""

    cgroup: str | None

    def attach(self, pid: int) -> None: ...
    def pids(self, *, thorough: bool = False) -> list[int]: ...
    def kill_all(self) -> None: ...
    def remove(self) -> bool: ...


class Containment(Protocol):
    """A way to capture every session's whole process tree (cgroup.py, marker.py)."""

    name: str

    @property
    def leaf_parent(self) -> Path | None:
        """The cgroup v2 directory the sessions' leaves are made in; None where sessions have no cgroup."""
        ...

    def scope(self, session_id: str, group: str | None = None) -> Scope:
        """A new session's scope; ``group``: its cgroup goes in that (existing) agent group, not beside it."""
        ...

    def leftovers(self) -> list[Scope]:
        """The scopes of sessions a dead daemon may have left that this containment finds by itself, without its
        state file (cgroup leaves; none by marker: those are found from the state file)."""
        ...

    def close(self) -> None: ...


def signal_fenced(pid: int, starttime: int, sig: int) -> bool:
    """Signal ``pid`` only if it is still the process that started at ``starttime``."""
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        return False
    try:
        stat = procfs.read_stat(pid)
        if stat is None or stat.starttime != starttime or stat.state in ("Z", "X"):
            return False
        signal.pidfd_send_signal(pidfd, sig)
        return True
    except OSError:
        return False
    finally:
        os.close(pidfd)


def alive(pids: list[int]) -> list[procfs.ProcStat]:
    out = []
    for pid in pids:
        stat = procfs.read_stat(pid)
        if stat is not None and stat.state not in ("Z", "X"):
            out.append(stat)
    return out
