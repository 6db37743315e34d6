"""Who really waits for the input: the terminal's foreground group, or the program behind a relay.

A relay (``script``, ``sudo`` with use_pty, ``su --pty``, Python's ``pty.spawn``, ``expect``, ``ssh``, ``docker
exec -it``) runs the real program on a terminal of its own and copies bytes both ways, so it sits in a
select/poll/epoll on our tty all the time. Such a waiter is recognised by the other fds in its wait set:

- a pty master (``/dev/ptmx``) whose slave is the controlling terminal of processes of this session: a *local*
  relay. Its slave's foreground group is probed instead, on that terminal, and so on inward (``sudo`` in
  ``script``), which is as exact as probing our own tty;
- a socket or another tty device (ssh, docker/kubectl exec, mosh, a serial console), or a pty master whose far
  side is not in this session, or a multiplexed wait that cannot be seen (a non-dumpable relay of another user):
  an *opaque* relay. Nothing local says whether the far side waits; the readiness tracker then judges from the
  screen and the far shell's marks.

A terminal multiplexer run inside the session (tmux, screen) is a local relay too, found from the other side:
its client in front waits on its socket only, having handed our terminal to its server, which reads it with no
terminal of its own and holds a pty master per pane. With one pane the pane is followed; with several, which one
has the keys cannot be seen, and the server is taken as opaque.

A Unix socket whose other end the waiter holds itself is an event loop's wake-up pair (asyncio's, in IPython and
every prompt_toolkit or Textual app), not a relay: such a program is probed like any other.
"""

from __future__ import annotations

import contextlib
import os
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ptyd.backends.os import procfs, tty
from ptyd.backends.readiness import blocked_read, sockets
from ptyd.backends.readiness.blocked_read import TtyWait, Wait

MAX_DEPTH = 4  # relays nested deeper than this are taken as opaque
SETTLED_START_S = 1.0  # a process this old has left (or stayed in) the terminal's session for good
_PTMX = ("/dev/ptmx", "/dev/pts/ptmx")
# Character devices a relay may copy to: ttys, serial ports, USB serial, other ptys.
_TTY_MAJORS = frozenset({4, 5, 166, 188, 204, *range(136, 144)})


@dataclass(frozen=True, slots=True)
class Target:
    """The group whose wait decides readiness, the terminal it waits on, and how it was reached."""

    pgid: int
    tty_rdev: int
    pids: list[int]  # processes that may be in the group
    wait: TtyWait
    pts_index: int | None  # None: the session's own terminal; else the /dev/pts/N of a local relay
    relay: str | None  # the opaque relay in front (its command name), if one is
    hops: int  # local relays followed
    relays: tuple[int, ...] = ()  # the local relays followed (their pids), outermost first

    def flags(self, master_fd: int) -> tuple[int, int | None]:
        """(bytes queued unread on the target's terminal, its local-mode flags or None when unreadable).
        A local relay's slave is opened just for the question and closed at once: holding it would keep the
        relay from seeing its program's terminal close."""
        if self.pts_index is None:
            return 0, tty.local_flags(master_fd)
        try:
            fd = _open_pts(self.pts_index, self.relays[-1] if self.relays else 0)
        except OSError:
            return 0, None
        try:
            return tty.input_queued(fd), tty.local_flags(fd)
        finally:
            os.close(fd)


def _pts_paths(index: int, relay_pid: int) -> list[str]:
    """Where the relay's /dev/pts/N is: seen through its root first, since a sandboxed session has a devpts of its
    own whose numbers repeat the daemon's; the daemon's own /dev/pts when that root cannot be looked into."""
    own = f"/dev/pts/{index}"
    return [f"/proc/{relay_pid}/root{own}", own] if relay_pid > 0 else [own]


def _open_pts(index: int, relay_pid: int) -> int:
    paths = _pts_paths(index, relay_pid)
    for path in paths[:-1]:
        with contextlib.suppress(PermissionError, FileNotFoundError):
            return os.open(path, os.O_RDONLY | os.O_NOCTTY | os.O_NONBLOCK)
    return os.open(paths[-1], os.O_RDONLY | os.O_NOCTTY | os.O_NONBLOCK)


