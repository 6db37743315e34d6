"""The session's PTY master: draining output into the terminal renderer, and writing input.

Output is read continuously whether anyone is sending or not, so a program never blocks on a full PTY. The
reader pauses only while the renderer's backlog is over its bound: memory stays bounded and the program is
throttled to the renderer's pace instead of the daemon growing.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import termios
import time
from collections import deque
from collections.abc import Callable
from typing import final

from ptyd.backends.os.pacing import FLOOD_ENDS, FLOOD_HOLD_S, LANE, READS, RENDER_BUDGET_S, RENDERS, URGENT_S
from ptyd.backends.os.spawn import Spawned
from ptyd.backends.os.tty import buffered, input_queued
from ptyd.terminal.engine import TerminalEngine

READ_BURST = 256 * 1024  # bytes read per wake-up before yielding to other sessions...
READS_PER_WAKEUP = 4  # ...or this many reads: a wake-up trading turns with a fast producer must not hold the loop
RENDER_DEFER_S = 0.002  # output that arrives in bulk is rendered in batches (the fast path needs big ones)
INTERACTIVE_BYTES = 4096  # smaller chunks are rendered at once: prompts and echoes must not wait
TAIL_BYTES = 64  # kept of the latest output: a query a program waits to have answered is shorter
SETTLE_S = 0.05  # output quiet this long: the renderer frees what only a flood needs (Ghostty's history page)


@final
class PtyChannel:
    def __init__(
        self,
        proc: Spawned,
        terminal: TerminalEngine,
        max_backlog: int,
        on_output: Callable[[], None],
        output_filter: Callable[[bytes], bytes] | None = None,
    ) -> None:
        self.loop = asyncio.get_running_loop()
        self._proc = proc
        self.terminal = terminal
        self._max_backlog = max_backlog
        self._on_output = on_output
        self._filter = output_filter  # takes what is not terminal output (shell integration marks) out
        self.received = 0  # bytes read from the master
        self.last_output = time.monotonic()
        self.tail = b""  # the last bytes read: whether the output ends in a terminal query
        self._raw = bytearray()  # read, not yet fed to the terminal
        self._rendered = 0  # bytes fed to the terminal and fully rendered
        self._render_scheduled = False
        self._render_held = False  # the scheduled render waits for a send elsewhere (``LANE``)
        self._render_paced = False  # ...or for its turn among floods (``RENDERS``)
        self._render_timer: asyncio.TimerHandle | None = None  # ...or for more output to batch (``RENDER_DEFER_S``)
        self._settle_scheduled = False
        # (bytes read, a remote engine's units sent) when each began to wait: woken once both are rendered.
        self._render_waiters: list[tuple[int, int, asyncio.Future[None]]] = []
        # A remote engine's progress: (its units sent after a feed, bytes read by then), oldest first.
        self._marks: deque[tuple[int, int]] = deque()
        if terminal.remote:
            terminal.on_progress = self._progressed
        # The foreground group as output was read: (bytes read before it was first seen, the group), from the
        # one in front at the oldest byte not yet rendered. An answer to a query goes only to the group that was
        # in front when the query was read (``asker``, session/answers.py).
        self._fronts: deque[tuple[int, int]] = deque()
        # Output read before the session's shell drew its prompt again (``prompt_drawn``): whatever wrote it (the
        # command that ran) has left the front, whenever its bytes were read.
        self._orphaned = 0
        self._filtered_from = 0  # ``received`` where the output filter began counting (``continue_from``)
        self._more = False  # the last wake-up stopped with output still waiting to be read
        self._bulk = False  # the last wake-up read output in bulk
        self._flooded = False  # ...or one since the output last settled (``FLOOD_ENDS``)
        self._reading = False
        self._awaiting = False  # the reader waits for a pacer's turn or a send elsewhere to settle, not the poll
        self._outbox = bytearray()
        self._writing = False
        self.closed = False
        self.held = False  # a handover is under way: the output stays in the PTY for the next daemon
        self.floods_paused = False  # a handover's pre-flight: output written in bulk waits in the PTY meanwhile
        self._sends = 0  # sends in flight on this session (``LANE``)
        self._held_since = 0.0  # when this flood began to wait for a send elsewhere (0: it does not)
        self._resumes: dict[str, asyncio.TimerHandle] = {}  # "read", "render": looking again while held
        self._start_reading()

    # --- output ----------------------------------------------------------------------------------------

    def _stopped(self) -> bool:
        """Nothing is read: closed, held for a handover, or a flood paused for one."""
        return self.closed or self.held or (self.floods_paused and self._bulk)

    def _start_reading(self) -> None:
        if not self._reading and not self._awaiting and not self._stopped():
            self.loop.add_reader(self._proc.master, self._on_readable)
            self._reading = True

    def _stop_reading(self) -> None:
        if self._reading:
            self.loop.remove_reader(self._proc.master)
            self._reading = False

    def _yields(self, now: float, what: str, resume: Callable[[], None]) -> bool:
        """A flood's turn, while a send is in flight elsewhere: wait (True) until it settles, ``URGENT_S`` at
        most at a time and ``FLOOD_HOLD_S`` in all."""
        if LANE.urgent(id(self), now) or not LANE.busy(id(self), now):
            self._held_since = 0.0
            return False
        if not self._held_since:
            self._held_since = now
        elif now - self._held_since >= FLOOD_HOLD_S:
            self._held_since = 0.0
            return False
        LANE.hold(id(self), what, resume)
        timer = self._resumes.pop(what, None)
        if timer is not None:
            timer.cancel()
        self._resumes[what] = self.loop.call_later(URGENT_S, resume)
        return True

    def _on_readable(self, paced: bool = True, turn: bool = False) -> None:
        """Read what the PTY holds. ``paced``: a flood waits for its turn among floods (``READS``) and for sends
        elsewhere (``LANE``); ``turn``: this is its turn, which the pacer gave knowing the sends in flight."""
        began = time.monotonic()
        if paced and self._bulk and not turn and self._yields(began, "read", self._resume_reading):
            self._stop_reading()
            self._awaiting = True
            return
        if paced and self._bulk and READS.grant(began, id(self)) <= 0:
            # A flood among floods: wait for its turn rather than take this loop turn.
            self._await_turn()
            return
        got = 0
        kept = len(self._raw)
        reads: list[bytes] = []
        self._more = True  # unless a read finds the PTY empty
        ended = False  # ...or the PTY has no writer left
        for _ in range(READS_PER_WAKEUP):
            if got >= READ_BURST:
                break
            try:
                data = os.read(self._proc.master, 65536)
            except (BlockingIOError, InterruptedError):
                self._more = False
                break
            except OSError:  # EIO: no slave fd open anywhere; cannot happen while the daemon holds one
                ended = True
                break
            if not data:
                ended = True
                break
            reads.append(data)
            got += len(data)
        if ended:
            self._stop_reading()
        if not got:
            if paced and not ended:
                self._start_reading()  # a pacer's turn found nothing: back to waiting for output
            return
        # Filtered (and recorded) once a wake-up: a read brings ~4 KiB of a flood, the filter's cost is per call.
        data = reads[0] if len(reads) == 1 else b"".join(reads)
        self._raw += self._filter(data) if self._filter is not None else data
        front = self._front()
        if not self._fronts or self._fronts[-1][1] != front:
            self._fronts.append((self.received, front))
        self._bulk = got >= INTERACTIVE_BYTES
        self._flooded |= self._bulk
        if self._bulk and paced:
            READS.spend(time.monotonic() - began)
        self.received += got
        self.last_output = time.monotonic()
        if self._sends:  # a send's program printing in bulk is busy, not about to be ready: it waits like a flood
            LANE.touch(id(self), 0.0 if self._bulk else self.last_output)
        self.tail = (self.tail + self._raw[max(kept, len(self._raw) - TAIL_BYTES) :])[-TAIL_BYTES:]
        self._on_output()
        if not self._render_scheduled:
            if len(self._raw) < INTERACTIVE_BYTES and self.terminal.idle:
                self._render(paced=False)
            else:
                self._render_scheduled = True
                self._render_timer = self.loop.call_later(RENDER_DEFER_S, self._render)
        if ended:
            return
        if len(self._raw) + self.terminal.backlog > self._max_backlog or (self._bulk and self.floods_paused):
            self._stop_reading()
        elif paced and self._bulk and self._more and READS.competing(self.last_output):
            # A flood among floods reads in its turns: it waits for the next one in the pacer's queue, not in the
            # loop's poll, where its full PTY woke it at once only to be refused (50 floods: 5,700 such wake-ups
            # a second, each with two epoll_ctl, a quarter of the loop). Its turn finds the PTY empty: the poll.
            self._await_turn()
        elif paced:
            self._start_reading()  # after a pacer's turn: reading on (a drain leaves the reader as it was)

    def _await_turn(self) -> None:
        self._stop_reading()
        self._awaiting = True
        READS.wait(id(self), self._read_turn)

    def _read_turn(self) -> None:
        """The read pacer's turn for this flood: read now if its PTY has output, else wait in the poll for it (a
        read that finds none sleeps until the kernel's worker has moved more in, and the loop with it)."""
        self._awaiting = False
        if self._stopped():
            return
        if buffered(self._proc.master):
            self._on_readable(turn=True)
        else:
            self._start_reading()

    def _resume_reading(self) -> None:
        """A flood held for a send elsewhere: it reads in its turn among the floods."""
        if self._bulk:
            self._await_turn()
        else:
            self._awaiting = False
            self._start_reading()

    def _render(self, paced: bool = True) -> None:
        self._render_scheduled = self._render_held = self._render_paced = False
        if self._render_timer is not None:
            self._render_timer.cancel()
            self._render_timer = None
        if self.closed:
            return
        now = time.monotonic()
        # A caller blocked on this session renders first; a remote engine's work is not the daemon's time.
        paced = paced and not self._render_waiters and not self.terminal.remote
        if paced and self._yields(now, "render", self._rerender):
            self._render_scheduled = self._render_held = True
            return
        budget = RENDERS.grant(now, id(self)) if paced else RENDER_BUDGET_S
        if budget <= 0:
            self._render_scheduled = self._render_paced = True
            RENDERS.wait(id(self), self._render)
            return
        fed = self.received
        if self._raw:
            # Someone waiting for the rendering gets all of it: no partial line held back then.
            self.terminal.feed(bytes(self._raw), more=self._more and self._reading and not self._render_waiters)
            self._raw.clear()
        if self._render_waiters or not self._more:
            self.terminal.flush()
        more = self.terminal.process(budget)
        if paced:
            RENDERS.spend(time.monotonic() - now)
        if self.terminal.remote:
            self._marks.append((self.terminal.units_sent, fed))
            self._advance(self._acked_through())
        elif more:
            self._render_scheduled = True
            self.loop.call_soon(self._render)
        else:
            self._advance(fed)
        if not self._reading and self.terminal.backlog < self._max_backlog // 2:
            self._start_reading()

    def _rerender(self) -> None:
        if self._render_held:
            self._render_held = False
            self._render()

    # --- the send lane ---------------------------------------------------------------------------------

    def send_began(self) -> None:
        """A send is in flight on this session: it goes first (``LANE``) until ``send_ended``."""
        self._sends += 1
        LANE.enter(id(self))

    def send_ended(self) -> None:
        self._sends = max(0, self._sends - 1)
        if not self._sends:
            LANE.leave(id(self))

    def _acked_through(self) -> int:
        """Bytes read of which the remote engine acknowledged every one."""
        acked = self.terminal.units_acked
        marks = self._marks
        while len(marks) > 1 and marks[1][0] <= acked:
            marks.popleft()
        return marks[0][1] if marks and marks[0][0] <= acked else self._rendered

    def _advance(self, rendered: int) -> None:
        """Everything read up to ``rendered`` is rendered: wake those waiting for it."""
        self._rendered = max(self._rendered, rendered)
        while len(self._fronts) > 1 and self._fronts[1][0] <= self._rendered:
            self._fronts.popleft()
        acked = self.terminal.units_acked
        waiting = []
        for mark, units, fut in self._render_waiters:
            if mark > self._rendered or units > acked:
                waiting.append((mark, units, fut))
            elif not fut.done():
                fut.set_result(None)
        self._render_waiters = waiting
        if self.terminal.idle and not self._raw and not self._more and not self._settle_scheduled:
            self._settle_scheduled = True
            self.loop.call_later(SETTLE_S, self._settle, self.received)

    def _front(self) -> int:
        try:
            return os.tcgetpgrp(self._proc.master)
        except OSError:
            return -1

    def asker(self) -> int:
        """The foreground group when the oldest output not yet rendered was read (-1: unknown)."""
        return self._fronts[0][1] if self._fronts else self._front()

    def prompt_drawn(self, at: int) -> None:
        """The session's shell marked its prompt ``at`` bytes into the output its filter was fed: what it ran has
        ended, so a query written before that has no asker left, however late its bytes are read (``orphaned``)."""
        self._orphaned = max(self._orphaned, self._filtered_from + at)

    @property
    def orphaned(self) -> int:
        """Bytes read before the shell's last prompt mark: their queries' askers are gone."""
        return self._orphaned

    def front(self) -> int:
        return self._front()

    def _progressed(self) -> None:
        """The remote engine acknowledged output (its answers to queries are written already)."""
        if self.closed:
            return
        self._advance(self._acked_through())
        if not self._reading and self.terminal.backlog < self._max_backlog // 2:
            self._start_reading()

    def _settle(self, received: int) -> None:
        if self.closed:
            return
        if self.received != received or not self.terminal.idle or self._raw:  # not quiet yet: look again later
            self.loop.call_later(SETTLE_S, self._settle, self.received)
            return
        self._settle_scheduled = False
        self.terminal.settle()
        if self._flooded:
            self._flooded = False
            FLOOD_ENDS.ended()

    def continue_from(self, count: int) -> None:
        """Count output on from ``count`` bytes (what a previous daemon had read and rendered of this PTY): the
        counters a crash's live record and the state file hold stay comparable across daemons."""
        self._filtered_from += count - self.received
        self.received = self._rendered = count

    @property
    def rendered_bytes(self) -> int:
        """Bytes read and fully rendered (by a remote engine: acknowledged)."""
        return self._rendered

    def quiet_since(self) -> float:
        """Since when the program has been silent, as far as its readiness goes: now while output it wrote is still
        on its way (unread on the PTY master while the reader waits on the renderer's backlog or on pacing beside
        other floods, or read and not yet rendered). The daemon's slowness is not the program's silence: with 12
        floods at once, 9 sends settled inferred_idle mid-flood (test_no_early_idle_beside_floods)."""
        if self._raw or not self.terminal.idle or self.unread() > 0:
            return time.monotonic()
        return self.last_output

    def unread(self) -> int:
        """Output the program wrote that waits in the PTY, not yet read."""
        if self.closed or self.held:
            return 0
        return input_queued(self._proc.master)

    @property
    def bulk(self) -> bool:
        """The last wake-up read output in bulk: the program is writing fast."""
        return self._bulk

    def drain(self, *, paused_too: bool = False) -> None:
        """Read everything the PTY holds now (a prompt written just before the program blocked), however many
        reads that takes: the program is waiting, so what it wrote is all there. ``paused_too``: also while the
        reader is paused (pacing beside floods, or the renderer's backlog), up to the backlog's bound."""
        while self._reading or (paused_too and not self.closed and not self.held):
            before = self.received
            self._on_readable(paced=False)
            if not self._more or self.received == before:
                break
            if len(self._raw) + self.terminal.backlog > self._max_backlog:
                break

    async def rendered(self) -> None:
        """Wait until everything read so far is rendered (by a remote engine: acknowledged, its answers
        written)."""
        mark = self.received
        if self.closed or (self._rendered >= mark and not self._raw and self.terminal.idle):
            return  # closed: nothing more will render (a waiter added now would never be told)
        fut = self.loop.create_future()
        self._render_waiters.append((mark, self.terminal.units_sent, fut))
        if not self._render_scheduled or self._render_held or self._render_paced or self._render_timer is not None:
            # A caller blocked on it: no waiting for other sends or floods, nor for more output to batch (the last
            # bytes of a send, read while the worker still rendered the ones before, waited 2 ms for nothing).
            RENDERS.forget(id(self))
            self._render_scheduled, self._render_held, self._render_paced = True, False, False
            self.loop.call_soon(self._render)  # which cancels the batching timer
        await fut

    # --- input -----------------------------------------------------------------------------------------

    def write(self, data: bytes) -> None:
        if self.closed or not data:
            return
        if self._sends:
            LANE.touch(id(self), time.monotonic(), wrote=True)
        self._outbox += data
        self._flush()

    def discard_input(self) -> None:
        """Drop input not yet written and input the program has not read yet."""
        self._outbox.clear()
        with contextlib.suppress(termios.error):
            termios.tcflush(self._proc.slave, termios.TCIFLUSH)

    def _flush(self) -> None:
        if self.held:
            return
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

    @property
    def pending(self) -> int:
        """Input held here, not yet written to the PTY (the program does not read it)."""
        return len(self._outbox)

    def input_queued(self) -> int:
        """Input written but not yet read by the program: ours still to write plus the tty's input queue."""
        return len(self._outbox) + input_queued(self._proc.slave)

    # --- handover --------------------------------------------------------------------------------------

    def pause_floods(self) -> None:
        """A handover's pre-flight runs: stop reading while the program writes in bulk (it waits on its full PTY),
        so the floods and their rendering leave the CPU to the new interpreter. Quieter output is read as ever."""
        self.floods_paused = True
        if self._bulk:
            self._stop_reading()

    def hold(self) -> bytes:
        """Stop reading and writing, render what was read; returns the input not yet written to the PTY."""
        self.held = True
        self._stop_reading()
        if self._writing:
            self.loop.remove_writer(self._proc.master)
            self._writing = False
        if self._raw:
            self.terminal.feed(bytes(self._raw))
            self._raw.clear()
        return bytes(self._outbox)

    def release(self) -> None:
        """The handover failed: carry on."""
        self.held = self.floods_paused = False
        self._start_reading()
        self._flush()

    # --- end -------------------------------------------------------------------------------------------

    def close(self) -> None:
        self.closed = True
        self._sends = 0
        LANE.forget(id(self))
        READS.forget(id(self))
        RENDERS.forget(id(self))
        for timer in self._resumes.values():
            timer.cancel()
        self._stop_reading()
        if self._writing:
            self.loop.remove_writer(self._proc.master)
            self._writing = False
        for fd in (self._proc.master, self._proc.slave):
            with contextlib.suppress(OSError):
                os.close(fd)
        self.terminal.close()
        for _, _, fut in self._render_waiters:
            if not fut.done():
                fut.set_result(None)
        self._render_waiters.clear()
