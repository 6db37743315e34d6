"""A session's sends, each driven from the write of its input to its result: started (or resumed after a
handover or a crash), waited on in the send loop, and settled (or failed); what the agent asks of them.

The wait for the program is the send loop's (``send_loop``), which asks the tracker (``readiness.tracker``) whether
the program is ready; what a send is, and its viewport, are ``send``'s; the sends kept for a retry or a wait by id
are ``known_sends``'; cancelling one is the cancel policy's (``cancel``).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from dataclasses import replace
from typing import final

from ptyd import protocol as p
from ptyd.backends.base import SendRequest
from ptyd.backends.os.channel import PtyChannel
from ptyd.backends.os.sandbox.limits import Counters
from ptyd.backends.readiness.foreground import ForegroundGroup
from ptyd.backends.readiness.tracker import ReadinessTracker, Verdict
from ptyd.backends.session.agent_view import AgentView, Unread
from ptyd.backends.session.cancel import CancelPolicy
from ptyd.backends.session.events import SessionWatch
from ptyd.backends.session.facts import read_facts
from ptyd.backends.session.input_bounds import check_deliverable, check_room
from ptyd.backends.session.known_sends import KnownSends
from ptyd.backends.session.send import SendOp, consume_output, viewport
from ptyd.backends.session.send_loop import READ_ALL_ROUNDS, SendingSession, SendLoop
from ptyd.backends.session.until import NamedWait, line_text
from ptyd.backends.session_state import OpState
from ptyd.config import Config
from ptyd.errors import InternalError, OperationLost, SessionBusy, SessionExited
from ptyd.terminal.emulator import Terminal

log = logging.getLogger("ptyd.session")  # the session's logger: its incidents are logged where they always were


@final
class SendDriver:
    """The sends of one session: at most one active, driven by a task of its own; the last one, and those with a
    request key, kept for the agent to ask after."""

    def __init__(
        self,
        session: SendingSession,
        config: Config,
        master: int,
        terminal: Terminal,
        channel: PtyChannel,
        tracker: ReadinessTracker,
        foreground: ForegroundGroup,
        canceller: CancelPolicy,
        watch: SessionWatch,
    ) -> None:
        self.loop = asyncio.get_running_loop()
        self._session = session
        self._config = config
        self._master = master
        self.terminal = terminal
        self.channel = channel
        self.tracker = tracker
        self.foreground = foreground
        self.canceller = canceller
        self.watch = watch
        self.active: SendOp | None = None
        self.last_op: SendOp | None = None
        self.known = KnownSends(config.request_keys_remembered)  # sends an agent may still ask after
        self._tasks: set[asyncio.Task[None]] = set()
        self._counted = Counters(0, 0)  # the limits' counters when the active send began
        self.view = AgentView()  # what the owning agent was not shown yet (agent_view)
        self.send_loop = SendLoop(session, config, terminal, channel, tracker, foreground, canceller, self.view)

    # --- starting ------------------------------------------------------------------------------------

    def start(self, request: SendRequest) -> SendOp:
        session = self._session
        if (kept := self.known.by_key(request.request_key)) is not None:
            return kept
        if (lost := self.known.lost_op(request.request_key)) is not None:
            raise OperationLost(
                "a send with this request_key was started before a daemon crash and its result did not survive; "
                "it is not typed again: read the transcript (terminal_read) for what it did",
                request_key=request.request_key,
                operation_id=lost,
            )
        if self.active is not None:
            raise SessionBusy("a send is already active on this session", operation_id=self.active.id)
        if session.exited:
            raise SessionExited("the session's program has exited", status=session.status())
        data = request.input.encode()
        if data:
            check_deliverable(data, self.tracker, self.foreground, self._master, session.exited)
            check_room(data, self.channel.pending, self._config.max_pending_input_bytes)
        op = SendOp(request, self.terminal.cursor_line, self.loop)
        op.view_start = op.output_line = min(self.view.line, op.anchor)
        op.on_delivered = self._delivered
        if request.until is not None or request.until_stable_s is not None:
            anchor_text = line_text(self.terminal, op.anchor)
            # A pure wait (no input) also searches what was printed between calls; a typed command only its output.
            scan_from = None if data else op.view_start
            op.named = NamedWait(
                request.until, request.until_stable_s, op.anchor, bool(data), anchor_text, scan_from=scan_from
            )
        self.active = op
        self.watch.send_started()
        self.terminal.capture = op.capture
        self.known.keep(op)
        session.recording.input(data, self.tracker.password_prompt_now)  # asked before the write changes the answer
        if data and not op.keys and self.tracker.interrupt_unanswered():
            # Typed right after a cancel's Ctrl-C the program has not answered yet: pressed once it has, as keys
            # after an empty input, or the Ctrl-C's prompt passed for this input's answer (jshell).
            op.keys, data = data, b""
            self.tracker.begin(wrote_input=b"", after_interrupt=True)
        else:
            self.tracker.begin(wrote_input=data)
        if data and not self.view.command_running and not self.channel.input_queued():
            self.view.forget_typed()  # nothing runs and nothing is unread: lines still queued started no command
        if request.installs_integration:
            self.view.forget_typed()  # lines typed to the far shell before it had marks match none of its commands
        else:
            self.view.typed(request.input)
        self._counted = session.limit_counters()
        if op.keys:
            front = self.foreground.describe(session.exited)
            op.front_at_write = front.pgid if front is not None else None
            self.send_loop.keys_after.written()
        session.record.started(op.to_state(taken=False))  # before the write: a crash after it knows the key
        self.channel.write(data)
        self._start_drive(op)  # the send is in the lane (``pacing.LANE``) from now on
        return op

    def resume(self, op: SendOp, *, taken: bool) -> None:
        """Drive a send the previous daemon started (its input is written already) to its result."""
        op.on_delivered = self._delivered
        self.active = op
        self.watch.send_started()
        self.terminal.capture = op.capture
        self.tracker.begin(wrote_input=b"" if taken else op.request.input.encode())
        self._start_drive(op)

    def adopt_in_flight(self, state: OpState) -> None:
        """A send the crashed daemon started after its last save and had not settled: driven to its result here
        (its input was written; the transcript lines it started on may be numbered otherwise now)."""
        op = SendOp.from_state(state, self.loop)
        op.keys = b""  # whether they were pressed before the crash is unknown: twice would be worse than none
        op.anchor = min(op.anchor, self.terminal.cursor_line)
        op.view_start = op.output_line = min(op.view_start, self.view.line, op.anchor)
        op.capture.lines, op.capture.end_line = [], op.anchor
        self.remember(op)
        self.resume(op, taken=True)

    def lose(self, op_id: str, request_key: str | None) -> None:
        """A send the crashed daemon started whose result is gone: its key is not typed again."""
        self.known.lose(op_id, request_key)

    def lost_keys(self) -> dict[str, str]:
        """The request keys a crash lost (for the next daemon, which must not type them either)."""
        return self.known.lost_keys()

    def remember(self, op: SendOp) -> None:
        """Keep ``op`` for a repeat of its request key (a send the previous daemon kept)."""
        op.on_delivered = self._delivered
        self.known.restore(op)

    def keyed(self) -> list[SendOp]:
        """The sends kept by request key, oldest first."""
        return self.known.keyed()

    def _start_drive(self, op: SendOp) -> None:
        task = self.loop.create_task(self._drive(op), name=f"send {self._session.session_id} {op.id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        # Read, rendered and acknowledged before floods elsewhere until it settles (or is cancelled unstarted).
        self.channel.send_began()
        task.add_done_callback(lambda _: self.channel.send_ended())

    # --- what the agent asks of the current send -------------------------------------------------------

    @property
    def current(self) -> SendOp | None:
        return self.active or self.last_op

    async def output(self) -> p.TerminalOutputResult:
        op = self.current
        if op is None:
            return p.TerminalOutputResult(operation_id=None, output="", done=True, result=None)
        await self.channel.rendered()
        done = op.done
        text, _ = consume_output(op, self.terminal, self._config.max_read_bytes)
        if done:
            op.delivered()  # its result goes along: the cursor moves past it (output chunks alone move nothing)
        return p.TerminalOutputResult(
            operation_id=op.id, output=text, done=done, result=op.future.result() if done else None
        )

    async def wait(
        self, timeout_s: float | None, request: SendRequest, operation_id: str | None = None
    ) -> p.TerminalWaitResult:
        """The active send's result (or ``operation_id``'s); else the last one if the agent was not given it; else
        what the session does next: a wait-only send (``request``) that follows a command still running."""
        op = self.current if operation_id is None else self._known(operation_id)
        if op is None:
            return p.TerminalWaitResult(operation_id=None, done=True, result=None)
        if operation_id is None and op.done and op.given and self._follows(op):
            last = op.request
            request = replace(
                request, max_bytes=last.max_bytes, compact=last.compact, join_wrapped=last.join_wrapped, until_done=True
            )
            op = self.start(request)
            result = await asyncio.shield(op.future)
            done = result.wait_reason != "timeout"
            if done:
                op.delivered()
            else:  # a wait that gave up: what it shows comes again in the next result (old clients ignore it)
                op.given = True
            return p.TerminalWaitResult(operation_id=op.id, done=done, result=result)
        if op.done:
            result = op.future.result()  # a send that failed raises its error here too
            op.delivered()
            return p.TerminalWaitResult(operation_id=op.id, done=True, result=result)
        try:
            result = await asyncio.wait_for(op.result(), timeout_s)
        except TimeoutError:
            return p.TerminalWaitResult(operation_id=op.id, done=False, result=None)
        return p.TerminalWaitResult(operation_id=op.id, done=True, result=result)

    def _follows(self, op: SendOp) -> bool:
        """A wait after ``op``'s result was given follows what ``op`` left running: it settled before the program
        was ready (timeout, inferred_idle), or a shell command runs. After a plain settle it answers ``op`` again."""
        if self._session.exited or op.future.exception() is not None:
            return False
        return self.view.command_running or op.future.result().wait_reason in ("timeout", "inferred_idle")

    def _known(self, operation_id: str) -> SendOp:
        """The operation ``operation_id``, if this daemon knows it; else it was lost (in flight at a crash)."""
        for op in (self.active, self.last_op, *self.known.all()):
            if op is not None and op.id == operation_id:
                return op
        raise OperationLost(
            "this daemon does not know the operation: it was in flight when a previous daemon crashed, or is "
            "too old; read the transcript (terminal_read) for what it did",
            operation_id=operation_id,
        )

    def _delivered(self, op: SendOp) -> None:
        if op.unread is None or op.future.cancelled() or op.future.exception() is not None:
            return
        result = op.future.result()
        # A full-screen program's result shows its screen, not the transcript lines: those stay unread.
        line = self.view.line if result.alt_screen else result.lines.end_line - 1
        self.view.delivered(line, op.unread, "" if result.alt_screen else op.end_text)

    def wake(self, output: bool) -> None:
        """Something happened (``output``: output arrived; else an exit or a cancel): the loop checks again now."""
        self.send_loop.wake(output)

    def cancel(self) -> p.TerminalCancelResult:
        self.view.forget_typed()  # the cancel drops input the program has not read: those lines never run
        op = self.active
        if op is None or op.done:
            last = self.last_op
            reason = last.future.result().wait_reason if last is not None and last.future.done() else None
            return self.canceller.interrupt_left_running(reason)
        self.canceller.cancel(op.cancel)
        self.send_loop.wake(False)
        return self.canceller.requested(op.cancel)

    async def close(self) -> None:
        """The session is closing: stop driving, and settle the active send as ended with the session."""
        op = self.active
        for task in list(self._tasks):
            task.cancel()
        if op is not None and not op.done:
            await self._settle(op, "session_exit", None)

    # --- driving one send --------------------------------------------------------------------------------

    async def _drive(self, op: SendOp) -> None:
        try:
            reason, verdict = await self.send_loop.wait_ready(op)
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
        log.exception("incident %s in send %s of %s", incident, op.id, self._session.session_id)
        if self.active is op:
            self.active = None
            self.terminal.capture = None
        self.last_op = op
        self._session.record.settled(op.id)
        if not op.future.done():
            op.future.set_exception(InternalError("Internal error", incident=incident))
            op.future.exception()  # retrieved: a send nobody waits for is not logged a second time by asyncio

    def _exit_code(self, op: SendOp, unread: Unread) -> int | None:
        """The last command that ended during this send (as in protocol 4); else, with no command running now,
        the last that ended between calls (one running now must not read as ended)."""
        if op.exit_code is not None:
            return op.exit_code
        if unread.commands and not self.view.command_running:
            return unread.commands[-1].exit_code
        return None

    async def _settle(self, op: SendOp, reason: p.WaitReason, verdict: Verdict | None) -> None:
        session = self._session
        finite = reason in ("stdin_read", "session_exit")  # else a flood may go on: what is here now
        facts = self.send_loop.take_facts() if reason == "stdin_read" else None
        await self.send_loop.read_all(READ_ALL_ROUNDS if finite else 1)
        if facts is None or not facts.hold(self.foreground.pgid(), session.exited):
            facts = read_facts(session, self.foreground)
        if op.view_start == self.view.line:  # rendered now: whether the line shown last only ended since
            op.view_start = self.view.start(self.terminal.cursor_line, line_text(self.terminal, op.view_start))
        text, truncated, lines, compacted = viewport(op, self.terminal)
        unread = self.view.unread()
        counted = facts.counters
        target = self.tracker.last_target if reason == "stdin_read" else None  # from the check that settled it
        result = p.SendResult(
            operation_id=op.id,
            viewport=text,
            wait_reason=reason,
            session_status=session.status(),
            truncated=truncated,
            alt_screen=self.terminal.alt_screen,
            foreground=facts.foreground,
            lines=lines,
            exit_code=self._exit_code(op, unread),
            cwd=session.shell_cwd(),
            password_prompt=self.tracker.password_prompt(target),
            ready_basis=verdict.basis if verdict is not None else None,
            relay=verdict.relay if verdict is not None else None,
            unread_input=self.channel.input_queued(),
            oom_killed=counted.oom_kills > self._counted.oom_kills,
            pids_limited=counted.pids_refused > self._counted.pids_refused,
            sandbox=session.sandbox,
            match=op.named.match if op.named is not None else None,
            listening=facts.listening,
            compacted=compacted,
            commands=list(unread.commands),
            running=self.view.running(),
            continuation=self.view.continuation(),
            earlier_lines=max(0, min(op.anchor, lines.end_line - 1) - lines.start_line),
            lost_lines=unread.lost_lines,
        )
        op.unread = unread
        op.end_text = line_text(self.terminal, lines.end_line - 1)
        if self.active is op:
            self.active = None
            self.terminal.capture = None
        self.last_op = op
        self.known.settled(op)
        session.record.progress(self.channel.received, self.terminal.total_lines)  # rendered by now
        session.record.settled(op.id)
        if not op.future.done():
            op.future.set_result(result)
        self.watch.emit("send_settled", operation_id=op.id, result=result)