def _pts_device(index: int, relay_pid: int) -> tuple[int, int] | None:
    """(device number, devpts instance) of the relay's /dev/pts/N."""
    for path in _pts_paths(index, relay_pid):
        with contextlib.suppress(OSError):
            st = os.stat(path)
            return st.st_rdev, st.st_dev
    return None


def _on_terminal(pid: int, rdev: int, instance: int) -> bool:
    """Whether a standard fd of ``pid`` is that very terminal: a sandbox's devpts repeats the host's numbers, so
    /proc's tty_nr alone (a device number) may name the session's own terminal instead."""
    for fd in (0, 1, 2):
        with contextlib.suppress(OSError):
            st = os.stat(f"/proc/{pid}/fd/{fd}")
            if st.st_rdev == rdev and st.st_dev == instance:
                return True
    return False


def _is_tty_device(pid: int, fd: int) -> bool:
    try:
        st = os.stat(f"/proc/{pid}/fd/{fd}")
    except OSError:
        return False
    return stat.S_ISCHR(st.st_mode) and os.major(st.st_rdev) in _TTY_MAJORS


def _inner_group(session_pids: list[int], rdev: int, instance: int) -> tuple[int, list[int]] | None:
    """The foreground group of terminal ``rdev`` (of devpts ``instance``) among the session's processes, with the
    candidates."""
    stats = [s for s in (procfs.read_stat(pid) for pid in session_pids) if s is not None]
    on = (s for s in stats if s.tty_nr == rdev and s.tpgid > 0)
    tpgid = next((s.tpgid for s in on if _on_terminal(s.pid, rdev, instance)), None)
    if tpgid is None:
        return None
    return tpgid, [s.pid for s in stats if s.pgrp == tpgid]


def _comm(pid: int) -> str:
    st = procfs.read_stat(pid)
    return st.comm if st is not None else "relay"


@dataclass(slots=True)
class Known:
    """What one session's probes learnt and keep: a relay is followed even while it is busy copying (out of its
    wait), or the program behind it would seem to change whenever the relay runs."""

    relays: dict[int, tuple[int, int]] = field(default_factory=dict)  # pid -> (start time, its master's pty index)
    server: tuple[int, int, int] | None = None  # a multiplexer's server on our terminal: pid, start time, pty index
    outside: dict[int, tuple[bool, float]] = field(default_factory=dict)  # pid -> (on no terminal, first seen)


def _known_relay(known: Known, candidates: list[int], pgid: int) -> tuple[int, int] | None:
    """(pid, pty index) of a relay of group ``pgid`` seen before."""
    for pid in candidates:
        entry = known.relays.get(pid)
        if entry is None:
            continue
        stat = procfs.read_stat(pid)
        if stat is not None and stat.starttime == entry[0] and stat.pgrp == pgid:
            return pid, entry[1]
        del known.relays[pid]
    return None


def _known_server(known: Known) -> tuple[int, int] | None:
    if known.server is None:
        return None
    pid, starttime, inner = known.server
    stat = procfs.read_stat(pid)
    if stat is not None and stat.starttime == starttime:
        return pid, inner
    known.server = None
    return None


def _server_wait(known: Known, pids: list[int], pgid: int, tty_rdev: int) -> TtyWait:
    """A multiplexer's server reading our terminal with no controlling terminal of its own (tmux and screen clients
    hand the terminal to their server and wait on its socket only). Which processes have none is remembered per
    pid once they are past their start (a server leaves the terminal's session just after its fork), so a busy
    session's probe reads the stat of new processes only."""
    alive = set(pids)
    for pid in [pid for pid in known.outside if pid not in alive]:
        del known.outside[pid]
    now = time.monotonic()
    for pid in pids:
        outside, seen = known.outside.get(pid, (False, now))
        stat = None
        if now - seen < SETTLED_START_S:
            stat = procfs.read_stat(pid)
            outside = stat is not None and stat.tty_nr == 0 and stat.pgrp != pgid
            known.outside[pid] = (outside, seen)
        if outside:
            stat = stat or procfs.read_stat(pid)
            if stat is not None and stat.state == "S":
                wait = blocked_read.group_wait([pid], stat.pgrp, tty_rdev, -1)
                # A server holds its panes' pty masters; any other reader out there (a setsid'd job reading the
                # terminal it inherited) is not what the send waits for.
                if wait.kind != Wait.NONE and any(procfs.fd_target(pid, fd) in _PTMX for fd in wait.others):
                    return wait
    return blocked_read.NOT_WAITING


