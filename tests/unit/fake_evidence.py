"""A scripted session for the readiness tracker: a clock the test moves (as trio's ``MockClock``), a process table
it edits, and the output, terminal flags and screen it sets. It satisfies ``readiness.evidence.Evidence``, so a
race seen once with a real program replays here in microseconds (``test_tracker.py``).

The model is as small as the verdict needs: one foreground group on the session's terminal, optionally one relay in
front of it (local: a pty of its own with the program's group behind it; or opaque, like ssh), and one wait, that of
the group that reads the input.
"""

from __future__ import annotations

import termios
from collections.abc import Callable
from dataclasses import dataclass, field

from ptyd.backends.os import procfs
from ptyd.backends.readiness import blocked_read
from ptyd.backends.readiness.blocked_read import TtyWait, Wait
from ptyd.backends.readiness.foreground import RunCounts
from ptyd.backends.readiness.relay import Target

TTY = (136 << 8) | 0  # the session's own terminal, /dev/pts/0
INNER_TTY = (136 << 8) | 3  # a local relay's terminal, /dev/pts/3
RAW = 0  # readline, vim, an event loop: no canonical mode, no echo
CANONICAL = termios.ICANON | termios.ECHO  # cat, a plain read: the line discipline echoes and assembles lines
SECRET = termios.ICANON  # getpass, sudo, read -s: canonical, echo off


@dataclass
class Proc:
    pgid: int
    runs: int = 0  # times scheduled (schedstat)
    rchar: int = 0  # bytes read (io)
    busy_ns: int = 0  # CPU run and wait time
    pending: bool = False  # a signal pending (blocked, or not yet handled)
    child: bool = False  # has a live child


@dataclass
class Relay:
    pid: int
    opaque: str | None = None  # the command name of an opaque relay (ssh); None: a local relay
    asleep: bool = True  # in its wait, so it has copied what its program wrote
    rchar: int = 0
    queued: int = 0  # input queued on its terminal, not yet read by the program behind it


