"""LiveEvidence: the readiness evidence of one session, asked of the kernel (``/proc``, termios), the session's
output and its terminal. All of the verdict's I/O is here; ``tracker`` only decides."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import final

from ptyd.backends.os import procfs, tty
from ptyd.backends.os.spawn import Spawned
from ptyd.backends.readiness import loops, relay
from ptyd.backends.readiness.evidence import Output
from ptyd.backends.readiness.foreground import ForegroundGroup, RunCounts
from ptyd.backends.readiness.relay import Target
from ptyd.terminal.engine import TerminalEngine


@final
class LiveEvidence:
    def __init__(
        self,
        proc: Spawned,
        foreground: ForegroundGroup,
        session_pids: Callable[[], list[int]],
        output: Output,
        terminal: TerminalEngine,
    ) -> None:
        self._proc = proc
        self._foreground = foreground
        self._session_pids = session_pids
        self._output = output
        self._terminal = terminal
        self._relays = relay.Known()  # relays followed so far: kept across probes (see relay.Known)

    def now(self) -> float:
        return time.monotonic()

    def foreground(self) -> int | None:
        return self._foreground.pgid()

    def candidates(self, pgid: int) -> list[int]:
        return self._foreground.candidates(pgid)

    def target(self) -> Target | None:
        pgid = self._foreground.pgid()
        if pgid is None:
            return None
        return relay.innermost(
            pgid,
            self._foreground.candidates(pgid),
            self._proc.tty_rdev,
            self._proc.master,
            self._session_pids,
            self._relays,
        )

    def own_tty(self) -> int:
        return self._proc.tty_rdev

    def flags(self, target: Target) -> tuple[int, int | None]:
        return target.flags(self._proc.master)

    def local_flags(self) -> int | None:
        return tty.local_flags(self._proc.master)

    def input_queued(self) -> int:
        return self._output.input_queued()

    def received(self) -> int:
        return self._output.received

    def last_output(self) -> float:
        return self._output.last_output

    def output_tail(self) -> bytes:
        return self._output.tail

    def run_counts(self, pids: list[int], pgid: int) -> RunCounts:
        return procfs.group_run_counts(pids, pgid)

    def rchar(self, pids: list[int], pgid: int) -> dict[int, int]:
        return procfs.group_rchar(pids, pgid)

    def busy_ns(self, pids: list[int], pgid: int) -> int:
        return procfs.group_busy_ns(pids, pgid)

    def signal_pending(self, pids: list[int], pgid: int) -> bool | None:
        pending = [procfs.signals_pending(pid) for pid in procfs.group_members(pids, pgid)]
        return any(pending) if pending else None

    def relay_read(self, pid: int) -> int | None:
        return procfs.rchar(pid)

    def relay_asleep(self, pid: int) -> bool:
        return relay.asleep(pid)

    def timer_armed(self, pid: int, epfd: int) -> bool:
        return loops.timer_armed(pid, epfd)

    def running_child(self, pids: list[int], pgid: int) -> bool:
        return loops.running_child(procfs.group_members(pids, pgid))

    def alt_screen(self) -> bool:
        return self._terminal.alt_screen

    def cursor_line(self) -> int:
        return self._terminal.cursor_line

    def cursor_text(self) -> str:
        screen = self._terminal.current_screen()
        y, x = int(screen.cursor.y), int(screen.cursor.x)
        if not self._terminal.alt_screen:
            row = screen.main_rows(y, y + 1)
            return row[0][:x] if row else ""
        rows = screen.visible_rows()
        return rows[y][:x] if y < len(rows) else ""