def _plain(wait: TtyWait) -> bool:
    """A wait on this terminal alone: a read, or a select/poll on no other fd."""
    return wait.kind != Wait.NONE and (not wait.multiplexed or (wait.call is not None and not wait.others))


def asleep(pid: int) -> bool:
    """The relay sleeps in its wait (so it has copied what its program wrote): blocked in a multiplexed wait, or
    merely asleep where its syscall cannot be read."""
    stat = procfs.read_stat(pid)
    if stat is None or stat.state != "S":
        return False
    for tid in procfs.tasks(pid):
        try:
            call = procfs.read_syscall(pid, tid)
        except PermissionError:
            return True
        if call is not None and blocked_read.TABLE is not None and call.nr in blocked_read.TABLE.multiplexed:
            return True
    return False


def innermost(
    pgid: int,
    candidates: list[int],
    tty_rdev: int,
    master_fd: int,
    session_pids: Callable[[], list[int]],
    known: Known,
) -> Target:
    """Follow local relays from the group ``pgid`` on our terminal inward to the group that really reads."""
    pts: int | None = None
    relays: list[int] = []
    for hops in range(MAX_DEPTH + 1):
        known_relay = _known_relay(known, candidates, pgid) if known.relays else None
        wait = blocked_read.group_wait(candidates, pgid, tty_rdev, master_fd if pts is None else -1)
        server = hops == 0 and known_relay is None and wait.kind == Wait.NONE
        if server:  # looked at afresh while in its wait: a pane may have been opened since
            # The candidates are every process of the session unless the shell is alone in front, with no child.
            wait = _server_wait(known, candidates, pgid, tty_rdev) if len(candidates) > 1 else blocked_read.NOT_WAITING
            known_relay = _known_server(known) if wait.kind == Wait.NONE else None
        if known_relay is not None and wait.pid != known_relay[0] and _plain(wait):
            known_relay = None  # a program the relay started in front reads this terminal itself (mc's editor)
        inner = known_relay[1] if known_relay is not None else None
        relay_pid = known_relay[0] if known_relay is not None else 0
        opaque = False
        if inner is None:
            if wait.kind == Wait.NONE or _plain(wait):
                return Target(pgid, tty_rdev, candidates, wait, pts, None, hops, tuple(relays))
            if wait.call is None:  # a multiplexed wait we may not look into: assume the worst
                return Target(pgid, tty_rdev, candidates, wait, pts, _comm(wait.pid), hops, tuple(relays))
            masters = 0
            for fd in wait.others:
                target = procfs.fd_target(wait.pid, fd)
                if target in _PTMX:
                    masters += 1
                    inner = procfs.pty_index(wait.pid, fd)
                    relay_pid = wait.pid
                    opaque = opaque or inner is None
                elif target.startswith("socket:"):
                    opaque = opaque or sockets.leads_out(wait.pid, target)
                elif _is_tty_device(wait.pid, fd):
                    opaque = True
            if masters > 1:  # several terminals behind it (a multiplexer's panes): which one has the keys is unseen
                inner, opaque = None, True
                if server:
                    known.server = None
        if inner is not None:
            device = _pts_device(inner, relay_pid) if hops < MAX_DEPTH else None
            rdev = device[0] if device is not None else None
            group = _inner_group(session_pids(), *device) if device is not None else None
            if rdev is not None and group is not None:
                relay_stat = procfs.read_stat(relay_pid)
                if relay_stat is not None and server:
                    known.server = (relay_pid, relay_stat.starttime, inner)
                elif relay_stat is not None:
                    known.relays[relay_pid] = (relay_stat.starttime, inner)
                relays.append(relay_pid)
                pgid, candidates = group
                tty_rdev, pts = rdev, inner
                continue
            opaque = True  # its far side is not in this session (a container's terminal), or nested too deep
        relay = _comm(wait.pid) if opaque else None
        return Target(pgid, tty_rdev, candidates, wait, pts, relay, hops, tuple(relays))
    raise AssertionError("unreachable: the last turn returns")