@dataclass
class FakeEvidence:
    clock: float = 1000.0
    procs: dict[int, Proc] = field(default_factory=lambda: {100: Proc(100)})
    fg: int | None = 100  # the session terminal's foreground group
    inner: int = 300  # behind a local relay: the group on the relay's terminal
    relay: Relay | None = None
    wait: TtyWait = field(default_factory=lambda: direct(100))  # how the reading group waits
    lflag: int | None = RAW  # the session's terminal
    inner_lflag: int | None = RAW  # a local relay's terminal
    queued: int = 0  # input not yet read off the session's terminal
    output_bytes: int = 0  # output received
    output_at: float = 1000.0  # when it last arrived
    output_end: bytes = b""  # its latest bytes
    alt: bool = False  # the alternate screen is up
    line: int = 0  # the cursor's line in the transcript
    text: str = "$ "  # the cursor's row up to the cursor
    timer: bool = False  # an armed timerfd in the reader's epoll set
    target_calls: int = 0
    # Run once after the next target() has looked, before it returns: the program moving on between two looks.
    after_target: Callable[[], None] | None = None

    # --- the Evidence protocol --------------------------------------------------------------------------

    def now(self) -> float:
        return self.clock

    def foreground(self) -> int | None:
        return self.fg

    def candidates(self, pgid: int) -> list[int]:
        return sorted(pid for pid, proc in self.procs.items() if proc.pgid == pgid)

    def target(self) -> Target | None:
        self.target_calls += 1
        if self.fg is None:
            return None
        found = self._target(self.fg)
        if self.after_target is not None:
            hook, self.after_target = self.after_target, None
            hook()
        return found

    def _target(self, fg: int) -> Target:
        relay = self.relay
        if relay is None:
            return Target(fg, TTY, self.candidates(fg), self.wait, None, None, 0)
        if relay.opaque is not None:
            return Target(fg, TTY, self.candidates(fg), self.wait, None, relay.opaque, 0)
        return Target(self.inner, INNER_TTY, self.candidates(self.inner), self.wait, 3, None, 1, (relay.pid,))

    def own_tty(self) -> int:
        return TTY

    def flags(self, target: Target) -> tuple[int, int | None]:
        if target.pts_index is None:
            return 0, self.lflag
        return (self.relay.queued if self.relay else 0), self.inner_lflag

    def local_flags(self) -> int | None:
        return self.lflag

    def input_queued(self) -> int:
        return self.queued

    def received(self) -> int:
        return self.output_bytes

    def last_output(self) -> float:
        return self.output_at

    def output_tail(self) -> bytes:
        return self.output_end

    def run_counts(self, pids: list[int], pgid: int) -> RunCounts:
        return {(pid, pid): self.procs[pid].runs for pid in self._members(pids, pgid)}

    def rchar(self, pids: list[int], pgid: int) -> dict[int, int]:
        return {pid: self.procs[pid].rchar for pid in self._members(pids, pgid)}

    def busy_ns(self, pids: list[int], pgid: int) -> int:
        return sum(self.procs[pid].busy_ns for pid in self._members(pids, pgid))

    def signal_pending(self, pids: list[int], pgid: int) -> bool | None:
        members = self._members(pids, pgid)
        return any(self.procs[pid].pending for pid in members) if members else None

    def relay_read(self, pid: int) -> int | None:
        return self.relay.rchar if self.relay is not None and self.relay.pid == pid else None

    def relay_asleep(self, pid: int) -> bool:
        return self.relay is not None and self.relay.pid == pid and self.relay.asleep

    def timer_armed(self, pid: int, epfd: int) -> bool:
        return self.timer

    def running_child(self, pids: list[int], pgid: int) -> bool:
        return any(self.procs[pid].child for pid in self._members(pids, pgid))

    def alt_screen(self) -> bool:
        return self.alt

    def cursor_line(self) -> int:
        return self.line

    def cursor_text(self) -> str:
        return self.text

    def _members(self, pids: list[int], pgid: int) -> list[int]:
        return [pid for pid in pids if pid in self.procs and self.procs[pid].pgid == pgid]

    # --- the script ------------------------------------------------------------------------------------

    def advance(self, seconds: float) -> None:
        self.clock += seconds

    def output(self, data: bytes) -> None:
        self.output_bytes += len(data)
        self.output_at = self.clock
        self.output_end = (self.output_end + data)[-64:]


def direct(pid: int) -> TtyWait:
    """A blocking read of the terminal (or select/poll on it with no timeout)."""
    return TtyWait(Wait.DIRECT, pid)


def helped(pid: int) -> TtyWait:
    """A direct wait while another thread of the program is running (fish polls while a helper highlights)."""
    return TtyWait(Wait.DIRECT, pid, multiplexed=True, helped=True)


def reader_thread(pid: int) -> TtyWait:
    """A blocking read of the terminal by a thread that is not its process's first (jline's, in jshell)."""
    assert blocked_read.TABLE is not None, "no syscall table for this machine"
    call = procfs.Syscall(min(blocked_read.TABLE.reads), (0, 0, 0, 0, 0, 0))
    return TtyWait(Wait.DIRECT, pid, call, leader=False)


def _epoll_nr() -> int:
    assert blocked_read.TABLE is not None, "no syscall table for this machine"
    return min(blocked_read.TABLE.epoll & blocked_read.TABLE.int_ms)


def event_loop(pid: int, timeout: float | None = None, epfd: int = 5) -> TtyWait:
    """An epoll_wait with the terminal in its interest list, timing out after ``timeout`` (None: never)."""
    ms = -1 if timeout is None else int(timeout * 1000)
    call = procfs.Syscall(_epoll_nr(), (epfd, 0, 0, ms & (2**64 - 1), 0, 0))
    kind = Wait.TIMED if timeout is not None and timeout < blocked_read.LONG_WAIT_S else Wait.EVENT_LOOP
    return TtyWait(kind, pid, call, multiplexed=True, timeout=timeout)


def timed(pid: int, timeout: float) -> TtyWait:
    """A poll of the terminal that times out soon (vim's key-sequence timeout, htop's redraw)."""
    return TtyWait(Wait.TIMED, pid, None, multiplexed=True, timeout=timeout)


NOT_WAITING = blocked_read.NOT_WAITING
