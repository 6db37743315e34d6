"""The loop that waits for one send's result: the program's readiness asked of the tracker at a cadence that
follows the output, the keys pressed after the input, named waits checked, and the drain before a wait counts.
The send driver (``send_driver``) runs it once per send and settles the send on what it returns."""

from __future__ import annotations

import asyncio
import time
from typing import Protocol, final

from ptyd import protocol as p
from ptyd.backends.os.channel import PtyChannel
from ptyd.backends.os.sandbox.limits import Counters
from ptyd.backends.readiness.foreground import ForegroundGroup
from ptyd.backends.readiness.tracker import NOT_READY, ReadinessTracker, Verdict
from ptyd.backends.recording.recorder import NoRecording
from ptyd.backends.session.agent_view import AgentView
from ptyd.backends.session.answers import AnswerGate
from ptyd.backends.session.cancel import CancelPolicy
from ptyd.backends.session.facts import ProcessFacts, read_facts
from ptyd.backends.session.input_bounds import SHELLS
from ptyd.backends.session.keys_after import KEYS_PROBE_S, KeysAfterInput
from ptyd.backends.session.live_record import LiveRecord
from ptyd.backends.session.send import SendOp
from ptyd.config import Config
from ptyd.terminal.emulator import Terminal

BULK_PROBE_INTERVAL_S = 0.005  # readiness probes at most this often while output arrives in bulk...
BULK_PROBE_MAX_S = 1.0  # ...and at least this often while more of it waits unread (``_probe_wait``)
READ_ALL_ROUNDS = 8  # reads (each up to the render backlog's bound, then rendered) before a settle at the prompt


class SendingSession(Protocol):
    """What the sends read of their session (a LocalSession) as one starts and as it settles."""

    session_id: str
    sandbox: str
    recording: NoRecording
    record: LiveRecord
    answers: AnswerGate

    @property
    def exited(self) -> bool: ...
    @property
    def replies(self) -> int: ...  # answers to terminal queries written to the program so far
    def members(self) -> list[int]: ...  # its programs' processes
    def status(self) -> p.SessionStatus: ...
    def shell_cwd(self) -> str | None: ...
    def limit_counters(self) -> Counters: ...


def _resolve(fut: asyncio.Future[bool], value: bool) -> None:
    if not fut.done():
        fut.set_result(value)


