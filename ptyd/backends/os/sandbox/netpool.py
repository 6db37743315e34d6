"""Network namespaces made ahead of the opens that need one (``sandbox_network`` "auto" or "pasta").

Connecting a sandbox's own namespace at its open costs pasta's set-up (40-80 ms on these machines), more than the
rest of the sandbox. So namespaces are made ahead, a few at a time (``NetworkPool``): a *holder* (bubblewrap with a
user and a network namespace of its own, running ``sleep infinity``) with pasta connected to it, each spare in a
cgroup leaf of its own. An open takes one: its spawn chain enters the namespace (``nsenter``, before its
bubblewrap; with the user namespace too when the daemon is not root, whose setns needs it) and the holder and
pasta move into the session's leaf, so the session's close ends them, a handover or a crash keeps them with the
session, and a crashed daemon's spares are leftovers (``containment.recover``) the next daemon kills. Each
namespace serves one session: sessions never share a loopback.

Needs cgroup containment (a leaf per spare); without it each open connects its own (``network.connect``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import final

from ptyd.backends.os import procfs
from ptyd.backends.os.containment import Containment, Scope
from ptyd.backends.os.containment import remove as remove_scope
from ptyd.backends.os.containment.reaper import ChildReaper
from ptyd.backends.os.sandbox.network import connect, read_child_pid, spawn_held
from ptyd.errors import SandboxUnavailable, SpawnFailed

log = logging.getLogger("ptyd.sandbox")

LEAF_PREFIX = "netns-"  # a spare's cgroup leaf: never a session id (those are "pty-" and hex digits)
_HOLD = ("sleep", "infinity")


@dataclass(frozen=True, slots=True)
class Programs:
    """What making a namespace takes, resolved on PATH (None: not installed)."""

    bwrap: str | None
    pasta: str | None
    nsenter: str | None
    sleep: str | None
    pasta_name: str = "pasta"  # as configured

    @classmethod
    def find(cls, bwrap: str, pasta: str) -> Programs:
        found = (shutil.which(bwrap), shutil.which(pasta), shutil.which("nsenter"), shutil.which(_HOLD[0]))
        return cls(*found, pasta_name=pasta)

    def missing(self) -> str | None:
        if self.pasta is None:
            return f"pasta ({self.pasta_name}; Debian package passt) is not installed"
        for name, found in (("bubblewrap", self.bwrap), ("nsenter (util-linux)", self.nsenter), ("sleep", self.sleep)):
            if found is None:
                return f"{name} is not installed"
        return None


@final
@dataclass(eq=False)
class Namespace:
    """One network namespace with pasta connected, held until a session takes it."""

    child: int  # the holder's process in the namespaces
    pasta: int
    scope: Scope  # the spare's leaf, holding the holder and pasta
    prefix: tuple[str, ...]  # what a spawn chain runs before its sandbox to enter the namespace

    def alive(self) -> bool:
        """Its holder and its pasta run (a spare's processes end only if something kills them; a killed one is
        listed in the leaf until it is reaped)."""
        members = set(self.scope.pids())
        for pid in (self.child, self.pasta):
            stat = procfs.read_stat(pid) if pid in members else None
            if stat is None or stat.state in ("Z", "X"):
                return False
        return True

    def move_to(self, scope: Scope) -> list[int]:
        """Into a session's scope: ended by its close, kept by a handover or a crash. Returns the processes."""
        pids = self.scope.pids()
        for pid in pids:
            scope.attach(pid)
        self.scope.remove()
        return pids

    def discard(self) -> None:
        self.scope.kill_all()
        with contextlib.suppress(RuntimeError):  # no running loop (at exit): the next daemon's sweep removes it
            asyncio.get_running_loop().create_task(remove_scope(self.scope))


def new_leaf(containment: Containment) -> Scope:
    try:
        return containment.scope(f"{LEAF_PREFIX}{secrets.token_hex(6)}")
    except OSError as exc:
        raise SpawnFailed(f"cannot create a network namespace's cgroup: {exc.strerror}", reason="cgroup") from None


async def make_namespace(
    programs: Programs, scope: Scope, reaper: ChildReaper, env: dict[str, str], timeout_s: float
) -> Namespace:
    """A holder with its namespaces, pasta connected to them, both in the leaf ``scope``; SpawnFailed if it cannot
    be (and the leaf is emptied)."""
    if not (programs.bwrap and programs.pasta and programs.nsenter and programs.sleep):
        raise SandboxUnavailable("a network namespace needs bwrap, pasta, nsenter and sleep", reason="pasta")
    info_read, info_write = os.pipe()
    try:
        holder = [programs.bwrap, "--unshare-user", "--unshare-net", "--ro-bind", "/", "/", "--info-fd", "3", "--"]
        spawn_held([*holder, programs.sleep, _HOLD[1]], env, scope, info=info_write)
        os.close(info_write)
        info_write = -1
        child = await read_child_pid(info_read, timeout_s)
        pasta = await connect(programs.pasta, child, env, reaper, timeout_s, scope=scope)
    except BaseException:
        scope.kill_all()
        asyncio.get_running_loop().create_task(remove_scope(scope))
        raise
    finally:
        for fd in (info_read, info_write):
            if fd >= 0:
                os.close(fd)
    net = f"--net=/proc/{child}/ns/net"
    if os.getuid() == 0:
        prefix: tuple[str, ...] = (programs.nsenter, net, "--")
    else:  # setns into a network namespace needs CAP_SYS_ADMIN in the caller's own user namespace: enter theirs
        prefix = (programs.nsenter, f"--user=/proc/{child}/ns/user", net, "--preserve-credentials", "--")
    return Namespace(child, pasta, scope, prefix)


