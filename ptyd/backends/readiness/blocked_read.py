"""Is the terminal's foreground process group blocked waiting to read the terminal? Asked of the kernel.

For every thread of every process in the tty's foreground group, the current syscall (``/proc/.../syscall``)
says what it waits on: a ``read`` of an fd that is this tty, or ``select``/``poll``/``epoll`` whose set holds
such an fd for reading. The fd numbers are resolved to device numbers, so ``less`` reading ``/dev/tty`` on fd 3
counts and ``cat`` reading a pipe does not. Where ptrace access is denied (non-dumpable programs such as sudo
or ssh), wchan and the tty's own flags stand in: a tty read wait, or echo off with canonical input on (a
password prompt), counts as waiting.
"""

from __future__ import annotations

import enum
import os
import platform
import struct
import termios
from collections.abc import Iterable
from dataclasses import dataclass, replace

from ptyd.backends.os import procfs
from ptyd.backends.os.tty import local_flags


@dataclass(frozen=True, slots=True)
class SyscallTable:
    reads: frozenset[int]  # arg0 is the fd
    select: frozenset[int]  # arg0 nfds, arg1 readfds; arg4 timeout (timeval for select, timespec for pselect6)
    poll: frozenset[int]  # arg0 pollfd array, arg1 count; arg2 timeout (int ms for poll, timespec for ppoll)
    epoll: frozenset[int]  # arg0 epoll fd; arg3 timeout (int ms, timespec for epoll_pwait2)
    timeval: frozenset[int]  # select: its timeout is a timeval (µs), not a timespec
    int_ms: frozenset[int]  # poll, epoll_wait, epoll_pwait: an int of milliseconds

    @property
    def multiplexed(self) -> frozenset[int]:
        return self.select | self.poll | self.epoll

    @property
    def in_memory(self) -> frozenset[int]:
        """Waits whose fd set or timeout is in the program's memory (epoll's interest list is the kernel's)."""
        return self.select | self.poll | (self.epoll - self.int_ms)


_TABLES = {
    # Linux UAPI numbers: read, pread64, readv, preadv, preadv2 / select, pselect6 / poll, ppoll /
    # epoll_wait, epoll_pwait, epoll_pwait2.
    "x86_64": SyscallTable(
        reads=frozenset({0, 17, 19, 295, 327}),
        select=frozenset({23, 270}),
        poll=frozenset({7, 271}),
        epoll=frozenset({232, 281, 441}),
        timeval=frozenset({23}),
        int_ms=frozenset({7, 232, 281}),
    ),
    "aarch64": SyscallTable(
        reads=frozenset({63, 67, 65, 69, 286}),
        select=frozenset({72}),
        poll=frozenset({73}),
        epoll=frozenset({22, 441}),
        timeval=frozenset(),
        int_ms=frozenset({22}),
    ),
}
TABLE = _TABLES.get(platform.machine())

POLLIN, POLLPRI = 0x1, 0x2
DEV_TTY = os.makedev(5, 0)  # /dev/tty: the opener's controlling terminal, which for the foreground group is ours
EPOLLIN, EPOLLPRI = 0x1, 0x2
_TTY_READ_WCHANS = (
    "n_tty_read",
    "wait_woken",
    "poll_schedule_timeout",
    "do_select",
    "do_sys_poll",
    "ep_poll",
)


def is_tty(pid: int, fd: int, tty_rdev: int) -> bool:
    rdev = procfs.fd_rdev(pid, fd)
    return rdev is not None and rdev in (tty_rdev, DEV_TTY)


class Wait(enum.IntEnum):
    """How a group waits on the tty. An event loop (epoll) keeps the tty registered while it does other
    things, even while it shuts down (node sits ~15 ms in epoll_wait after ``.exit``), so that evidence must
    hold for a while before it counts; a blocking read or select/poll on the tty counts at once."""

    NONE = 0
    TIMED = 1  # a wait that times out soon: the program will act on its own (vim after a lone ESC)
    EVENT_LOOP = 2
    DIRECT = 3


LONG_WAIT_S = 2.0  # a tty wait with at least this timeout (or none) is a wait for input


def timeout_of(pid: int, call: procfs.Syscall) -> float | None:
    """The timeout the waiting syscall was given, in seconds; None for none (or unreadable)."""
    assert TABLE is not None
    nr = call.nr
    if nr in TABLE.select:
        arg = call.args[4]
    elif nr in TABLE.poll:
        arg = call.args[2]
    else:
        arg = call.args[3]
    if nr in TABLE.int_ms:
        ms = arg - (1 << 64) if arg >= 1 << 63 else arg  # the register holds a sign-extended int
        ms = ms - (1 << 32) if ms >= 1 << 31 else ms
        return None if ms < 0 else ms / 1000
    if not arg:
        return None
    raw = procfs.read_memory(pid, arg, 16)
    if raw is None:
        return None
    sec, frac = struct.unpack("qq", raw)
    return float(sec + frac / (1e6 if nr in TABLE.timeval else 1e9))


