"""Small, exception-safe readers of /proc. A process can vanish between any two reads; callers get None."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from typing import NamedTuple


class ProcStat(NamedTuple):
    pid: int
    comm: str
    state: str
    ppid: int
    pgrp: int
    session: int
    tty_nr: int  # the controlling terminal's device number, 0 for none
    tpgid: int
    starttime: int  # clock ticks since boot: with the pid, identifies a process across pid reuse


def read_file(path: str) -> bytes:
    """A small kernel file's content in three syscalls: the daemon reads a dozen of these per send, and Python's
    buffered ``open()`` adds a stat, an isatty ioctl and a seek to each. Raises OSError as ``open`` does."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        data = os.read(fd, 65536)
        if len(data) < 65536:
            return data
        chunks = [data]
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_stat(pid: int, tid: int | None = None) -> ProcStat | None:
    path = f"/proc/{pid}/stat" if tid is None else f"/proc/{pid}/task/{tid}/stat"
    try:
        raw = read_file(path)
    except OSError:
        return None
    # comm may hold spaces and parentheses: it ends at the last ')'.
    open_paren = raw.find(b"(")
    close_paren = raw.rfind(b")")
    if open_paren < 0 or close_paren < 0:
        return None
    fields = raw[close_paren + 2 :].split()
    try:
        return ProcStat(
            pid=pid,
            comm=raw[open_paren + 1 : close_paren].decode(errors="replace"),
            state=fields[0].decode(),
            ppid=int(fields[1]),
            pgrp=int(fields[2]),
            session=int(fields[3]),
            tty_nr=int(fields[4]),
            tpgid=int(fields[5]),
            starttime=int(fields[19]),
        )
    except (IndexError, ValueError):
        return None


