"""A live local PTY session: its terminal, its one active send, its readiness decision, and its teardown.

Readiness is decided by the kernel: all written input taken (the tty's input queue is empty and the program
woke up after the write) and the foreground group blocked reading the terminal (``readiness``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal as signals
import time
from collections import OrderedDict
from typing import final

from ptyd import protocol as p
from ptyd.backends import readiness
from ptyd.backends.base import SendRequest
from ptyd.backends.channel import PtyChannel
from ptyd.backends.containment import Scope, terminate
from ptyd.backends.containment import remove as remove_scope
from ptyd.backends.foreground import ForegroundGroup, ran_since
from ptyd.backends.reaper import ChildReaper
from ptyd.backends.send import SendOp, consume_output, viewport
from ptyd.backends.spawn import Spawned, set_winsize
from ptyd.config import Config
from ptyd.errors import InvalidArgument, SessionBusy, SessionExited
from ptyd.terminal.emulator import Terminal
from ptyd.terminal.viewport import bound

EVENT_LOOP_SETTLE_S = 0.04  # how long an event loop's wait on the tty must hold before it counts
BULK_PROBE_INTERVAL_S = 0.005  # readiness probes at most this often while output arrives in bulk
CANCEL_FOLLOW_S = 2.0  # how long a cancel follows the send's command into a group that starts after it
SHELL_INTERRUPT_DELAY_S = 0.05  # a cancel waits this long for the command to leave the shell's group


def _resolve(fut: asyncio.Future[bool], value: bool) -> None:
    if not fut.done():
        fut.set_result(value)


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
            on_reply=self._reply,
            emulator=config.emulator,
        )
        self.channel = PtyChannel(spawned, self.terminal, config.max_render_backlog_bytes, self._output_arrived)
        self.foreground = ForegroundGroup(spawned, scope)
        self._status: p.SessionStatus = p.Running()
        self._activity: asyncio.Future[bool] | None = None
        self.active: SendOp | None = None
        self.last_op: SendOp | None = None
        self._keys: OrderedDict[str, SendOp] = OrderedDict()
        self._drivers: set[asyncio.Task[None]] = set()
        self._closing: asyncio.Task[int] | None = None
        reaper.watch(spawned.pid, self._on_exit)

    def _reply(self, data: bytes) -> None:
        self.channel.write(data)  # answers to terminal queries (DSR, DA) go back to the program

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

    def _output_arrived(self) -> None:
        self._wake(True)

    # --- readiness -------------------------------------------------------------------------------------

    def ready_for_input(self, op: SendOp) -> bool:
        """The program took all of ``op``'s input and its foreground group now waits to read the tty."""
        if self.channel.input_queued():
            op.taken = True
            return False
        pgid = self.foreground.pgid()
        if pgid is None:
            return False
        if not op.taken and (
            self.channel.received > op.received_at_write
            or pgid != op.foreground_at_write
            or ran_since(op.run_counts_at_write, self.foreground.run_counts(pgid))
        ):
            op.taken = True
        wait = self.foreground.input_wait(pgid)
        if not op.taken:
            op.taken = wait == readiness.Wait.NONE  # seen out of its wait: the next wait is a new one
            return False
        if wait == readiness.Wait.EVENT_LOOP:
            # Must hold, with no output, for a while (see readiness.Wait).
            now = time.monotonic()
            mark = (self.channel.received, pgid)
            if op.weak_since is None or op.weak_mark != mark:
                op.weak_since, op.weak_mark = now, mark
                return False
            return now - op.weak_since >= EVENT_LOOP_SETTLE_S
        op.weak_since = None
        return wait == readiness.Wait.DIRECT

    def _mark_write(self, op: SendOp, pgid: int | None) -> None:
        """From now on a wait counts only once the program is seen to have woken (see ``ready_for_input``)."""
        op.taken = False
        op.received_at_write = self.channel.received
        op.foreground_at_write = pgid
        op.run_counts_at_write = self.foreground.run_counts(pgid) if pgid is not None else {}

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
        if request.input:
            self._mark_write(op, self.foreground.pgid())
        self.channel.write(request.input.encode())
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
            if op.cancelled_at is not None and time.monotonic() - op.cancelled_at < CANCEL_FOLLOW_S:
                self._interrupt(op)
            if self.ready_for_input(op):
                return "stdin_read"
            probed = time.monotonic()
            now = probed
            if now >= op.deadline:
                return "timeout"
            idle_deadline = max(self.channel.last_output, op.started) + op.request.idle_s
            if now >= idle_deadline:
                return "inferred_idle"
            delay = min(interval, op.deadline - now, idle_deadline - now)
            if await self._sleep_or_activity(max(delay, 0.0)):
                interval = min_interval
                await self._through_bulk(probed, op.deadline)
            else:
                interval = min(interval * 2, cfg.probe_max_interval_ms / 1000)

    async def _through_bulk(self, probed: float, deadline: float) -> None:
        """While output pours in, the program is busy writing: probing on every chunk would only cost the reads
        (a probe is a dozen /proc reads and ioctls) that bring its output in. Probe at most every few ms then."""
        while self.channel.bulk:
            remaining = min(probed + BULK_PROBE_INTERVAL_S, deadline) - time.monotonic()
            if remaining <= 0 or not await self._sleep_or_activity(remaining):
                return

    async def _settle(self, op: SendOp, reason: p.WaitReason) -> None:
        self.channel.drain()
        await self.channel.rendered()
        text, truncated, lines = viewport(op, self.terminal)
        result = p.SendResult(
            operation_id=op.id,
            viewport=text,
            wait_reason=reason,
            session_status=self._status,
            truncated=truncated,
            alt_screen=self.terminal.alt_screen,
            foreground=self.foreground.describe(self.exited),
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
        await self.channel.rendered()
        done = op.done
        text, _ = consume_output(op, self.terminal, self._config.max_read_bytes)
        return p.TerminalOutputResult(
            operation_id=op.id, output=text, done=done, result=op.future.result() if done else None
        )

    async def wait(self, timeout_s: float | None) -> p.TerminalWaitResult:
        op = self._current_op()
        if op is None:
            return p.TerminalWaitResult(operation_id=None, done=True, result=None)
        if op.done:
            return p.TerminalWaitResult(operation_id=op.id, done=True, result=op.future.result())
        try:
            result = await asyncio.wait_for(op.result(), timeout_s)
        except TimeoutError:
            return p.TerminalWaitResult(operation_id=op.id, done=False, result=None)
        return p.TerminalWaitResult(operation_id=op.id, done=True, result=result)

    def cancel(self) -> bool:
        op = self.active
        if op is None or op.done:
            return False
        if self.channel.input_queued():
            # Not read yet: dropping it (as ^C drops typeahead) cancels the command before it exists. The
            # program may hold the part it did read (readline reads a byte at a time); the SIGINT clears it.
            self.channel.discard_input()
            op.taken = True
            op.input_dropped = True
        op.cancelled_at = time.monotonic()
        self._interrupt(op)
        self._wake(False)
        return True

    def _interrupt(self, op: SendOp) -> None:
        """SIGINT the command of a cancelled send, once per program in front.

        A shell whose unread input was dropped is interrupted at once: it cannot be running the line, and the
        SIGINT discards what it had read of it. A command in a group of its own is interrupted at once; if it was
        still the shell's forked child when
        the signal came (bash loses a SIGINT between fork and exec), it is interrupted again once it runs the
        program. While the shell itself holds the foreground it may have read the line and be about to fork
        (a SIGINT then can make bash exit), so the shell is interrupted only once that window has passed with
        the shell still in front (a builtin loop).
        """
        with contextlib.suppress(InvalidArgument):
            pgid = self.foreground.verified_pgid()
            front = self.foreground.describe(self.exited)
            program = front.name if front is not None else ""
            if op.interrupted.get(pgid) == program:
                return
            if pgid == self._proc.pid and not (op.input_dropped and not op.interrupted):
                if op.interrupted or time.monotonic() - (op.cancelled_at or 0.0) < SHELL_INTERRUPT_DELAY_S:
                    return
                if self.foreground.input_wait(pgid) != readiness.Wait.NONE:
                    return  # back at its prompt: nothing to interrupt
            op.interrupted[pgid] = program
            self._mark_write(op, pgid)  # readiness needs the program to have woken after the signal
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signals.SIGINT)

    # --- other operations ------------------------------------------------------------------------------

    def signal(self, signum: int) -> p.TerminalSignalResult:
        delivered = False
        for _ in range(3):  # the group may end between the check and the kill; the next one is in front then
            pgid = self.foreground.verified_pgid()
            try:
                os.killpg(pgid, signum)
            except ProcessLookupError:
                continue
            delivered = True
            break
        try:
            name = signals.Signals(signum).name
        except ValueError:
            name = f"SIG{signum}"
        return p.TerminalSignalResult(delivered=delivered, pgid=pgid, signal=name)

    def resize(self, cols: int, rows: int) -> None:
        self.terminal.resize(cols, rows)
        with contextlib.suppress(OSError):
            set_winsize(self._proc.master, cols, rows)

    async def read(self, start_line: int | None, max_lines: int, max_bytes: int) -> p.TerminalReadResult:
        await self.channel.rendered()
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

    async def screen(self) -> p.TerminalScreenResult:
        await self.channel.rendered()
        screen = self.terminal.current_screen()
        return p.TerminalScreenResult(
            lines=screen.visible_rows(),
            cursor_x=min(int(screen.cursor.x), self.terminal.cols - 1),
            cursor_y=int(screen.cursor.y),
            cursor_visible=not screen.cursor.hidden,
            alt_screen=self.terminal.alt_screen,
            title=str(screen.title),
        )

    def info(self, owner: str, owner_name: str | None) -> p.SessionInfo:
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
            foreground=self.foreground.describe(self.exited),
            busy=self.active is not None,
            operation_id=op.id if op else None,
            created_at_ms=self.created_at_ms,
            total_lines=self.terminal.total_lines,
            owner=owner,
            owner_name=owner_name,
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
        self.channel.drain()
        op = self.active
        for task in list(self._drivers):
            task.cancel()
        if op is not None and not op.done:
            await self._settle(op, "session_exit")
        self.channel.close()
        await remove_scope(self.scope)
        return killed
