"""What the readiness verdict reads, as one seam: the clock, the kernel's view of the program, the output.

``ReadinessTracker`` decides from nothing else, so a test can hand it a scripted ``Evidence`` (a clock it moves
and a process table it edits, ``tests/unit/fake_evidence.py``) and pin a race seen once with a real program as a
row of a table (``tests/unit/test_tracker.py``). ``LiveEvidence`` (``live``) asks the kernel and the session.
"""

from __future__ import annotations

from typing import Protocol

from ptyd.backends.readiness.foreground import RunCounts
from ptyd.backends.readiness.relay import Target


class Output(Protocol):
    """The session's output as the tracker counts it, and the input still on its way (``PtyChannel`` is one)."""

    @property
    def received(self) -> int: ...  # bytes read from the terminal so far

    @property
    def last_output(self) -> float: ...  # when output last arrived (the evidence clock's time)

    @property
    def tail(self) -> bytes: ...  # the latest output: whether it ends in a terminal query

    def input_queued(self) -> int: ...  # input written but not yet read by the program's terminal's reader


class Evidence(Protocol):
    """Every fact the readiness verdict reads. Each call is one fresh look: nothing here remembers for the
    tracker, which keeps what it saw."""

    def now(self) -> float:
        """Monotonic seconds."""
        ...

    def foreground(self) -> int | None:
        """The session terminal's foreground process group."""
        ...

    def candidates(self, pgid: int) -> list[int]:
        """Processes that may be in group ``pgid``."""
        ...

    def target(self) -> Target | None:
        """The group that reads the input: the foreground group, or the one behind local relays."""
        ...

    def own_tty(self) -> int:
        """The device number of the session's own terminal."""
        ...

    def flags(self, target: Target) -> tuple[int, int | None]:
        """(bytes queued unread on the target's terminal, its local-mode flags or None when unreadable)."""
        ...

    def local_flags(self) -> int | None:
        """The session's own terminal's local-mode flags, or None when unreadable."""
        ...

    def input_queued(self) -> int:
        """Input not yet read off the session's own terminal (held by the daemon or queued in the tty)."""
        ...

    def received(self) -> int:
        """Bytes of output read from the terminal so far."""
        ...

    def last_output(self) -> float:
        """When output last arrived."""
        ...

    def output_tail(self) -> bytes:
        """The latest bytes of output."""
        ...

    def run_counts(self, pids: list[int], pgid: int) -> RunCounts:
        """How often each thread of group ``pgid`` (among ``pids``) has been scheduled."""
        ...

    def rchar(self, pids: list[int], pgid: int) -> dict[int, int]:
        """Bytes each process of the group has read, by any means."""
        ...

    def busy_ns(self, pids: list[int], pgid: int) -> int:
        """CPU time the group ran or waited to run, in nanoseconds."""
        ...

    def signal_pending(self, pids: list[int], pgid: int) -> bool | None:
        """Whether a member of the group has a signal pending; None when it has no member to ask."""
        ...

    def relay_read(self, pid: int) -> int | None:
        """Bytes a local relay has read so far; None when unreadable."""
        ...

    def relay_asleep(self, pid: int) -> bool:
        """The relay sleeps in its wait, so it has copied what its program wrote."""
        ...

    def timer_armed(self, pid: int, epfd: int) -> bool:
        """A timerfd in the epoll instance ``epfd`` of ``pid`` is armed."""
        ...

    def running_child(self, pids: list[int], pgid: int) -> bool:
        """A member of the group has a live child (a command it started and awaits)."""
        ...

    def alt_screen(self) -> bool:
        """The terminal shows its alternate screen (a full-screen program)."""
        ...

    def cursor_line(self) -> int:
        """The cursor's line, counted from the top of the transcript (it grows as lines scroll)."""
        ...

    def cursor_text(self) -> str:
        """The cursor's row, up to the cursor."""
        ...