def all_pids() -> list[int]:
    try:
        return [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return []


def tasks(pid: int) -> list[int]:
    try:
        return [int(name) for name in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return []


def children(pid: int) -> list[int]:
    """Direct children, from every thread's ``children`` list (CONFIG_PROC_CHILDREN)."""
    out: list[int] = []
    for tid in tasks(pid):
        try:
            out.extend(int(x) for x in read_file(f"/proc/{pid}/task/{tid}/children").split())
        except (OSError, ValueError):
            continue
    return out


def descendants(pid: int) -> list[int]:
    """``pid`` and every process below it that is still its descendant (reparented ones are not)."""
    out = [pid]
    i = 0
    while i < len(out):
        out.extend(children(out[i]))
        i += 1
    return out


class Syscall(NamedTuple):
    nr: int
    args: tuple[int, ...]


def read_syscall(pid: int, tid: int) -> Syscall | None:
    """The syscall a thread is blocked in; None if running, not in a syscall, or unreadable.

    Raises PermissionError when ptrace access is denied (a non-dumpable process such as sudo).
    """
    try:
        fields = read_file(f"/proc/{pid}/task/{tid}/syscall").split()
    except PermissionError:
        raise
    except OSError:
        return None
    if not fields or fields[0] == b"running":
        return None
    try:
        nr = int(fields[0])
        if nr < 0:
            return None
        return Syscall(nr, tuple(int(x, 16) for x in fields[1:7]))
    except ValueError:
        return None


def _schedstat(pid: int, tid: int, field: int) -> int | None:
    try:
        return int(read_file(f"/proc/{pid}/task/{tid}/schedstat").split()[field])
    except (OSError, IndexError, ValueError):
        return None


def run_count(pid: int, tid: int) -> int | None:
    """How many times the thread has been put on a CPU (schedstat's third field): it grows when it wakes."""
    return _schedstat(pid, tid, 2)


def busy_ns(pid: int, tid: int) -> int | None:
    """Time the thread has spent running or runnable, in nanoseconds: on a CPU plus waiting on a run queue
    (schedstat's first two fields). On a loaded machine a spinning thread gets little CPU but is never idle."""
    try:
        fields = read_file(f"/proc/{pid}/task/{tid}/schedstat").split()
        return int(fields[0]) + int(fields[1])
    except (OSError, IndexError, ValueError):
        return None


def group_members(pids: Iterable[int], pgid: int) -> Iterator[int]:
    """The processes of group ``pgid`` among ``pids`` (each checked: a pid may have left the group or died)."""
    for pid in pids:
        stat = read_stat(pid)
        if stat is not None and stat.pgrp == pgid:
            yield pid


def group_run_counts(pids: Iterable[int], pgid: int) -> dict[tuple[int, int], int]:
    """Run counts of every thread of the processes of group ``pgid`` among ``pids``."""
    out: dict[tuple[int, int], int] = {}
    for pid in group_members(pids, pgid):
        for tid in tasks(pid):
            count = run_count(pid, tid)
            if count is not None:
                out[(pid, tid)] = count
    return out


def group_busy_ns(pids: Iterable[int], pgid: int) -> int:
    """Running-or-runnable time of every thread of the processes of group ``pgid`` among ``pids``."""
    return sum(busy_ns(pid, tid) or 0 for pid in group_members(pids, pgid) for tid in tasks(pid))


def rchar(pid: int) -> int | None:
    """``/proc/PID/io``'s first counter, rchar, for all threads of the process."""
    try:
        return int(read_file(f"/proc/{pid}/io").split(b"\n", 1)[0].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def group_rchar(pids: Iterable[int], pgid: int) -> dict[int, int]:
    """Bytes each process of group ``pgid`` among ``pids`` has read (``/proc/PID/io`` rchar, all threads): it
    grows only when a read returns data, not when a reader wakes and sleeps again (as a canonical-mode tty
    reader does on every piece of a line that is still incomplete)."""
    out: dict[int, int] = {}
    for pid in group_members(pids, pgid):
        value = rchar(pid)
        if value is not None:
            out[pid] = value
    return out


def signals_pending(pid: int) -> bool | None:
    """Whether the process has a signal pending (``/proc/PID/status`` SigPnd or ShdPnd not empty); None if gone.
    A signal the process ignores is never pending: the kernel drops it when it is sent."""
    try:
        status = read_file(f"/proc/{pid}/status")
    except OSError:
        return None
    fields = (line.split() for line in status.split(b"\n") if line.startswith((b"SigPnd:", b"ShdPnd:")))
    return any(int(f[1], 16) for f in fields if len(f) > 1)


def read_wchan(pid: int, tid: int) -> str:
    try:
        return read_file(f"/proc/{pid}/task/{tid}/wchan").decode(errors="replace")
    except OSError:
        return ""


def fd_rdev(pid: int, fd: int) -> int | None:
    """The device number an fd of another process refers to, or None."""
    try:
        st = os.stat(f"/proc/{pid}/fd/{fd}")
    except OSError:
        return None
    return st.st_rdev if st.st_rdev else None


def fd_target(pid: int, fd: int) -> str:
    """What an fd of another process refers to (``/dev/ptmx``, ``socket:[123]``, ...), or empty."""
    try:
        return os.readlink(f"/proc/{pid}/fd/{fd}")
    except OSError:
        return ""


def pty_index(pid: int, fd: int) -> int | None:
    """For a pty master fd of another process, the index of its slave (``/dev/pts/N``)."""
    try:
        for line in read_file(f"/proc/{pid}/fdinfo/{fd}").splitlines():
            if line.startswith(b"tty-index:"):
                return int(line.split()[1])
    except (OSError, IndexError, ValueError):
        return None
    return None


def read_memory(pid: int, address: int, size: int) -> bytes | None:
    if size <= 0 or size > 65536 or address <= 0:
        return None
    try:
        fd = os.open(f"/proc/{pid}/mem", os.O_RDONLY)
    except OSError:
        return None
    try:
        data = os.pread(fd, size, address)
    except OSError:
        return None
    finally:
        os.close(fd)
    # Short when the range runs into unmapped memory or the process is exiting: a select set cut short raised
    # IndexError in the readiness check, an internal error for the send (mc quitting, once in a clean make test).
    return data if len(data) == size else None


def epoll_targets(pid: int, epfd: int) -> list[tuple[int, int]]:
    """(fd, events) registered in an epoll instance of another process."""
    try:
        lines = read_file(f"/proc/{pid}/fdinfo/{epfd}").splitlines()
    except OSError:
        return []
    out: list[tuple[int, int]] = []
    for line in lines:
        if line.startswith(b"tfd:"):
            parts = line.split()
            try:
                out.append((int(parts[1]), int(parts[3], 16)))
            except (IndexError, ValueError):
                continue
    return out


def environ_has(pid: int, marker: bytes) -> bool:
    try:
        return marker in read_file(f"/proc/{pid}/environ").split(b"\0")
    except OSError:
        return False
