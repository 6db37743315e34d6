"""Is the terminal's foreground process group blocked waiting to read the terminal? Asked of the kernel.

For every thread of every process in the tty's foreground group, the current syscall (``/proc/.../syscall``)
says what it waits on: a ``read`` of an fd that is this tty, or ``select``/``poll``/``epoll`` whose set holds
such an fd for reading. The fd numbers are resolved to device numbers, so ``less`` reading ``/dev/tty`` on fd 3
counts and ``cat`` reading a pipe does not. Where ptrace access is denied (non-dumpable programs such as sudo
or ssh), wchan and the tty's own flags stand in: a tty read wait, or echo off with canonical input on (a
password prompt), counts as waiting.
"""

from __future__ import annotations

import platform
import struct
import termios
from collections.abc import Iterable
from dataclasses import dataclass

from ptyd.backends import procfs


@dataclass(frozen=True, slots=True)
class SyscallTable:
    reads: frozenset[int]  # arg0 is the fd
    select: frozenset[int]  # arg0 nfds, arg1 readfds
    poll: frozenset[int]  # arg0 pollfd array, arg1 count
    epoll: frozenset[int]  # arg0 epoll fd


_TABLES = {
    # Linux UAPI numbers: read, pread64, readv, preadv, preadv2 / select, pselect6 / poll, ppoll /
    # epoll_wait, epoll_pwait, epoll_pwait2.
    "x86_64": SyscallTable(
        frozenset({0, 17, 19, 295, 327}), frozenset({23, 270}), frozenset({7, 271}), frozenset({232, 281, 441})
    ),
    "aarch64": SyscallTable(
        frozenset({63, 67, 65, 69, 286}), frozenset({72}), frozenset({73}), frozenset({22, 441})
    ),
}
TABLE = _TABLES.get(platform.machine())

POLLIN, POLLPRI = 0x1, 0x2
EPOLLIN, EPOLLPRI = 0x1, 0x2
_TTY_READ_WCHANS = ("n_tty_read", "wait_woken", "poll_schedule_timeout", "do_select", "do_sys_poll", "ep_poll")


def _reads_tty(pid: int, call: procfs.Syscall, tty_rdev: int) -> bool:
    assert TABLE is not None
    nr, args = call.nr, call.args
    if nr in TABLE.reads:
        return procfs.fd_rdev(pid, args[0]) == tty_rdev
    if nr in TABLE.select:
        nfds, readfds = args[0], args[1]
        if not readfds or nfds <= 0 or nfds > 65536:
            return False
        bits = procfs.read_memory(pid, readfds, (nfds + 7) // 8)
        if bits is None:
            return False
        return any(
            bits[fd >> 3] & (1 << (fd & 7)) and procfs.fd_rdev(pid, fd) == tty_rdev for fd in range(nfds)
        )
    if nr in TABLE.poll:
        array, count = args[0], args[1]
        if count <= 0 or count > 4096:
            return False
        raw = procfs.read_memory(pid, array, count * 8)
        if raw is None:
            return False
        for fd, events, _ in struct.iter_unpack("ihh", raw):
            if fd >= 0 and events & (POLLIN | POLLPRI) and procfs.fd_rdev(pid, fd) == tty_rdev:
                return True
        return False
    if nr in TABLE.epoll:
        return any(
            events & (EPOLLIN | EPOLLPRI) and procfs.fd_rdev(pid, fd) == tty_rdev
            for fd, events in procfs.epoll_targets(pid, args[0])
        )
    return False


def _secret_prompt(master_fd: int) -> bool:
    """Echo off with canonical input on: what getpass(), sudo and ssh set while they read a secret."""
    try:
        lflag = termios.tcgetattr(master_fd)[3]
    except termios.error:
        return False
    return not lflag & termios.ECHO and bool(lflag & termios.ICANON)


def group_waits_on_tty(pids: Iterable[int], pgid: int, tty_rdev: int, master_fd: int) -> bool:
    """True if any thread of any process of group ``pgid`` among ``pids`` is blocked reading the tty."""
    for pid in pids:
        stat = procfs.read_stat(pid)
        if stat is None or stat.pgrp != pgid or stat.state in ("Z", "X", "T", "t"):
            continue
        for tid in procfs.tasks(pid):
            tstat = procfs.read_stat(pid, tid) if tid != pid else stat
            if tstat is None or tstat.state not in ("S", "D"):
                continue
            if TABLE is not None:
                try:
                    call = procfs.read_syscall(pid, tid)
                except PermissionError:
                    call = None
                    if _fallback_waits(pid, tid, master_fd):
                        return True
                    continue
                if call is not None and _reads_tty(pid, call, tty_rdev):
                    return True
            elif _fallback_waits(pid, tid, master_fd):
                return True
    return False


def _fallback_waits(pid: int, tid: int, master_fd: int) -> bool:
    wchan = procfs.read_wchan(pid, tid)
    if wchan and wchan != "0":
        return wchan.startswith(_TTY_READ_WCHANS)
    return _secret_prompt(master_fd)