@final
class NetworkPool:
    """``spares`` namespaces kept ready; made in the background after each open that took one, one at a time."""

    def __init__(self, containment: Containment, programs: Callable[[], Programs], spares: int) -> None:
        self._containment = containment
        self._find = programs
        self._known: Programs | None = None
        self.spares = spares
        self._ready: list[Namespace] = []
        self._reaper: ChildReaper | None = None  # the backends' (the pool is made before it)
        self._filling: asyncio.Task[None] | None = None
        self._making: Scope | None = None  # the leaf of the spare being made
        self.failure: str | None = None  # why the last namespace could not be made (None: the last one was)
        self.taken = 0
        self.made_ahead = 0  # of the taken: how many were ready (the others were made at the open)

    @property
    def ready(self) -> int:
        return len(self._ready)

    def programs(self) -> Programs:
        """As last resolved on PATH: daemon_info asks at every call, and a PATH walk each time made it 5x a
        terminal_list. An open that finds one missing looks again, and so does a reload."""
        if self._known is None:
            self._known = self._find()
        return self._known

    @property
    def usable(self) -> bool:
        """Only with a cgroup leaf per spare (see the module's docstring)."""
        return self._containment.leaf_parent is not None

    async def take(self, reaper: ChildReaper, env: dict[str, str], timeout_s: float) -> Namespace:
        """A ready namespace, or one made now; SandboxUnavailable without pasta, SpawnFailed if one fails."""
        self._reaper = reaper
        if self.programs().missing() is not None:  # installed since the last look?
            self._known = None
        programs = self.programs()
        missing = programs.missing()
        if missing is not None:
            raise SandboxUnavailable(f"this session's profile has network, and {missing}", reason=missing)
        self.taken += 1
        while self._ready:
            namespace = self._ready.pop(0)
            if namespace.alive():
                self.made_ahead += 1
                return namespace
            namespace.discard()
        started = time.monotonic()
        try:
            namespace = await make_namespace(programs, new_leaf(self._containment), reaper, env, timeout_s)
        except SpawnFailed as exc:
            self.failure = str(exc)
            raise
        self.failure = None
        log.debug("made a network namespace at an open in %.0f ms", (time.monotonic() - started) * 1000)
        return namespace

    def fill(self, env: dict[str, str]) -> None:
        """Make spares up to the count, in the background. Called once an open is done: made during it, they
        took the CPU its program starts with (a workspace open 100 ms rather than 52 here)."""
        if self.failure is not None:  # made again by the next open that takes one (and says why not)
            return
        if self._filling is None and len(self._ready) < self.spares and self._reaper is not None:
            self._filling = asyncio.get_running_loop().create_task(self._make_spares(env))

    async def _make_spares(self, env: dict[str, str]) -> None:
        try:
            while len(self._ready) < self.spares:
                programs = self.programs()
                if programs.missing() is not None or self._reaper is None:
                    return
                try:
                    self._making = new_leaf(self._containment)
                    made = await make_namespace(programs, self._making, self._reaper, env, 30.0)
                except SpawnFailed as exc:
                    log.warning("sandbox: cannot make a network namespace ahead: %s", exc)
                    self.failure = str(exc)
                    return
                self._ready.append(made)
        finally:
            self._filling = self._making = None

    def reset(self, spares: int) -> None:
        """A reloaded configuration (programs or count may have changed): the spares are made again."""
        self.spares, self.failure, self._known = spares, None, None
        self.close()

    def close(self) -> None:
        """End the spares (at shutdown and handover: only taken namespaces belong to sessions)."""
        leaves = [namespace.scope for namespace in self._ready]
        if self._making is not None:  # its task may never run again: it cannot end what it started
            leaves.append(self._making)
        if self._filling is not None:
            self._filling.cancel()
        self._ready, self._filling, self._making = [], None, None
        for leaf in leaves:
            leaf.kill_all()
        deadline = time.monotonic() + 1.0  # the killed leave their leaves a moment after they are reaped
        for leaf in leaves:
            while not leaf.remove() and time.monotonic() < deadline:
                if self._reaper is not None:
                    self._reaper.reap()
                time.sleep(0.005)
