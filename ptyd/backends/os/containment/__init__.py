"""Finding, and ending, every process a session started, including ones that left its process group.

Killing the process group or closing the PTY does not reach a ``setsid nohup sleep 1000 &``. Two strategies
capture a session's whole tree, behind the ``Containment`` Protocol (``scope.py``): a cgroup v2 leaf per session
(``cgroup.py``), where the hierarchy is writable, else subreaper + marker (``marker.py``). Here: choosing one,
ending a scope with escalating signals, and killing what a dead daemon left.

Every signal goes through a pidfd opened before the process's start time is checked, so a recycled pid is
never signalled.
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import signal
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import NamedTuple

from ptyd.backends.os.containment.cgroup import CgroupContainment, CgroupScope
from ptyd.backends.os.containment.marker import MarkerScope, SubreaperContainment, kill_left
from ptyd.backends.os.containment.scope import (
    GROUP_PREFIX,
    MARKER_VAR,
    Containment,
    Scope,
    alive,
    signal_fenced,
)

__all__ = [
    "GROUP_PREFIX",
    "MARKER_VAR",
    "CgroupContainment",
    "CgroupScope",
    "Containment",
    "ContainmentUnavailable",
    "Left",
    "MarkerScope",
    "Scope",
    "SubreaperContainment",
    "recover",
    "remove",
    "select_containment",
    "set_subreaper",
    "signal_fenced",
    "terminate",
]

PR_SET_CHILD_SUBREAPER = 36
EXIT_WAIT_S = 2.0  # after the kill: how long a killed member may take to be gone (a namespace's init tearing down)


def set_subreaper() -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


class Left(NamedTuple):
    """A session of a dead daemon, as its state file names it."""

    session_id: str
    pid: int
    starttime: int | None
    cgroup: str | None


def recover(containment: Containment, left: Iterable[Left], keep: set[str] | None = None) -> int:
    """Kill what a dead daemon left, but the sessions in ``keep`` (adopted): each session by the cgroup it had,
    while that exists, else by its marker; then the leftovers this containment finds that no session named.
    Returns processes killed."""
    killed = 0
    handled: set[str] = set()
    for session in left:
        if keep is not None and session.session_id in keep:
            if session.cgroup is not None:
                handled.add(session.cgroup)
            continue
        if session.cgroup is not None and os.path.isdir(session.cgroup):
            scope = CgroupScope(Path(session.cgroup))
            killed += len(scope.pids())
            scope.kill_all()
            handled.add(session.cgroup)
            continue
        killed += kill_left(session.session_id, session.pid, session.starttime)
    for leftover in containment.leftovers():
        if leftover.cgroup not in handled:
            killed += len(leftover.pids())
            leftover.kill_all()
    return killed


class ContainmentUnavailable(Exception):
    """The configured containment cannot work on this machine; the message says why (the daemon does not start)."""


def select_containment(choice: str, instance: str) -> Containment:
    if choice in ("auto", "cgroup"):
        found = CgroupContainment.detect(instance)
        if found is not None:
            return found
        if choice == "cgroup":
            raise ContainmentUnavailable(
                'containment = "cgroup" but no writable cgroup v2 hierarchy was found '
                '(delegate one to this user, or use "auto")'
            )
    return SubreaperContainment()


async def remove(scope: Scope) -> None:
    """Remove the scope, waiting briefly (without blocking the loop) while its last tasks leave it."""
    for _ in range(50):
        if scope.remove():
            return
        await asyncio.sleep(0.002)


async def terminate(scope: Scope, hup_grace: float, term_grace: float, reap: Callable[[], None]) -> int:
    """SIGHUP, then SIGTERM, then SIGKILL every member still alive after each grace; returns how many got one.

    ``reap`` is called while waiting so that members which are the daemon's own children do not linger as
    zombies (a zombie counts as gone). Returns once every member seen is gone, not only once the scope lists none:
    a pid namespace's init (a sandbox's) leaves its cgroup as it starts to exit, then waits for the rest of its
    namespace to be reaped.
    """
    signalled: set[int] = set()
    seen: dict[int, int] = {}  # pid -> start time
    steps = ((signal.SIGHUP, hup_grace), (signal.SIGTERM, term_grace), (signal.SIGKILL, 5.0))
    for sig, grace in steps:
        members = alive(scope.pids(thorough=True))
        if not members:
            break
        seen.update((stat.pid, stat.starttime) for stat in members)
        if sig == signal.SIGKILL:
            scope.kill_all()
        for stat in members:
            if signal_fenced(stat.pid, stat.starttime, sig):
                signalled.add(stat.pid)
        deadline = time.monotonic() + grace
        delay = 0.001
        while time.monotonic() < deadline:
            reap()
            if not alive(scope.pids(thorough=sig == signal.SIGKILL)):
                break
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.02)
    deadline = time.monotonic() + EXIT_WAIT_S
    while time.monotonic() < deadline:
        reap()
        if not any(stat.starttime == seen[stat.pid] for stat in alive(list(seen))):
            break
        await asyncio.sleep(0.002)
    reap()
    return len(signalled)
