"""Finding, and ending, every process a session started, including ones that left its process group.

Killing the process group or closing the PTY does not reach a ``setsid nohup sleep 1000 &``. Two ways to
capture a session's whole tree:

- ``cgroup``: each session gets a cgroup v2 leaf; membership is inherited across fork, setsid and double
  forks, and ``cgroup.kill`` ends it race-free. Used where the hierarchy is writable (root, or a systemd
  service with ``Delegate=yes``).
- ``subreaper``: the daemon is a child subreaper, so orphans come back to it rather than to init, and every
  session process carries ``PTYD_SESSION=<id>`` in its environment. Members are the descendants of the top
  process, its session, and any process carrying the marker. A process that both scrubs its environment and
  escapes the session (``setsid env -i ...``) is not found; it is reparented to the daemon and killed when the
  daemon stops.

Every signal goes through a pidfd opened before the process's start time is checked, so a recycled pid is
never signalled.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import errno
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol, final

from ptyd.backends.os import procfs

MARKER_VAR = "PTYD_SESSION"
GROUP_PREFIX = "agent-"  # a directory of one agent's session cgroups (its aggregate limits), never a session's
PR_SET_CHILD_SUBREAPER = 36
EXIT_WAIT_S = 2.0  # after the kill: how long a killed member may take to be gone (a namespace's init tearing down)


class Scope(Protocol):
    """The set of processes of one session."""

    cgroup: str | None

    def attach(self, pid: int) -> None: ...
    def pids(self, *, thorough: bool = False) -> list[int]: ...
    def kill_all(self) -> None: ...
    def remove(self) -> bool: ...


class Containment(Protocol):
    name: str

    def scope(self, session_id: str, group: str | None = None) -> Scope:
        """A new session's scope; ``group``: its cgroup goes in that (existing) agent group, not beside it."""
        ...

    def close(self) -> None: ...


def set_subreaper() -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


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


def _alive(pids: list[int]) -> list[procfs.ProcStat]:
    out = []
    for pid in pids:
        stat = procfs.read_stat(pid)
        if stat is not None and stat.state not in ("Z", "X"):
            out.append(stat)
    return out


# ---------------------------------------------------------------------------------------------------------------
# cgroup v2
# ---------------------------------------------------------------------------------------------------------------


def _cgroup2_mounts() -> list[Path]:
    mounts = []
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                left, _, right = line.partition(" - ")
                if right.split()[:1] == ["cgroup2"]:
                    mounts.append(Path(left.split()[4]))
    except OSError:
        pass
    return mounts


def _own_cgroup_dir() -> Path | None:
    """Our cgroup's directory: under the cgroup2 mount whose view of our cgroup lists our own pid (a mount may
    show another namespace's root, or be shadowed)."""
    own = _own_cgroup()
    if own is None:
        return None
    pid = str(os.getpid())
    for mount in _cgroup2_mounts():
        candidate = mount / own.lstrip("/")
        try:
            if pid in (candidate / "cgroup.procs").read_text().split():
                return candidate
        except OSError:
            continue
    return None


def _own_cgroup() -> str | None:
    try:
        with open("/proc/self/cgroup") as f:
            for line in f:
                if line.startswith("0::"):
                    return line[3:].strip()
    except OSError:
        pass
    return None


@final
class CgroupScope:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.cgroup: str | None = str(path)
        self._procs = str(path / "cgroup.procs")

    def attach(self, pid: int) -> None:
        (self.path / "cgroup.procs").write_text(f"{pid}\n")

    def pids(self, *, thorough: bool = False) -> list[int]:
        try:
            return [int(x) for x in procfs.read_file(self._procs).split()]
        except (OSError, ValueError):
            return []

    def kill_all(self) -> None:
        with contextlib.suppress(OSError):
            (self.path / "cgroup.kill").write_text("1\n")

    def remove(self) -> bool:
        """Remove the leaf; False while it is still busy (exiting tasks leave it a moment after they are
        reaped), so the caller can try again."""
        try:
            self.path.rmdir()
        except OSError as exc:
            return exc.errno != errno.EBUSY
        return True


@final
class CgroupContainment:
    name = "cgroup"

    def __init__(self, base: Path) -> None:
        self.base = base

    @classmethod
    def detect(cls, instance: str) -> CgroupContainment | None:
        parent = _own_cgroup_dir()
        if parent is None:
            return None
        base = parent / f"ptyd-{instance}"
        try:
            base.mkdir(exist_ok=True)
            probe = base / "probe"
            probe.mkdir(exist_ok=True)
            ok = (probe / "cgroup.kill").exists() and os.access(probe / "cgroup.procs", os.W_OK)
            probe.rmdir()
        except OSError:
            return None
        return cls(base) if ok else None

    def scope(self, session_id: str, group: str | None = None) -> CgroupScope:
        self.base.mkdir(exist_ok=True)  # an administrator may have removed the empty instance cgroup
        path = (self.base / group if group is not None else self.base) / session_id
        path.mkdir()
        return CgroupScope(path)

    def groups(self) -> list[Path]:
        """The agent groups (the limits' directories holding session leaves; no process lives in one)."""
        try:
            return [p for p in self.base.iterdir() if p.is_dir() and p.name.startswith(GROUP_PREFIX)]
        except OSError:
            return []

    def leftovers(self) -> list[CgroupScope]:
        """Every session leaf, beside the agent groups or in one (a group is never one: killing it would kill
        every session in it)."""
        found = []
        for parent in [self.base, *self.groups()]:
            with contextlib.suppress(OSError):
                found += [
                    CgroupScope(p) for p in parent.iterdir() if p.is_dir() and not p.name.startswith(GROUP_PREFIX)
                ]
        return found

    def close(self) -> None:
        """Remove the (now empty) instance cgroup at shutdown; a leftover session keeps it, harmlessly."""
        for scope in self.leftovers():
            scope.remove()
        for group in self.groups():
            with contextlib.suppress(OSError):
                group.rmdir()
        with contextlib.suppress(OSError):
            self.base.rmdir()


# ---------------------------------------------------------------------------------------------------------------
# subreaper + marker
# ---------------------------------------------------------------------------------------------------------------


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
        for stat in _alive(self.pids(thorough=True)):
            signal_fenced(stat.pid, stat.starttime, signal.SIGKILL)

    def remove(self) -> bool:
        return True


@final
class SubreaperContainment:
    name = "subreaper"

    def scope(self, session_id: str, group: str | None = None) -> MarkerScope:
        return MarkerScope(session_id)

    def close(self) -> None:
        pass


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
        members = _alive(scope.pids(thorough=True))
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
            if not _alive(scope.pids(thorough=sig == signal.SIGKILL)):
                break
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.02)
    deadline = time.monotonic() + EXIT_WAIT_S
    while time.monotonic() < deadline:
        reap()
        if not any(stat.starttime == seen[stat.pid] for stat in _alive(list(seen))):
            break
        await asyncio.sleep(0.002)
    reap()
    return len(signalled)
