"""A live local PTY session: its terminal, its one active send, and its teardown.

Whether the program is ready for more input is the tracker's call (``tracker``); cancelling a send is the cancel
policy's (``cancel``); the transcript is paged by ``paging``; events for subscribers come from ``watch``; shell
integration marks are taken out of the output by ``shell_integration``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import secrets
import signal as signals
import termios
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Literal, cast, final

from ptyd import protocol as p
from ptyd.backends import procfs
from ptyd.backends.base import SendRequest
from ptyd.backends.cancel import CancelPolicy
from ptyd.backends.channel import PtyChannel
from ptyd.backends.containment import Scope, terminate
from ptyd.backends.containment import remove as remove_scope
from ptyd.backends.containment.reaper import ChildReaper
from ptyd.backends.listening import listening
from ptyd.backends.named_wait import NamedWait, line_text
from ptyd.backends.paging import page
from ptyd.backends.readiness.foreground import ForegroundGroup
from ptyd.backends.readiness.tracker import ReadinessTracker, Verdict
from ptyd.backends.recording.recorder import NO_RECORDING, NoRecording
from ptyd.backends.sandbox.limits import Counters, LimitScope
from ptyd.backends.send import SendOp, consume_output, viewport
from ptyd.backends.session_state import SAVED_LINES, SessionState
from ptyd.backends.shell_integration import Mark, MarkFilter, fish_snippet, remote_snippet
from ptyd.backends.spawn import Spawned, set_winsize
from ptyd.backends.watch import Listener, SessionWatch
from ptyd.config import Config, SandboxProfile
from ptyd.errors import InternalError, InvalidArgument, LimitExceeded, SessionBusy, SessionExited
from ptyd.terminal.keys import encode as encode_keys
from ptyd.terminal.workers.placement import open_session_terminal

log = logging.getLogger("ptyd.session")

KEYS_HOLD_S = 0.5  # keys after input go out once the input was taken and its program ran this long unready
BULK_PROBE_INTERVAL_S = 0.005  # readiness probes at most this often while output arrives in bulk
DRAIN_ROUNDS = 3  # drains before a wait counts, while the reader was paused on its backlog
CANONICAL_LINE_MAX = 4095  # bytes a canonical-mode line can hold (N_TTY_BUF_SIZE less its newline)
_LINE_ENDS = re.compile(rb"[\r\n\x04]")
# Programs that run the next lines they read as commands, which read them in canonical mode.
SHELLS = frozenset({"bash", "sh", "dash", "zsh", "ksh", "mksh", "fish", "ash", "busybox"})


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
        shell_key: str,
        recording: NoRecording = NO_RECORDING,
    ) -> None:
        self.loop = asyncio.get_running_loop()
        self.recording = recording  # asciicast events at the read and write points (recording/)
        recording.hide(shell_key.encode())
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
        self._shell_key = shell_key
        self.terminal = open_session_terminal(
            cols,
            rows,
            scrollback_lines=config.scrollback_lines,
            scrollback_bytes=config.scrollback_bytes,
            on_reply=self._reply,
            emulator=config.emulator,
            engine_process=config.engine_process,
            engine_workers=config.engine_workers,
            engine_worker_stall_ms=config.engine_worker_stall_ms,
            label=session_id,
        )
        self.channel = PtyChannel(
            spawned,
            self.terminal,
            config.max_render_backlog_bytes,
            self._output_arrived,
            self._record_output(MarkFilter(shell_key, self._on_mark).feed),
        )
        self.foreground = ForegroundGroup(spawned, scope)
        self.tracker = ReadinessTracker(
            spawned, self.foreground, scope.pids, self.channel, self.terminal, config.relay_quiet_ms / 1000
        )
        self.canceller = CancelPolicy(spawned.leader, self.foreground, self.channel, lambda: self.exited, self._rewrite)
        self.watch = SessionWatch(
            session_id,
            self.tracker,
            self.channel,
            self.terminal,
            lambda: self.active is not None,
            config.max_read_bytes,
        )
        self._status: p.SessionStatus = p.Running()
        self._activity: asyncio.Future[bool] | None = None
        self._replies = 0  # answers to terminal queries written to the program
        self._dropped_replies = 0  # answers not written: the program left max_pending_input_bytes unread
        self._command_running = False  # the shell's last mark was a command mark
        self._prompt_cwd: str | None = None  # the shell's cwd at its last prompt mark
        self.active: SendOp | None = None
        self.last_op: SendOp | None = None
        self._keys: OrderedDict[str, SendOp] = OrderedDict()
        self._drivers: set[asyncio.Task[None]] = set()
        self._closing: asyncio.Task[int] | None = None
        # The sandbox and limits it was opened with (set by the backend, or from the state a handover carried).
        self.sandbox = "none"
        self.profile = SandboxProfile()
        self.limits: LimitScope | None = None
        self.workspace = ""
        self._counted = Counters(0, 0)  # the limits' counters when the active send began

    def watch_exit(self, *, child: bool = True) -> None:
        """Report the program's exit (``child``: the daemon's own child, so its exit status is known)."""
        self._reaper.watch(self._proc.pid, self._on_exit, child=child)

    def _record_output(self, marks: Callable[[bytes], bytes]) -> Callable[[bytes], bytes]:
        """The output filter, then the recording: a file gets what the terminal gets, never the signed marks."""
        return lambda data: self.recording.output(marks(data))

    def set_recording(self, recording: NoRecording) -> None:
        """Start (a Recording) or stop (NO_RECORDING) recording this session."""
        self.recording.close()
        self.recording = recording
        recording.hide(self._shell_key.encode())

    def _reply(self, data: bytes) -> None:
        if self.channel.pending + len(data) > self._config.max_pending_input_bytes:
            # The program asks and never reads the answers: they would pile up without end.
            self._dropped_replies += 1
            if self._dropped_replies == 1:
                log.warning(
                    "%s: dropping answers to terminal queries: %d bytes of input are unread (max_pending_input_bytes)",
                    self.session_id,
                    self.channel.pending,
                )
            return
        self._replies += 1
        # Input the program blocked to read: until it is seen to take it, its wait is the one before the answer
        # (whether the query was answered by the reader as it arrived or by the drain before settling). Marked
        # before the write: a program on the other core may read the answer before this line returns.
        self.tracker.mark_write(data, answer=True)
        self.channel.write(data)  # answers to terminal queries (DSR, DA) go back to the program

    def _rewrite(self) -> None:
        self.tracker.mark_write()

    def _on_mark(self, mark: Mark) -> None:
        if mark.kind == "C":
            self._command_running = True
            return
        if self._command_running and self.active is not None:
            self.active.exit_code = mark.status
        self._command_running = False
        self._prompt_cwd = mark.cwd
        if self.active is not None:
            self.tracker.prompt_mark()

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
        self.watch.emit("session_exit", status=self._status)

    def _output_arrived(self) -> None:
        self._wake(True)
        self.watch.output_arrived()

    def set_listener(self, listener: Listener | None, output: bool, screen: bool = False) -> None:
        self.watch.set_listener(listener, output, screen)

    # --- sends -----------------------------------------------------------------------------------------

    def start_send(self, request: SendRequest) -> SendOp:
        if request.request_key is not None and request.request_key in self._keys:
            return self._keys[request.request_key]
        if self.active is not None:
            raise SessionBusy("a send is already active on this session", operation_id=self.active.id)
        if self.exited:
            raise SessionExited("the session's program has exited", status=self._status)
        data = request.input.encode()
        if data:
            self._check_deliverable(data)
            self._check_room(data)
        op = SendOp(request, self.terminal.cursor_line, self.loop)
        if request.until is not None or request.until_stable_s is not None:
            anchor_text = line_text(self.terminal, op.anchor)
            op.named = NamedWait(request.until, request.until_stable_s, op.anchor, bool(data), anchor_text)
        self.active = op
        self.watch.send_started()
        self.terminal.capture = op.capture
        if request.request_key is not None:
            self._keys[request.request_key] = op
            while len(self._keys) > self._config.request_keys_remembered:
                self._keys.popitem(last=False)
        self.recording.input(data, self.tracker.password_prompt_now)  # asked before the write changes the answer
        self.tracker.begin(wrote_input=data)
        self._counted = self._limit_counters()
        if op.keys:
            front = self.foreground.describe(self.exited)
            op.front_at_write = (front.pgid, front.name) if front is not None else None
        self.channel.write(data)
        self._start_drive(op)
        return op

    def _limit_counters(self) -> Counters:
        return self.limits.counters() if self.limits is not None else Counters(0, 0)

    def _limit_info(self) -> p.SessionLimits | None:
        profile = self.profile
        if profile.memory_mib is None and profile.pids_max is None and profile.cpu_percent is None:
            return None
        return p.SessionLimits(
            memory_mib=profile.memory_mib, pids_max=profile.pids_max, cpu_percent=profile.cpu_percent
        )

    def _start_drive(self, op: SendOp) -> None:
        task = self.loop.create_task(self._drive(op), name=f"send {self.session_id} {op.id}")
        self._drivers.add(task)
        task.add_done_callback(self._drivers.discard)

    def resume(self, op: SendOp, *, taken: bool) -> None:
        """Drive a send the previous daemon started (its input is written already) to its result."""
        self.active = op
        self.watch.send_started()
        self.terminal.capture = op.capture
        self.tracker.begin(wrote_input=b"" if taken else op.request.input.encode())
        self._start_drive(op)

    def _check_room(self, data: bytes) -> None:
        """Refuse input the daemon would have to hold beyond its bound: the program has not read what came before."""
        limit = self._config.max_pending_input_bytes
        if self.channel.pending + len(data) > limit:
            raise LimitExceeded(
                f"{self.channel.pending} bytes sent earlier are still unread by the program; nothing was written. "
                "Wait for it to read them (or interrupt it: terminal_signal)",
                limit="max_pending_input_bytes",
                value=limit,
                reason="input_pending",
                pending_bytes=self.channel.pending,
            )

    def _check_deliverable(self, data: bytes) -> None:
        """Refuse input that a canonical-mode reader would receive cut short: a line over the kernel's limit.
        Lines after the first that a shell will run a command for are held to it too (commands read canonically)."""
        lines = _LINE_ENDS.split(data)
        if max(len(line) for line in lines) <= CANONICAL_LINE_MAX:
            return
        target = self.tracker.target()
        lflag = target.flags(self._proc.master)[1] if target is not None else None
        if lflag is not None and lflag & termios.ICANON:
            checked = lines
        else:
            front = self.foreground.describe(self.exited)
            checked = lines[1:] if front is not None and front.name in SHELLS else []
        longest = max((len(line) for line in checked), default=0)
        if longest > CANONICAL_LINE_MAX:
            raise InvalidArgument(
                f"a line of {longest} bytes would be cut to {CANONICAL_LINE_MAX} by the terminal's canonical "
                "mode; nothing was written. Split it, or send a file's content through a command "
                "(base64 -d, a heredoc of short lines) instead",
                reason="line_too_long",
                field="input",
                limit=CANONICAL_LINE_MAX,
                line_bytes=longest,
            )

    async def _drive(self, op: SendOp) -> None:
        try:
            reason, verdict = await self._wait_ready(op)
            await self._settle(op, reason, verdict)
        except asyncio.CancelledError:
            raise
        except Exception:
            self._fail(op)

    def _fail(self, op: SendOp) -> None:
        """A bug in the readiness or settling code: the send ends with an internal error naming a logged incident
        (its waiters get it; no send_settled event, which needs a result), and the session takes sends again
        rather than staying busy until it is closed."""
        incident = secrets.token_hex(4)
        log.exception("incident %s in send %s of %s", incident, op.id, self.session_id)
        if self.active is op:
            self.active = None
            self.terminal.capture = None
        self.last_op = op
        if not op.future.done():
            op.future.set_exception(InternalError("Internal error", incident=incident))
            op.future.exception()  # retrieved: a send nobody waits for is not logged a second time by asyncio

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

    async def _wait_ready(self, op: SendOp) -> tuple[p.WaitReason, Verdict | None]:
        cfg = self._config
        min_interval = cfg.probe_min_interval_ms / 1000
        interval = min_interval
        while True:
            if self.exited:
                return "session_exit", None
            self.canceller.follow(op.cancel)
            if op.named is not None and (named := op.named.check(self.terminal)) is not None:
                return named, None
            verdict = self.tracker.check()
            if op.keys and op.cancel.cancelled_at is not None:
                op.keys = b""  # a cancelled send presses nothing more
            if op.keys and await self._keys_due(op, verdict):
                self._press_keys(op)
                continue
            if verdict.ready and not op.keys and self._readiness_ends(op, verdict) and await self._nothing_owed():
                return "stdin_read", verdict
            probed = time.monotonic()
            now = probed
            if now >= op.deadline:
                return "timeout", None
            idle_deadline = max(self.channel.last_output, op.started) + op.request.idle_s
            if now >= idle_deadline:
                return "inferred_idle", None
            delay = min(interval, op.deadline - now, idle_deadline - now)
            if op.named is not None and (due := op.named.next_due()) is not None:
                delay = min(delay, due - now)
            if await self._sleep_or_activity(max(delay, 0.0)):
                interval = min_interval
                await self._through_bulk(probed, op.deadline)
            else:
                interval = min(interval * 2, cfg.probe_max_interval_ms / 1000)

    async def _keys_due(self, op: SendOp, verdict: Verdict) -> bool:
        """The program took the send's input, so its keys go to what the input started: it is ready for more
        (vim after ``oX``: now Escape), or a new program is in front (``cat`` after ``cat\n``: now C-c, which the
        shell would have taken, flushing the line unread), or the same one went on without reading for
        KEYS_HOLD_S (a builtin loop the shell runs)."""
        if self.channel.input_queued() or not self.tracker.taken:
            return False
        if verdict.ready:
            return await self._nothing_owed()
        front = self.foreground.describe(self.exited)
        if front is None:
            return False
        if op.front_at_write is None or front.pgid != op.front_at_write[0]:
            # A group the shell forked is in front: keys for it once it runs its program (a signal between fork
            # and exec is lost to the shell's handlers), or once it stayed the shell's child that long.
            return front.name != (op.front_at_write[1] if op.front_at_write else "") or self._held_keys(op)
        return self._held_keys(op)

    def _held_keys(self, op: SendOp) -> bool:
        return time.monotonic() - op.started >= KEYS_HOLD_S

    def _press_keys(self, op: SendOp) -> None:
        keys, op.keys = op.keys, b""
        self.tracker.mark_write(keys)  # before the write: the program may take the keys before it returns
        self.channel.write(keys)

    def _readiness_ends(self, op: SendOp, verdict: Verdict) -> bool:
        """A named wait is for what a program prints, not for its readiness: only the command it typed returning
        to a shell prompt ends it early (the command ended; waiting longer cannot match). A program that reads
        the terminal while it works (a REPL, a TUI) keeps waiting for the name."""
        if op.named is None:
            return True
        if not op.named.typed:
            return False
        if verdict.basis == "shell_integration":
            return True
        front = self.foreground.describe(self.exited)
        return front is not None and front.name in SHELLS

    async def _nothing_owed(self) -> bool:
        """Before a wait counts: read what the program wrote, render it and answer its terminal queries. An
        answer written now is input the program must first take (it blocked reading it): not ready yet."""
        replies = self._replies
        for _ in range(DRAIN_ROUNDS):
            paused = self.channel.paused
            self.channel.drain()
            await self.channel.rendered()  # a reader paused on its backlog reads again once that is rendered
            if not paused:
                break
        return self._replies == replies

    async def _through_bulk(self, probed: float, deadline: float) -> None:
        """While output pours in, the program is busy writing: probing on every chunk would only cost the reads
        (a probe is a dozen /proc reads and ioctls) that bring its output in. Probe at most every few ms then."""
        while self.channel.bulk:
            remaining = min(probed + BULK_PROBE_INTERVAL_S, deadline) - time.monotonic()
            if remaining <= 0 or not await self._sleep_or_activity(remaining):
                return

    async def _settle(self, op: SendOp, reason: p.WaitReason, verdict: Verdict | None) -> None:
        self.channel.drain()
        await self.channel.rendered()
        text, truncated, lines, compacted = viewport(op, self.terminal)
        counted = self._limit_counters()
        target = self.tracker.last_target if reason == "stdin_read" else None  # from the check that settled it
        result = p.SendResult(
            operation_id=op.id,
            viewport=text,
            wait_reason=reason,
            session_status=self._status,
            truncated=truncated,
            alt_screen=self.terminal.alt_screen,
            foreground=self.foreground.describe(self.exited),
            lines=lines,
            exit_code=op.exit_code,
            cwd=self._shell_cwd(),
            password_prompt=self.tracker.password_prompt(target),
            ready_basis=verdict.basis if verdict is not None else None,
            relay=verdict.relay if verdict is not None else None,
            unread_input=self.channel.input_queued(),
            oom_killed=counted.oom_kills > self._counted.oom_kills,
            pids_limited=counted.pids_refused > self._counted.pids_refused,
            sandbox=self.sandbox,
            match=op.named.match if op.named is not None else None,
            listening=listening(self.scope.pids()),
            compacted=compacted,
        )
        if self.active is op:
            self.active = None
            self.terminal.capture = None
        self.last_op = op
        if not op.future.done():
            op.future.set_result(result)
        self.watch.emit("send_settled", operation_id=op.id, result=result)

    def _shell_cwd(self) -> str | None:
        return None if self._command_running else self._prompt_cwd

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

    def cancel(self) -> p.TerminalCancelResult:
        op = self.active
        if op is None or op.done:
            last = self.last_op
            reason = last.future.result().wait_reason if last is not None and last.future.done() else None
            return self.canceller.interrupt_left_running(reason)
        self.canceller.cancel(op.cancel)
        self._wake(False)
        return self.canceller.requested(op.cancel)

    def key_input(self, keys: list[str]) -> str:
        """Named keys as this terminal sends them now (application cursor keys or not)."""
        try:
            return encode_keys(keys, app_cursor=self.terminal.app_cursor_keys)
        except ValueError as exc:
            raise InvalidArgument(str(exc), field="keys") from None

    def integration_input(self) -> str:
        """The line that installs shell integration into the shell at the prompt (terminal_integrate): fish's own
        when a fish of this machine is in front, else one any POSIX shell parses (bash or zsh take the hooks)."""
        screen = self.terminal.current_screen()
        target = self.tracker.target()  # behind local relays too
        leader = procfs.read_stat(target.pgid) if target is not None and target.relay is None else None
        snippet = fish_snippet if leader is not None and leader.comm == "fish" else remote_snippet
        return snippet(self._shell_key, int(screen.cursor.x), self.terminal.cols)

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
        self.recording.resize(cols, rows)
        self.terminal.resize(cols, rows)
        with contextlib.suppress(OSError):
            set_winsize(self._proc.master, cols, rows)

    async def read(
        self, start_line: int | None, max_lines: int, max_bytes: int, *, join_wrapped: bool = False
    ) -> p.TerminalReadResult:
        await self.channel.rendered()
        return page(self.terminal, start_line, max_lines, max_bytes, join_wrapped=join_wrapped)

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
        counters = self._limit_counters()
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
            password_prompt=not self.exited and self.tracker.password_prompt_now(),
            engine=self.terminal.engine,
            engine_note=self.terminal.engine_note,
            sandbox=self.sandbox,
            limits=self._limit_info(),
            oom_killed=counters.oom_kills > 0,
            pids_limited=counters.pids_refused > 0,
            listening=[] if self.exited else listening(self.scope.pids()),
            recording=self.recording.active,
        )

    # --- continuity: the session as data, for the next daemon ------------------------------------------

    @property
    def master_fd(self) -> int:
        return self._proc.master

    def save_mark(self) -> tuple[int, int]:
        """Changes whenever output arrives or is drawn: the saved state is rewritten only when it has."""
        return self.channel.received, self.terminal.generation

    async def quiesce(self) -> None:
        """Before a handover: hold the channel, and wait until the engine has rendered everything read and its
        snapshot of that is here (an engine worker's takes a round trip)."""
        self.channel.hold()
        await self.terminal.synced()

    def release(self) -> None:
        """The handover failed: carry on reading and writing."""
        self.channel.release()

    def kill_now(self) -> None:
        """The daemon stops and nothing keeps the PTYs: end the whole process tree at once."""
        self.scope.kill_all()

    def to_state(self, owner: str, depth: Literal["handover", "saved", "listing"] = "handover") -> SessionState:
        """The session as the next daemon needs it. "handover": the channel is held, so nothing changes after this,
        and every operation and the whole transcript go along. "saved" (the state file with an fd store, for
        adoption after a crash): the screen and the transcript's tail as rendered now. "listing" (the state file
        elsewhere): the process tree only, so no secret and nothing typed or printed reaches the disk."""
        full = depth == "handover"
        listing = depth == "listing"
        pid = self._proc.pid
        stat = procfs.read_stat(pid)
        status = self._status
        exited = status if isinstance(status, p.Exited) else None
        active = self.active if full and self.active is not None and not self.active.done else None
        last = self.last_op
        return SessionState(
            session_id=self.session_id,
            type=self.type,
            name=self.name,
            pid=pid,
            starttime=stat.starttime if stat is not None else None,
            cgroup=self.cgroup,
            owner=owner,
            child=stat is not None and stat.ppid == os.getpid(),
            tty_rdev=self._proc.tty_rdev,
            master_fd=self._proc.master,
            slave_fd=self._proc.slave,
            shell_key="" if listing else self._shell_key,
            created_at_ms=self.created_at_ms,
            motd=self.motd,
            open_wait_reason=self.open_wait_reason,
            command_running=self._command_running,
            prompt_cwd=self._prompt_cwd,
            exited=exited is not None,
            exit_code=exited.exit_code if exited is not None else None,
            exit_signal=exited.signal if exited is not None else None,
            outbox=self.channel.hold() if full else b"",
            terminal=None if listing else self.terminal.snapshot(render=full, max_lines=None if full else SAVED_LINES),
            active=active.to_state(taken=self.tracker.taken)
            if full and active is not None and not active.done
            else None,
            last=last.to_state() if not listing and last is not None and last.done else None,
            keyed=[op.to_state() for op in self._keys.values() if op.done and op is not last] if full else [],
            sandbox=self.sandbox,
            profile=self.profile,
            limit_paths=self.limits.paths() if self.limits is not None else [],
            workspace=self.workspace,
        )

    def restore(self, state: SessionState, *, child: bool) -> None:
        """Take over ``state`` on this session, built on the same PTY by the next daemon. ``child``: the program
        is this process's child (an exec kept the pid); after a crash it is not, and its exit status is unknown."""
        if state.terminal is not None:
            self.terminal.restore(state.terminal)
        self.motd = state.motd
        self.sandbox, self.workspace = state.sandbox, state.workspace
        self.profile = state.profile or self.profile
        self.limits = LimitScope.at(state.limit_paths)
        self.open_wait_reason = cast(p.WaitReason, state.open_wait_reason)
        self.created_at_ms = state.created_at_ms
        self._command_running = state.command_running
        self._prompt_cwd = state.prompt_cwd
        for kept in state.keyed:
            self._remember(SendOp.from_state(kept, self.loop))
        if state.last is not None:
            self.last_op = SendOp.from_state(state.last, self.loop)
            self._remember(self.last_op)
        self.channel.write(state.outbox)
        if state.exited:
            self._status = p.Exited(exit_code=state.exit_code, signal=state.exit_signal)
        else:
            self.watch_exit(child=child and state.child)
        if state.active is not None:
            op = SendOp.from_state(state.active, self.loop)
            self._remember(op)
            self.resume(op, taken=state.active.taken)

    def _remember(self, op: SendOp) -> None:
        if op.request.request_key is not None:
            self._keys[op.request.request_key] = op

    # --- teardown --------------------------------------------------------------------------------------

    async def close(self, reason: str) -> int:
        """Idempotently end the whole process tree, reap it, close the PTY. Returns processes signalled."""
        if self._closing is None:
            self._closing = self.loop.create_task(self._close(), name=f"close {self.session_id}")
        return await asyncio.shield(self._closing)

    async def _close(self) -> int:
        cfg = self._config
        await self.watch.close()
        killed = await terminate(
            self.scope, cfg.close_hup_grace_ms / 1000, cfg.close_term_grace_ms / 1000, self._reaper.reap
        )
        # The top process is reaped by now (or soon: it may be a zombie whose exit the reaper reports).
        deadline = time.monotonic() + 2.0
        while not self.exited and time.monotonic() < deadline:
            self._reaper.reap()
            await asyncio.sleep(0.005)
        self.channel.drain()
        self.recording.close()
        await self.recording.finished()  # a closed session's recording is complete on disk
        op = self.active
        for task in list(self._drivers):
            task.cancel()
        if op is not None and not op.done:
            await self._settle(op, "session_exit", None)
        self.channel.close()
        await remove_scope(self.scope)
        for _ in range(50 if self.limits is not None else 0):  # its last tasks leave it a moment after the reap
            if self.limits is not None and self.limits.remove():
                break
            await asyncio.sleep(0.002)
        return killed