@final
class SendLoop:
    """One session's send loop: at most one send waits in it at a time (the driver's active one)."""

    def __init__(
        self,
        session: SendingSession,
        config: Config,
        terminal: Terminal,
        channel: PtyChannel,
        tracker: ReadinessTracker,
        foreground: ForegroundGroup,
        canceller: CancelPolicy,
        view: AgentView,
    ) -> None:
        self.loop = asyncio.get_running_loop()
        self._session = session
        self._config = config
        self.terminal = terminal
        self.channel = channel
        self.tracker = tracker
        self.foreground = foreground
        self.canceller = canceller
        self.view = view
        self._activity: asyncio.Future[bool] | None = None
        # The loop sleeps until a flood's next probe: its bulk reads do not wake it (``wake``), only noted.
        self._flood_sleep = False
        self._flood_output = False
        self.keys_after = KeysAfterInput()  # when the keys pressed after a send's input go out
        self._facts: ProcessFacts | None = None  # read after the ready verdict, for the result (``facts``)
        self._probed_at = 0.0  # when the last probe ran...
        self._named_at = 0.0  # ...and the named wait's last look
        self._cap_floor = config.probe_max_interval_ms / 1000
        self._bulk_cap = self._cap_floor  # the longest wait between probes of a flood (it doubles from the floor)

    def wake(self, output: bool) -> None:
        """Something happened (``output``: output arrived; else an exit or a cancel): the loop checks again now,
        unless a flood wrote on while the loop waits for its next probe and the probe is not due yet (as
        ``_probe_wait`` has it: within its few ms, or more of the flood waits unread): a wake-up at each of its reads
        (~4 KiB) only went back to sleep (700 a `seq` of 10 MB). Output that is not bulk (the prompt after a
        flood) wakes it as ever."""
        if (
            output
            and self._flood_sleep
            and self.channel.bulk
            and (time.monotonic() - self._probed_at < BULK_PROBE_INTERVAL_S or self.channel.unread())
        ):
            self._flood_output = True
            return
        if self._activity is not None and not self._activity.done():
            self._activity.set_result(output)

    async def _sleep_or_activity(self, delay: float, *, flood: bool = False) -> bool:
        """Sleep up to ``delay``; True if output arrived meanwhile. ``flood``: a flood's bulk output does not end
        the sleep (``wake``)."""
        fut: asyncio.Future[bool] = self.loop.create_future()
        self._activity = fut
        self._flood_sleep, self._flood_output = flood, False
        timer = self.loop.call_later(delay, _resolve, fut, False)
        try:
            return await fut or self._flood_output
        finally:
            timer.cancel()
            self._activity = None
            self._flood_sleep = False

    async def wait_ready(self, op: SendOp) -> tuple[p.WaitReason, Verdict | None]:
        cfg = self._config
        min_interval = cfg.probe_min_interval_ms / 1000
        interval = min_interval
        self._facts = None
        self._probed_at = self._named_at = 0.0
        self._bulk_cap = self._cap_floor
        while True:
            if self._session.exited:
                return "session_exit", None
            self.canceller.follow(op.cancel)
            if op.named is not None and self._named_due() and (named := op.named.check(self.terminal)) is not None:
                return named, None
            wait = 0.0 if op.keys else self._probe_wait(time.monotonic())
            if wait > 0:
                verdict = NOT_READY
            else:
                verdict = self.tracker.check()
                self._probed_at = time.monotonic()
            if op.keys and op.cancel.cancelled_at is not None:
                op.keys = b""  # a cancelled send presses nothing more
            if op.keys and await self._keys_due(op, verdict):
                self._press_keys(op)
                continue
            if (
                verdict.ready
                and not op.keys
                and not self.canceller.owes_interrupt(op.cancel)
                and self._readiness_ends(op, verdict)
                and await self._nothing_owed(facts=True)
            ):
                # What the drain just rendered may hold the named line (a command that printed it and returned to
                # the prompt between two checks): matched, not a prompt reached without it.
                if op.named is not None and (named := op.named.check(self.terminal)) is not None:
                    return named, None
                return "stdin_read", verdict
            probed = time.monotonic()
            now = probed
            if now >= op.deadline:
                return "timeout", None
            idle_deadline = self._idle_deadline(op)
            if now >= idle_deadline:
                return "inferred_idle", None
            if wait == 0 and not verdict.ready and not op.keys and self.channel.bulk:
                # A flood just probed: its next probe is a few ms away, or the interval's while it stays silent (its
                # last read was in bulk, and a build's burst may be followed by a minute of compiling).
                wait = max(BULK_PROBE_INTERVAL_S, interval)
            # A flood sleeps until its next probe is due, not the interval (its reads reset it at each wake-up).
            delay = min(wait if wait > 0 else interval, op.deadline - now, idle_deadline - now)
            if op.named is not None and (due := op.named.next_due()) is not None:
                delay = min(delay, due - now)
            if op.named is not None and self.channel.bulk:  # the named wait's next look (``_named_due``)
                delay = min(delay, self._named_at + BULK_PROBE_INTERVAL_S - now)
            if op.keys:
                delay = min(delay, KEYS_PROBE_S)
            if await self._sleep_or_activity(max(delay, 0.0), flood=wait > 0):
                interval = min_interval
                await self._let_engine_start()
            else:
                interval = min(interval * 2, cfg.probe_max_interval_ms / 1000)

    def _named_due(self) -> bool:
        """A named wait looks at every wake-up, but at a flood's output every few ms at most: each look searches the
        changed screen again (``until``), and a flood wakes the loop at each read."""
        now = time.monotonic()
        if self.channel.bulk and now - self._named_at < BULK_PROBE_INTERVAL_S:
            return False
        self._named_at = now
        return True

    def _probe_wait(self, now: float) -> float:
        """Seconds before the next readiness probe is worth its cost (0: probe now). While output pours in, the
        program is busy writing: probing on every chunk would only cost the reads (a probe is a dozen /proc reads
        and ioctls) that bring its output in, so a flood is probed every few ms at most, and not while more of its
        output waits unread in the PTY by then: it wrote on meanwhile (its reader paused beside other floods), and
        a ready verdict would have to read all that first anyway; the read that takes it wakes this loop. 50
        floods with sends in flight, probed at each wake-up, took 40% of the daemon (py-spy) and the sends beside
        them waited for it. A probe comes anyway after ``_bulk_cap``, which doubles while the program writes on."""
        if not self.channel.bulk:
            self._bulk_cap = self._cap_floor
            return 0.0
        since = now - self._probed_at
        if since < BULK_PROBE_INTERVAL_S:
            return BULK_PROBE_INTERVAL_S - since
        if not self.channel.unread():
            self._bulk_cap = self._cap_floor
            return 0.0
        if since < self._bulk_cap:
            return self._bulk_cap - since
        self._bulk_cap = min(self._bulk_cap * 2, BULK_PROBE_MAX_S)
        return 0.0

    def _idle_deadline(self, op: SendOp) -> float:
        """When silence settles ``op`` as inferred_idle: idle_s after the program's last output (counting output
        still on its way through the daemon as output now), never with until_done, nor while the shell command an
        empty send follows still runs."""
        request = op.request
        if request.until_done or (request.follow_command and self.view.command_running):
            return op.deadline + 1.0
        deadline = max(self.channel.last_output, op.started) + request.idle_s
        if deadline <= time.monotonic():  # only then is the costlier look at the channel worth it
            deadline = max(self.channel.quiet_since(), op.started) + request.idle_s
        return deadline

    async def _keys_due(self, op: SendOp, verdict: Verdict) -> bool:
        """The program took the send's input, so its keys go to what the input started: it is ready for more
        (vim after ``oX``: now Escape; ``cat`` after ``cat\n``: now C-c, which the shell would have taken,
        flushing the line unread), or what the input started settled (keys_after)."""
        if self.channel.input_queued() or not self.tracker.taken:
            return False
        if verdict.ready:
            return await self._nothing_owed()
        front = self.foreground.describe(self._session.exited)
        if front is None:
            return False
        return self.keys_after.settled(op, front.pgid, self._session.members())

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
        front = self.foreground.describe(self._session.exited)
        return front is not None and front.name in SHELLS

    def take_facts(self) -> ProcessFacts | None:
        """The process facts read after the verdict ``wait_ready`` returned last (None: read none), once."""
        facts, self._facts = self._facts, None
        return facts

    async def _nothing_owed(self, *, facts: bool = False) -> bool:
        """Before a wait counts: read what the program wrote, render it and answer its terminal queries. An
        answer written now is input the program must first take (it blocked reading it): not ready yet.
        ``facts``: the result's process facts are read while an engine worker renders what the drain read (the
        drain waits for its acknowledgement anyway)."""
        replies = self._session.replies
        if facts:
            self._facts = None
            self.channel.drain(paused_too=True)  # what read_all would read first, read now
            if await self._let_engine_start():  # on its way to the worker first, then the /proc reads here
                self._facts = read_facts(self._session, self.foreground)
        await self.read_all()
        # An answer the gate still holds is owed too: written at its next check, once the asker is seen waiting.
        return self._session.replies == replies and not self._session.answers.holding

    async def read_all(self, rounds: int = READ_ALL_ROUNDS) -> None:
        """Read and render what the program wrote, the reader paused or not: a program that waits wrote a finite
        amount, and a result must not show a screen behind it (12 floods: a send settled at the prompt showed a
        line 700 lines before the end, the rest still in the PTY behind a paused reader)."""
        for _ in range(rounds):
            before = self.channel.received
            self.channel.drain(paused_too=True)
            await self.channel.rendered()
            if self.channel.received == before:
                return

    async def _let_engine_start(self) -> bool:
        """Output just read goes to an engine worker at the loop's next turn (its link writes then), after this
        wake-up: one turn first, so that the worker renders it while the probe runs here, not after it (the
        probe's ~0.25 ms, seen with bench/trace_send.py --dump). The probe itself is unchanged, a turn later.
        Whether there was such output (and a turn went by)."""
        if not self.terminal.remote or self.channel.rendered_bytes >= self.channel.received:
            return False
        await asyncio.sleep(0)
        return True
