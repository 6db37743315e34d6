"""A live local PTY session: its terminal, its process, and its teardown.

Its sends are the send driver's (``send_driver``), whose send loop (``send_loop``) asks the tracker
(``readiness.tracker``) whether the program is ready; the transcript is paged by ``paging``; events for
subscribers come from ``events``; shell integration marks are taken out of the output by ``shell_integration``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal as signals
import time
from collections.abc import Callable
from typing import Literal, cast, final

from ptyd import protocol as p
from ptyd.backends.base import SendRequest
from ptyd.backends.os import procfs, tty
from ptyd.backends.os.channel import PtyChannel
from ptyd.backends.os.containment import Scope, terminate
from ptyd.backends.os.containment import remove as remove_scope
from ptyd.backends.os.containment.reaper import ChildReaper
from ptyd.backends.os.sandbox.limits import Counters, LimitScope
from ptyd.backends.os.spawn import Spawned, set_winsize
from ptyd.backends.readiness.foreground import ForegroundGroup
from ptyd.backends.readiness.live import LiveEvidence
from ptyd.backends.readiness.tracker import ReadinessTracker
from ptyd.backends.recording.recorder import NO_RECORDING, NoRecording
from ptyd.backends.session.answers import AnswerGate
from ptyd.backends.session.cancel import CTRL_C, CancelPolicy
from ptyd.backends.session.events import Listener, SessionWatch
from ptyd.backends.session.listening import listening
from ptyd.backends.session.live_record import LiveRecord, RecordRead, lost_marker
from ptyd.backends.session.paging import page
from ptyd.backends.session.screenshot import screenshot
from ptyd.backends.session.send import SendOp
from ptyd.backends.session.send_driver import SendDriver
from ptyd.backends.session_state import SAVED_LINES, SessionState
from ptyd.backends.shell_integration import Mark, MarkFilter, fish_snippet, nested_key, remote_snippet
from ptyd.config import Config, SandboxProfile
from ptyd.errors import InvalidArgument
from ptyd.terminal.keys import encode as encode_keys
from ptyd.terminal.workers.placement import open_session_terminal

log = logging.getLogger("ptyd.session")


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
        record: LiveRecord | None = None,
    ) -> None:
        self.loop = asyncio.get_running_loop()
        self.record = record or LiveRecord.disabled()  # what a daemon crash must not lose (live_record)
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
            engine_worker_rss_mb=config.engine_worker_rss_mb,
            label=session_id,
        )
        self.channel = PtyChannel(
            spawned,
            self.terminal,
            config.max_render_backlog_bytes,
            self._output_arrived,
            self._record_output(MarkFilter(shell_key, self._on_mark).feed),
        )
        self.foreground = ForegroundGroup(spawned, self.members)
        self.answers = AnswerGate(
            self.foreground,
            self.channel.front,
            self._write_answer,
            session_id,
            config.answer_hold_ms / 1000,
            read_all=self.channel.drain,
            orphaned=lambda: self.channel.orphaned,
        )
        evidence = LiveEvidence(spawned, self.foreground, self.members, self.channel, self.terminal)
        self.tracker = ReadinessTracker(evidence, config.relay_quiet_ms / 1000)
        self.canceller = CancelPolicy(
            spawned.leader,
            self.foreground,
            self.channel,
            lambda: self.exited,
            self.tracker,
            lambda: tty.interrupts(spawned.master, CTRL_C),
        )
        self.watch = SessionWatch(
            session_id,
            self.tracker,
            self.channel,
            self.terminal,
            lambda: self.sends.active is not None,
            config.max_read_bytes,
        )
        self._status: p.SessionStatus = p.Running()
        self.replies = 0  # answers to terminal queries written to the program
        self._dropped_replies = 0  # answers not written: the program left max_pending_input_bytes unread
        self._command_running = False  # the shell's last mark was a command mark
        self._nested = 0  # shells terminal_integrate installed the hooks into (each with a key of its own)
        self._prompt_cwd: str | None = None  # the shell's cwd at its last prompt mark
        self._closing: asyncio.Task[int] | None = None
        # The sandbox and limits it was opened with (set by the backend, or from the state a handover carried).
        self.sandbox = "none"
        self.sandbox_note: str | None = None  # the service's: sandbox_default "auto" where none can be made
        self.profile = SandboxProfile()
        self.limits: LimitScope | None = None
        self.workspace = ""
        # Its sandbox's helpers in its cgroup (a network namespace's holder and pasta): ended with it, never its
        # programs (pasta holds ~130 sockets, whose listing cost every result 13 ms).
        self.companions: frozenset[int] = frozenset()
        self.sends = SendDriver(
            self,
            config,
            spawned.master,
            self.terminal,
            self.channel,
            self.tracker,
            self.foreground,
            self.canceller,
            self.watch,
        )

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
        self.answers.offer(data, self.channel.asker(), self.channel.rendered_bytes)

    def _write_answer(self, data: bytes) -> None:
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
        self.replies += 1
        # Input the program blocked to read: until it is seen to take it, its wait is the one before the answer
        # (whether the query was answered by the reader as it arrived or by the drain before settling). Marked
        # before the write: a program on the other core may read the answer before this line returns.
        self.tracker.mark_write(data, answer=True)
        self.channel.write(data)  # answers to terminal queries (DSR, DA) go back to the program

    def _on_mark(self, mark: Mark) -> None:
        view = self.sends.view
        if mark.kind == "P":
            view.continued()
            return
        if mark.kind == "C":
            self._command_running = True
            view.command_started(mark.command, mark.depth)
            return
        if mark.depth == 0:
            self.channel.prompt_drawn(mark.at)
        active = self.sends.active
        ended = view.command_ended(mark.status, mark.cwd, mark.depth)
        if ended is not None and active is not None:
            active.exit_code = ended.exit_code
        self._command_running = False  # the shell that marked is at its prompt (one inside the ssh command's, maybe)
        self._prompt_cwd = mark.cwd
        if active is not None:
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
        self.sends.wake(False)
        self.watch.emit("session_exit", status=self._status)

    def _output_arrived(self) -> None:
        self.record.progress(self.channel.received, self.terminal.total_lines)
        self.sends.wake(True)
        self.watch.output_arrived()

    def set_listener(self, listener: Listener | None, output: bool, screen: bool = False) -> None:
        self.watch.set_listener(listener, output, screen)

    # --- sends (the driver's) and what they read of the session ---------------------------------------

    def start_send(self, request: SendRequest) -> SendOp:
        return self.sends.start(request)

    async def output(self) -> p.TerminalOutputResult:
        return await self.sends.output()

    async def wait(
        self, timeout_s: float | None, follow: SendRequest, operation_id: str | None = None
    ) -> p.TerminalWaitResult:
        return await self.sends.wait(timeout_s, follow, operation_id)

    def cancel(self) -> p.TerminalCancelResult:
        return self.sends.cancel()

    def limit_counters(self) -> Counters:
        return self.limits.counters() if self.limits is not None else Counters(0, 0)

    def _limit_info(self) -> p.SessionLimits | None:
        profile = self.profile
        if profile.memory_mib is None and profile.pids_max is None and profile.cpu_percent is None:
            return None
        return p.SessionLimits(
            memory_mib=profile.memory_mib, pids_max=profile.pids_max, cpu_percent=profile.cpu_percent
        )

    def shell_cwd(self) -> str | None:
        return None if self._command_running else self._prompt_cwd

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
        self._nested += 1  # its marks are told from those of the shell that runs it (the ssh command runs on)
        return snippet(nested_key(self._shell_key, self._nested), int(screen.cursor.x), self.terminal.cols)

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

    async def screenshot(self, fonts: tuple[tuple[str, ...], tuple[str, ...]], size: int) -> p.TerminalScreenshotResult:
        await self.channel.rendered()
        return await screenshot(self.terminal, fonts, size)

    def info(self, owner: str, owner_name: str | None) -> p.SessionInfo:
        op = self.sends.current
        counters = self.limit_counters()
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
            busy=self.sends.active is not None,
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
            listening=[] if self.exited else listening(self.members()),
            recording=self.recording.active,
        )

    # --- continuity: the session as data, for the next daemon ------------------------------------------

    @property
    def master_fd(self) -> int:
        return self._proc.master

    def save_mark(self) -> tuple[object, ...]:
        """Changes whenever what ``to_state("saved")`` writes does (output arrives or is drawn, a send ends, the
        program exits): the saved state is taken again only when it has."""
        last = self.sends.last_op
        return (
            self.channel.received,
            self.terminal.generation,
            last.id if last is not None else None,
            last is not None and last.done,
            self._status,
            self._command_running,
            self._prompt_cwd,
            self._shell_key,
            self.sends.view.mark,
        )

    def pause_floods(self) -> None:
        """A handover's pre-flight: leave output written in bulk in the PTY meanwhile (``release`` resumes)."""
        self.channel.pause_floods()

    async def quiesce(self) -> None:
        """Before a handover: hold the channel, and wait until the engine has rendered everything read and its
        snapshot of that is here (an engine worker's takes a round trip)."""
        self.channel.hold()
        await self.terminal.synced()

    def release(self) -> None:
        """The handover was refused or failed: carry on reading and writing."""
        self.channel.release()

    def kill_now(self) -> None:
        """The daemon stops and nothing keeps the PTYs: end the whole process tree at once."""
        self.scope.kill_all()

    def members(self) -> list[int]:
        """Its programs' processes: those in its scope but its sandbox's helpers."""
        pids = self.scope.pids()
        return [pid for pid in pids if pid not in self.companions] if self.companions else pids

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
        active = self.sends.active if full and self.sends.active is not None and not self.sends.active.done else None
        last = self.sends.last_op
        state = SessionState(
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
            nested=self._nested,
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
            last=last.to_state() if not listing and last is not None and last.settled else None,
            keyed=[op.to_state() for op in self.sends.keyed() if op.settled and op is not last] if full else [],
            sandbox=self.sandbox,
            profile=self.profile,
            limit_paths=self.limits.paths() if self.limits is not None else [],
            workspace=self.workspace,
            companions=sorted(self.companions),
            lost_keys=self.sends.lost_keys() if full else {},
            rendered_bytes=self.channel.rendered_bytes,
            total_lines=self.terminal.total_lines,
        )
        if not listing:
            self.sends.view.to_state(state)
        return state

    def restore(self, state: SessionState, *, child: bool, record: RecordRead | None = None) -> None:
        """Take over ``state`` on this session, built on the same PTY by the next daemon. ``child``: the program
        is this process's child (an exec kept the pid); after a crash it is not, and its exit status is unknown."""
        if state.terminal is not None:
            self.terminal.restore(state.terminal)
        self.motd = state.motd
        self.sandbox, self.workspace = state.sandbox, state.workspace
        self.companions = frozenset(state.companions)
        self.profile = state.profile or self.profile
        self.limits = LimitScope.at(state.limit_paths)
        self.open_wait_reason = cast(p.WaitReason, state.open_wait_reason)
        self.created_at_ms = state.created_at_ms
        self._command_running = state.command_running
        self._prompt_cwd = state.prompt_cwd
        self._nested = state.nested
        view_line = state.view_line if state.view_line is not None else self.terminal.cursor_line
        self.sends.view.restore(state, view_line)
        for kept in state.keyed:
            self.sends.remember(SendOp.from_state(kept, self.loop))
        for key, op_id in state.lost_keys.items():
            self.sends.lose(op_id, key)
        if state.last is not None:
            self.sends.last_op = SendOp.from_state(state.last, self.loop)
            self.sends.remember(self.sends.last_op)
        self.channel.continue_from(state.rendered_bytes)
        self.channel.write(state.outbox)
        if state.exited:
            self._status = p.Exited(exit_code=state.exit_code, signal=state.exit_signal)
        else:
            self.watch_exit(child=child and state.child)
        if state.active is not None:
            op = SendOp.from_state(state.active, self.loop)
            self.sends.remember(op)
            self.sends.resume(op, taken=state.active.taken)
        elif record is not None and not child:
            self._after_crash(state, record)

    def _after_crash(self, state: SessionState, record: RecordRead) -> None:
        """What the crashed daemon did after its last save, from its live record: the lines it read and lost are
        counted and marked in the transcript, and the sends it started are known: the newest, if it had not
        settled, is driven to its result; a retry of any other key answers operation_lost."""
        lost_bytes = record.received - state.rendered_bytes
        if state.rendered_bytes and lost_bytes > 0:
            lines = max(0, record.total_lines - state.total_lines)
            if not self.terminal.alt_screen:  # a full-screen program's screen is redrawn, not a transcript
                self.terminal.feed(lost_marker(lines, lost_bytes))
                self.terminal.flush()
            self.sends.view.lost(max(lines, 1))
        saved = {op.id for op in (state.last, *state.keyed) if op is not None}
        unsaved = [send for send in record.sends if send.op_id not in saved]
        for send in unsaved:
            newest = send is unsaved[-1]
            if newest and not send.settled and send.op is not None and not self.exited:
                self.sends.adopt_in_flight(send.op)
            else:
                self.sends.lose(send.op_id, send.request_key)

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
        await self.sends.close()
        self.channel.close()
        self.answers.close()
        self.record.close()
        await remove_scope(self.scope)
        for _ in range(50 if self.limits is not None else 0):  # its last tasks leave it a moment after the reap
            if self.limits is not None and self.limits.remove():
                break
            await asyncio.sleep(0.002)
        return killed
