"""A live local PTY session: drains the terminal, renders it, drives its one active send, and tears down.

Output is read continuously whether anyone is sending or not, so a program never blocks on a full PTY; the
reader pauses only while the renderer's backlog is over its bound (memory stays bounded, the program is
throttled to the renderer's pace). Readiness is decided by the kernel: all written input consumed (the tty's
input queue is empty) and the foreground group blocked reading the terminal.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import struct
import termios
import time
from collections import OrderedDict
from typing import final

from ptyd import protocol as p
from ptyd.backends import procfs, readiness
from ptyd.backends.base import SendRequest
from ptyd.backends.containment import Scope, terminate
from ptyd.backends.reaper import ChildReaper
from ptyd.backends.send import SendOp, consume_output, viewport
from ptyd.backends.spawn import Spawned, set_winsize
from ptyd.config import Config
from ptyd.errors import InvalidArgument, SessionBusy, SessionExited
from ptyd.terminal.emulator import Terminal
from ptyd.terminal.viewport import bound

READ_BURST = 1024 * 1024  # bytes read per wake-up before yielding to other sessions
RENDER_BUDGET_S = 0.008  # renderer time per loop turn, so one flooding session cannot starve the others
RENDER_DEFER_S = 0.002  # output that arrives in bulk is rendered in batches (the fast path needs big ones)
INTERACTIVE_BYTES = 4096  # smaller chunks are rendered at once: prompts and echoes must not wait
EVENT_LOOP_SETTLE_S = 0.04  # how long an event loop's wait on the tty must hold before it counts


def _resolve(fut: asyncio.Future[bool], value: bool) -> None:
    if not fut.done():
        fut.set_result(value)


def _ran_since(before: dict[tuple[int, int], int], now: dict[tuple[int, int], int]) -> bool:
    return any(count > before.get(key, count) for key, count in now.items())


@final
class LocalSession:
    def __init__(
        self,
        *,
        session_id: str,
        type: str,
        name: str | None,
        spawned: Spawned,
        scope: Scope,
        config: Config,
        reaper: ChildReaper,
        cols: int,
        rows: int,
    ) -> None:
        self.loop = asyncio.get_running_loop()
        self.session_id = session_id
        self.type = type
        self.name = name
        self.motd = ""
        self.open_wait_reason: p.WaitReason = "timeout"
        self.created_at_ms = int(time.time() * 1000)
        self._proc = spawned
        self.scope = scope
        self._config = config
        self._reaper = reaper
        self.terminal = Terminal(
            cols,
            rows,
            scrollback_lines=config.scrollback_lines,
            scrollback_bytes=config.scrollback_bytes,
            on_reply=self._write,
        )
        self._status: p.SessionStatus = p.Running()
        self._raw = bytearray()
        self._received = 0  # bytes read from the master
        self._rendered = 0  # of those, bytes fed to the terminal and fully rendered
        self._render_scheduled = False
        self._render_waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._reading = False
        self._outbox = bytearray()
        self._writing = False
        self.last_output = time.monotonic()
        self._activity: asyncio.Future[bool] | None = None
        self.active: SendOp | None = None
        self.last_op: SendOp | None = None
        self._keys: OrderedDict[str, SendOp] = OrderedDict()
        self._drivers: set[asyncio.Task[None]] = set()
        self._closing: asyncio.Task[int] | None = None
        self.closed = False
        self._start_reading()
        reaper.watch(spawned.pid, self._on_exit)

    # --- process ---------------------------------------------------------------------------------------

    @property
    def pid(self) -> int | None:
        return self._proc.pid

    @property
    def cgroup(self) -> str | None:
        return self.scope.cgroup

    def status(self) -> p.SessionStatus:
        return self._status

    @property
    def exited(self) -> bool:
        return isinstance(self._status, p.Exited)

    def _on_exit(self, exit_code: int | None, signal_name: str | None) -> None:
        self._status = p.Exited(exit_code=exit_code, signal=signal_name)
        self._wake(False)

    # --- output path -----------------------------------------------------------------------------------

    def _start_reading(self) -> None:
        if not self._reading and not self.closed:
            self.loop.add_reader(self._proc.master, self._on_readable)
            self._reading = True

    def _stop_reading(self) -> None:
        if self._reading:
            self.loop.remove_reader(self._proc.master)
            self._reading = False

    def _on_readable(self) -> None:
        got = 0
        while got < READ_BURST:
            try:
                data = os.read(self._proc.master, 65536)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:  # EIO: no slave fd open anywhere; cannot happen while the daemon holds one
                self._stop_reading()
                break
            if not data:
                self._stop_reading()
                break
            self._raw += data
            got += len(data)
        if not got:
            return
        self._received += got
        self.last_output = time.monotonic()
        self._wake(True)
        if self._render_scheduled:
            pass
        elif len(self._raw) < INTERACTIVE_BYTES and self.terminal.idle:
            self._render()
        else:
            self._render_scheduled = True
            self.loop.call_later(RENDER_DEFER_S, self._render)
        if len(self._raw) + self.terminal.backlog > self._config.max_render_backlog_bytes:
            self._stop_reading()

    def _render(self) -> None:
        self._render_scheduled = False
        if self.closed:
            return
        fed = self._received
        if self._raw:
            self.terminal.feed(bytes(self._raw))
            self._raw.clear()
        if self.terminal.process(RENDER_BUDGET_S):
            self._render_scheduled = True
            self.loop.call_soon(self._render)
        else:
            self._rendered = fed
            waiters, self._render_waiters = self._render_waiters, []
            for mark, fut in waiters:
                if mark <= fed:
                    if not fut.done():
                        fut.set_result(None)
                else:
                    self._render_waiters.append((mark, fut))
        if not self._reading and self.terminal.backlog < self._config.max_render_backlog_bytes // 2:
            self._start_reading()

    def drain(self) -> None:
        """Read whatever the PTY holds now (a prompt written just before the program blocked)."""
        if self._reading:
            self._on_readable()

    async def rendered(self) -> None:
        """Wait until everything read so far is rendered."""
        mark = self._received
        if self._rendered >= mark and not self._raw and self.terminal.idle:
            return
        fut = self.loop.create_future()
        self._render_waiters.append((mark, fut))
        if not self._render_scheduled:
            self._render_scheduled = True
            self.loop.call_soon(self._render)
        await fut

    # --- input path ------------------------------------------------------------------------------------

    def _write(self, data: bytes) -> None:
        if self.closed or not data:
            return
        self._outbox += data
        self._flush()

    def _flush(self) -> None:
        while self._outbox:
            try:
                n = os.write(self._proc.master, self._outbox)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                self._outbox.clear()
                break
            del self._outbox[:n]
        if self._outbox and not self._writing:
            self.loop.add_writer(self._proc.master, self._flush)
            self._writing = True
        elif not self._outbox and self._writing:
            self.loop.remove_writer(self._proc.master)
            self._writing = False

    def _input_queued(self) -> int:
        """Input written but not yet read by the program: ours still to write plus the tty's input queue."""
        try:
            raw = fcntl.ioctl(self._proc.slave, termios.FIONREAD, b"\0\0\0\0")
        except OSError:
            return len(self._outbox)
        return len(self._outbox) + int(struct.unpack("i", raw)[0])

    # --- foreground group ------------------------------------------------------------------------------

    def _foreground_pgid(self) -> int | None:
        try:
            pgid = os.tcgetpgrp(self._proc.master)
        except OSError:
            return None
        return pgid if pgid > 0 else None

    def foreground(self) -> p.Foreground | None:
        """The foreground group; named after the member that reads the terminal (``less`` in ``seq | less``)."""
        pgid = self._foreground_pgid()
        if pgid is None or (self.exited and pgid == self._proc.pid):
            return None
        # At a prompt the shell is alone in its group; only other groups need the session's process list.
        candidates = [pgid] if pgid == self._proc.pid else sorted({pgid, *self.scope.pids()})
        members = []
        for pid in candidates:
            stat = procfs.read_stat(pid)
            if stat is not None and stat.pgrp == pgid and stat.state not in ("Z", "X"):
                members.append(stat)
        if not members:
            return None
        chosen = members[0]
        if len(members) > 1:
            for stat in members:
                if readiness.group_waits_on_tty([stat.pid], pgid, self._proc.tty_rdev, self._proc.master):
                    chosen = stat
                    break
            else:
                chosen = next((m for m in members if m.pid == pgid), members[-1])
        return p.Foreground(pid=chosen.pid, pgid=pgid, name=chosen.comm)

    def verified_foreground_pgid(self) -> int:
        """The tty's foreground group, checked to hold a live process of this terminal's session."""
        pgid = self._foreground_pgid()
        if pgid is not None:
            for pid in {pgid, *self.scope.pids()}:
                stat = procfs.read_stat(pid)
                if stat is not None and stat.pgrp == pgid and stat.session == self._proc.pid:
                    return pgid
        raise InvalidArgument("the terminal has no foreground process group to signal", reason="no_foreground")

    def ready_for_input(self, op: SendOp) -> bool:
        """The program took all of ``op``'s input and its foreground group now waits to read the tty."""
        if self._input_queued():
            op.taken = True
            return False
        pgid = self._foreground_pgid()
        if pgid is None:
            return False
        members = {pgid, *self.scope.pids()}
        if not op.taken and (
            self._received > op.received_at_write
            or pgid != op.foreground_at_write
            or _ran_since(op.run_counts_at_write, procfs.group_run_counts(members, pgid))
        ):
            op.taken = True
        wait = readiness.group_waits_on_tty(members, pgid, self._proc.tty_rdev, self._proc.master)
        if not op.taken:
            op.taken = wait == readiness.Wait.NONE  # seen out of its wait: the next wait is a new one
            return False
        if wait == readiness.Wait.EVENT_LOOP:
            # Must hold, with no output, for a while (see readiness.Wait).
            now = time.monotonic()
            if op.weak_since is None or op.weak_mark != (self._received, pgid):
                op.weak_since, op.weak_mark = now, (self._received, pgid)
                return False
            return now - op.weak_since >= EVENT_LOOP_SETTLE_S
        op.weak_since = None
        return wait == readiness.Wait.DIRECT

    # --- sends -----------------------------------------------------------------------------------------

    def start_send(self, request: SendRequest) -> SendOp:
        if request.request_key is not None and request.request_key in self._keys:
            return self._keys[request.request_key]
        if self.active is not None:
            raise SessionBusy("a send is already active on this session", operation_id=self.active.id)
        if self.exited:
            raise SessionExited("the session's program has exited", status=self._status)
        op = SendOp(request, self.terminal.cursor_line, self.loop)
        self.active = op
        self.terminal.capture = op.capture
        if request.request_key is not None:
            self._keys[request.request_key] = op
            while len(self._keys) > self._config.request_keys_remembered:
                self._keys.popitem(last=False)
        op.received_at_write = self._received
        op.foreground_at_write = pgid = self._foreground_pgid()
        if pgid is not None and request.input:
            op.run_counts_at_write = procfs.group_run_counts({pgid, *self.scope.pids()}, pgid)
        self._write(request.input.encode())
        task = self.loop.create_task(self._drive(op), name=f"send {self.session_id} {op.id}")
        self._drivers.add(task)
        task.add_done_callback(self._drivers.discard)
        return op

    async def _drive(self, op: SendOp) -> None:
        reason = await self._wait_ready(op)
        await self._settle(op, reason)

    def _wake(self, output: bool) -> None:
        if self._activity is not None and not self._activity.done():
            self._activity.set_result(output)

    async def _sleep_or_activity(self, delay: float) -> bool:
        """Sleep up to ``delay``; True if output arrived meanwhile."""
        fut: asyncio.Future[bool] = self.loop.create_future()
        self._activity = fut
        timer = self.loop.call_later(delay, _resolve, fut, False)
        try:
            return await fut
        finally:
            timer.cancel()
            self._activity = None

    async def _wait_ready(self, op: SendOp) -> p.WaitReason:
        cfg = self._config
        min_interval = cfg.probe_min_interval_ms / 1000
        interval = min_interval
        while True:
            if self.exited:
                return "session_exit"
            if self.ready_for_input(op):
                return "stdin_read"
            now = time.monotonic()
            if now >= op.deadline:
                return "timeout"
            idle_deadline = max(self.last_output, op.started) + op.request.idle_s
            if now >= idle_deadline:
                return "inferred_idle"
            delay = min(interval, op.deadline - now, idle_deadline - now)
            if await self._sleep_or_activity(max(delay, 0.0)):
                interval = min_interval
            else:
                interval = min(interval * 2, cfg.probe_max_interval_ms / 1000)

    async def _settle(self, op: SendOp, reason: p.WaitReason) -> None:
        self.drain()
        await self.rendered()
        text, truncated, lines = viewport(op, self.terminal)
        result = p.SendResult(
            operation_id=op.id,
            viewport=text,
            wait_reason=reason,
            session_status=self._status,
            truncated=truncated,
            alt_screen=self.terminal.alt_screen,
            foreground=self.foreground(),
            lines=lines,
        )
        if self.active is op:
            self.active = None
            self.terminal.capture = None
        self.last_op = op
        if not op.future.done():
            op.future.set_result(result)

    def _current_op(self) -> SendOp | None:
        return self.active or self.last_op

    async def output(self) -> p.TerminalOutputResult:
        op = self._current_op()
        if op is None:
            return p.TerminalOutputResult(operation_id=None, output="", done=True, result=None)
        await self.rendered()
        done = op.done
        text, _ = consume_output(op, self.terminal, self._config.max_read_bytes)
        return p.TerminalOutputResult(
            operation_id=op.id, output=text, done=done, result=op.future.result() if done else None
        )

    async def wait(self, timeout_s: float | None) -> p.TerminalWaitResult:
        op = self._current_op()
        if op is None:
            return p.TerminalWaitResult(operation_id=None, done=True, result=None)
        try:
            result = await asyncio.wait_for(op.result(), timeout_s)
        except TimeoutError:
            return p.TerminalWaitResult(operation_id=op.id, done=False, result=None)
        return p.TerminalWaitResult(operation_id=op.id, done=True, result=result)

    def cancel(self) -> bool:
        op = self.active
        if op is None or op.done:
            return False
        self._outbox.clear()  # input not yet written is dropped, as a terminal's ^C drops typeahead
        with contextlib.suppress(InvalidArgument):
            self.signal(2)
        return True

    # --- other operations ------------------------------------------------------------------------------

    def signal(self, signum: int) -> p.TerminalSignalResult:
        import signal as _signal

        pgid = self.verified_foreground_pgid()
        try:
            os.killpg(pgid, signum)
            delivered = True
        except ProcessLookupError:
            delivered = False
        try:
            name = _signal.Signals(signum).name
        except ValueError:
            name = f"SIG{signum}"
        return p.TerminalSignalResult(delivered=delivered, pgid=pgid, signal=name)

    def resize(self, cols: int, rows: int) -> None:
        self.terminal.resize(cols, rows)
        with contextlib.suppress(OSError):
            set_winsize(self._proc.master, cols, rows)

    async def read(self, start_line: int | None, max_lines: int, max_bytes: int) -> p.TerminalReadResult:
        await self.rendered()
        term = self.terminal
        total = term.total_lines
        first = term.scrollback.first
        start = -max_lines if start_line is None else start_line
        if start < 0:
            start = max(total + start, 0)
        begin = max(start, first)
        end = min(begin + max_lines, total)
        lines = term.transcript(begin, end)
        used = 0
        kept = 0
        for line in lines:
            used += len(line.encode()) + 1
            if used > max_bytes and kept:
                break
            kept += 1
        cut = kept < len(lines)
        if cut:
            lines = lines[:kept]
        if len(lines) == 1 and used > max_bytes:
            lines = [bound([], None, lines, begin, max_bytes)[0]]
        return p.TerminalReadResult(
            lines=lines,
            start_line=begin,
            next_line=begin + len(lines),
            first_retained_line=first,
            total_lines=total,
            truncated=cut or begin > start,
        )

    def info(self, owner: str) -> p.SessionInfo:
        op = self._current_op()
        return p.SessionInfo(
            session_id=self.session_id,
            name=self.name,
            type=self.type,
            pid=self._proc.pid,
            status=self._status,
            cols=self.terminal.cols,
            rows=self.terminal.rows,
            alt_screen=self.terminal.alt_screen,
            foreground=self.foreground(),
            busy=self.active is not None,
            operation_id=op.id if op else None,
            created_at_ms=self.created_at_ms,
            total_lines=self.terminal.total_lines,
            owner=owner,
        )

    # --- teardown --------------------------------------------------------------------------------------

    async def close(self, reason: str) -> int:
        """Idempotently end the whole process tree, reap it, close the PTY. Returns processes signalled."""
        if self._closing is None:
            self._closing = self.loop.create_task(self._close(), name=f"close {self.session_id}")
        return await asyncio.shield(self._closing)

    async def _close(self) -> int:
        cfg = self._config
        killed = await terminate(
            self.scope, cfg.close_hup_grace_ms / 1000, cfg.close_term_grace_ms / 1000, self._reaper.reap
        )
        # The top process is reaped by now (or soon: it may be a zombie whose exit the reaper reports).
        deadline = time.monotonic() + 2.0
        while not self.exited and time.monotonic() < deadline:
            self._reaper.reap()
            await asyncio.sleep(0.005)
        self.drain()
        op = self.active
        for task in list(self._drivers):
            task.cancel()
        if op is not None and not op.done:
            await self._settle(op, "session_exit")
        self.closed = True
        self._stop_reading()
        if self._writing:
            self.loop.remove_writer(self._proc.master)
            self._writing = False
        for fd in (self._proc.master, self._proc.slave):
            with contextlib.suppress(OSError):
                os.close(fd)
        self.scope.remove()
        for _, fut in self._render_waiters:
            if not fut.done():
                fut.set_result(None)
        return killed