def wait_fds(pid: int, call: procfs.Syscall) -> list[int]:
    """The fds a thread blocked in read/select/poll/epoll waits to read."""
    assert TABLE is not None
    nr, args = call.nr, call.args
    if nr in TABLE.reads:
        return [args[0]]
    if nr in TABLE.select:
        nfds, readfds = args[0], args[1]
        if not readfds or nfds <= 0 or nfds > 65536:
            return []
        bits = procfs.read_memory(pid, readfds, (nfds + 7) // 8)
        if bits is None:
            return []
        return [fd for fd in range(nfds) if bits[fd >> 3] & (1 << (fd & 7))]
    if nr in TABLE.poll:
        array, count = args[0], args[1]
        if count <= 0 or count > 4096:
            return []
        raw = procfs.read_memory(pid, array, count * 8)
        if raw is None:
            return []
        return [fd for fd, events, _ in struct.iter_unpack("ihh", raw) if fd >= 0 and events & (POLLIN | POLLPRI)]
    if nr in TABLE.epoll:
        return [fd for fd, events in procfs.epoll_targets(pid, args[0]) if events & (EPOLLIN | EPOLLPRI)]
    return []


def _reads_tty(pid: int, call: procfs.Syscall, tty_rdev: int) -> tuple[Wait, tuple[int, ...], float | None]:
    """How the thread waits on the tty, the other fds it waits on with it, and the wait's timeout."""
    assert TABLE is not None
    fds = wait_fds(pid, call)
    others = tuple(fd for fd in fds if not is_tty(pid, fd, tty_rdev))
    if len(others) == len(fds):
        return Wait.NONE, (), None
    if call.nr in TABLE.reads:
        return Wait.DIRECT, (), None
    timeout = timeout_of(pid, call)
    if timeout is not None and timeout < LONG_WAIT_S:
        return Wait.TIMED, others, timeout
    return (Wait.EVENT_LOOP if call.nr in TABLE.epoll else Wait.DIRECT), others, timeout


@dataclass(frozen=True, slots=True)
class TtyWait:
    """The strongest wait on the tty found in a group, and which thread waits how (for the relay check)."""

    kind: Wait
    pid: int = 0
    call: procfs.Syscall | None = None  # None when judged from wchan alone (no ptrace access)
    multiplexed: bool = False  # waits on other fds too (select/poll/epoll), or cannot be seen (wchan)
    others: tuple[int, ...] = ()  # the other fds of a multiplexed wait (a relay's pty master, socket, ...)
    timeout: float | None = None  # the multiplexed wait's timeout in seconds (None: none)
    # Another thread of the waiting process was running, runnable or in disk sleep: at work for it (fish's
    # highlighting), and the waiting thread will act on what it finishes.
    helped: bool = False
    # The waiting thread is its process's first. Else it is a reader thread, which reads the terminal all along
    # while the program works elsewhere (jline's in jshell, whose JVM evaluates a line in other threads and another
    # process); False only where the thread was seen.
    leader: bool = True


NOT_WAITING = TtyWait(Wait.NONE)


def secret_prompt(lflag: int) -> bool:
    """Echo off with canonical input on: what getpass(), sudo and ssh set while they read a secret."""
    return not lflag & termios.ECHO and bool(lflag & termios.ICANON)


def group_wait(pids: Iterable[int], pgid: int, tty_rdev: int, master_fd: int) -> TtyWait:
    """How any thread of any process of group ``pgid`` among ``pids`` waits to read the tty (the strongest)."""
    best = NOT_WAITING
    for pid in pids:
        stat = procfs.read_stat(pid)
        if stat is None or stat.pgrp != pgid or stat.state in ("Z", "X", "T", "t"):
            continue
        # Every thread's state first: one seen asleep here is not the helper that woke the waiting thread since.
        threads = [(tid, procfs.read_stat(pid, tid) if tid != pid else stat) for tid in procfs.tasks(pid)]
        # Running, runnable, or in disk sleep (fish's highlighter stats each $PATH directory: on a cold cache, D).
        helped = any(tstat is not None and tstat.state in ("R", "D") for _, tstat in threads)
        for tid, tstat in threads:
            if tstat is None or tstat.state not in ("S", "D"):
                continue
            found = _thread_wait(pid, tid, tty_rdev, master_fd)
            if helped and found.kind:
                found = replace(found, helped=True)
            if found.kind == Wait.DIRECT and not found.multiplexed:
                return found
            if found.kind > best.kind:
                best = found
    return best


def _thread_wait(pid: int, tid: int, tty_rdev: int, master_fd: int) -> TtyWait:
    if TABLE is None:
        return _fallback_wait(pid, tid, master_fd)
    try:
        call = procfs.read_syscall(pid, tid)
    except PermissionError:
        return _fallback_wait(pid, tid, master_fd)
    if call is None:
        return NOT_WAITING
    # A select's or poll's fd set and timeout are read from the program's memory: valid only if the thread did not
    # run meanwhile (a blocked thread does not), else they may be what its stack holds after the call returned.
    runs = procfs.run_count(pid, tid) if call.nr in TABLE.in_memory else None
    kind, others, timeout = _reads_tty(pid, call, tty_rdev)
    if not kind or (runs is not None and procfs.run_count(pid, tid) != runs):
        return NOT_WAITING
    return TtyWait(kind, pid, call, call.nr not in TABLE.reads, others, timeout, leader=tid == pid)


def group_waits_on_tty(pids: Iterable[int], pgid: int, tty_rdev: int, master_fd: int) -> Wait:
    return group_wait(pids, pgid, tty_rdev, master_fd).kind


def _fallback_wait(pid: int, tid: int, master_fd: int) -> TtyWait:
    """Without ptrace access: a tty read in wchan, a multiplexed wait (which may be a relay: it cannot be seen),
    or (wchan hidden too) a password prompt's tty flags."""
    wchan = procfs.read_wchan(pid, tid)
    if wchan and wchan != "0":
        if wchan.startswith(_TTY_READ_WCHANS[:2]):
            return TtyWait(Wait.EVENT_LOOP, pid)
        if wchan.startswith(_TTY_READ_WCHANS[2:]):
            return TtyWait(Wait.EVENT_LOOP, pid, multiplexed=True)
        return NOT_WAITING
    lflag = local_flags(master_fd)
    return TtyWait(Wait.EVENT_LOOP, pid) if lflag is not None and secret_prompt(lflag) else NOT_WAITING
