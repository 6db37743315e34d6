"""How sessions printing in bulk share the daemon's event loop: the turn budget, the bulk pacers of reads and
renders, and the send lane that keeps floods in their PTYs while a send elsewhere is in flight.

One instance of each serves every session of the daemon (module globals): floods compete with each other and with
every send, so their shares can only be kept in one place. ``ptyd.backends.os.channel`` asks them at each read and
render.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from typing import final

RENDER_BUDGET_S = 0.004  # renderer time per turn of one session
TURN_BUDGET_S = 0.002  # competing floods' work within one loop turn: a send's next step waits no longer
# A send in flight whose session wrote or printed this recently goes first: floods elsewhere wait in their PTYs
# (a long quiet command, a `sleep 600` sent with until_done, holds nobody back once this has passed)...
URGENT_S = 0.1
URGENT_AFTER_INPUT_S = 0.5  # ...for this long after its input went out (a chatty `npm install` then waits too)...
FLOOD_HOLD_S = 0.25  # ...and a flood held this long reads one burst anyway: back-to-back sends starve none
# Floods resume this long after the last send settled: an agent's next send follows its reply within a few ms,
# and floods read in between ran on into it (N=10, 1 printing: median 11.3 -> 7.2 ms, p99 115 -> 54 ms).
LANE_LINGER_S = 0.003


@final
class LoopTurn:
    """Bulk work done in the current turn of the event loop, shared by readers and renderers: a turn ends when a
    callback it scheduled with ``call_soon`` runs, in the next one."""

    def __init__(self) -> None:
        self.spent = 0.0
        self._marked = False

    def spend(self, seconds: float) -> None:
        self.spent += seconds
        if not self._marked:
            self._marked = True
            asyncio.get_running_loop().call_soon(self._end)

    def _end(self) -> None:
        self.spent, self._marked = 0.0, False


TURN = LoopTurn()


@final
class BulkPacer:
    """When several sessions read or render output in bulk at once, together they may take ``share`` of each
    ``window``: floods are throttled to it (the programs wait on a full PTY) and the rest of the loop's time
    stays for sends, RPCs and interactive sessions, whose small reads and renders never wait for the pacer.
    A single bulk session (one big build log) is not held back. Competing ones also take at most
    ``TURN_BUDGET_S`` of one loop turn, so the other callbacks of that turn (a send's next step) wait that long
    at most, not a whole share.

    Floods refused wait in a queue and are woken in the order they began to wait, so each gets its turn: when
    each re-armed a timer of its own for the next window, the same few won every window (50 floods among 500
    sessions: 34-41 did not advance in 2 s, and a cancelled one never read its prompt)."""

    def __init__(self, window_s: float = 0.02, share: float = 0.5) -> None:
        self.window_s = window_s
        self.budget_s = window_s * share
        self._window_start = 0.0
        self._spent = 0.0
        self._renderers: set[int] = set()  # sessions that rendered in bulk in this window
        self._previous: set[int] = set()  # ...and in the one before
        self._queue: dict[int, Callable[[], None]] = {}  # floods refused, oldest first -> how to give a turn
        self._waking: int | None = None  # the flood whose turn this is
        self._timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None  # the loop the queue and the timer belong to
        # Seconds the queue waits now, whatever the budget (the reads': sends in flight, ``SendLane.holding``)...
        self.gate: Callable[[float], float] | None = None
        self._gated_since = 0.0  # ...since when it has, ``FLOOD_HOLD_S`` at most in a row...
        self._round: set[int] = set()  # ...then each flood queued by then gets a turn before it waits again

    def grant(self, now: float, renderer: int) -> float:
        """Seconds of rendering ``renderer`` may do now (0: ``wait`` for a turn)."""
        self._roll(now)
        self._renderers.add(renderer)
        if not self._competing():
            return RENDER_BUDGET_S
        if self._queue and renderer != self._waking:  # others were refused first
            return 0.0
        window = self.budget_s - self._spent
        if TURN.spent >= TURN_BUDGET_S:
            return 0.0
        return max(0.0, min(RENDER_BUDGET_S, window, TURN_BUDGET_S - TURN.spent))

    def spend(self, seconds: float) -> None:
        self._spent += seconds
        TURN.spend(seconds)

    def wait(self, renderer: int, turn: Callable[[], None]) -> None:
        """``renderer`` was refused: ``turn`` is called when its turn comes, after those refused before it."""
        self._this_loop()
        self._queue.setdefault(renderer, turn)
        self._arm()

    def _this_loop(self) -> None:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # another event loop (in-process tests run several): the old one's turns are void
            self._loop, self._queue, self._timer, self._round = loop, {}, None, set()

    def forget(self, renderer: int) -> None:
        self._queue.pop(renderer, None)
        self._round.discard(renderer)

    @property
    def queued(self) -> bool:
        return bool(self._queue)

    def competing(self, now: float) -> bool:
        """Several floods read (or render) in bulk: each takes its turns."""
        self._roll(now)
        return self._competing()

    def _competing(self) -> bool:
        # Floods waiting for their turn compete too: on a loaded machine a window may pass within one flood's turn,
        # and the flood that asks again at once would seem alone, granted everything while the queue waits.
        return len(self._renderers | self._previous | self._queue.keys()) >= 2

    def _roll(self, now: float) -> None:
        if now - self._window_start >= self.window_s:
            self._window_start, self._spent = now, 0.0
            self._previous, self._renderers = self._renderers, set()

    def _arm(self) -> None:
        if self._timer is not None or not self._queue:
            return
        now = time.monotonic()
        self._roll(now)
        # The window has room but this turn is full: the next turn; else the next window.
        delay = 0.0 if self._spent < self.budget_s else self._window_start + self.window_s - now
        assert self._loop is not None  # armed by ``wait``
        self._timer = self._loop.call_later(max(0.0, delay), self._wake)

    def kick(self) -> None:
        """The gate may have opened: look again now."""
        self._this_loop()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._arm()

    def _held(self, now: float) -> float:
        if self._round or self.gate is None or (wait := self.gate(now)) <= 0:
            self._gated_since = 0.0
            return 0.0
        if not self._gated_since:
            self._gated_since = now
        elif now - self._gated_since >= FLOOD_HOLD_S:
            # A turn for each flood waiting, budgets allowing, before the next wait: back-to-back sends starve none.
            self._gated_since = 0.0
            self._round = set(self._queue)
            return 0.0
        return min(wait, self._gated_since + FLOOD_HOLD_S - now)

    def _wake(self) -> None:
        self._timer = None
        if self._queue and (held := self._held(time.monotonic())) > 0:
            # Sends in flight: the floods queued stay in their PTYs, without a turn each only to be held.
            assert self._loop is not None  # armed by ``wait``
            self._timer = self._loop.call_later(held, self._wake)
            return
        while self._queue:
            self._roll(time.monotonic())
            if self._spent >= self.budget_s or TURN.spent >= TURN_BUDGET_S:
                break
            renderer = next(iter(self._queue))
            turn = self._queue.pop(renderer)
            self._round.discard(renderer)
            self._waking = renderer
            try:
                turn()
            finally:
                self._waking = None
        self._arm()


RENDERS = BulkPacer(share=0.4)
READS = BulkPacer(share=0.3)


@final
class FloodEnds:
    """Floods that ended since the daemon last returned free memory to the system: what a flood allocated on
    its way through (decoded acks, the rows its scrollback let go) stays in glibc's free lists until then
    (a session whose scrollback filled with 4-byte text held 11 MiB of RSS, 6.7 after a trim)."""

    def __init__(self) -> None:
        self.count = 0
        self.last = 0.0  # time.monotonic() of the last end

    def ended(self) -> None:
        self.count += 1
        self.last = time.monotonic()


FLOOD_ENDS = FloodEnds()


@final
class SendLane:
    """Sessions with a send in flight are read, rendered and acknowledged first. Beside one flood a send waited
    (N=10, 1 printing, 2 cores) for the flood's reads on the loop, and the flood's program, renderer and acks on
    the CPU: bash took 4-10 ms to be read echoing `true`. While a send's session is active, floods elsewhere
    stay in their PTYs' buffers (their programs block: the cores go to the send's program and its renderer)
    and their readers resume once the send settles, or its session went quiet for ``URGENT_S``, or its input
    went out ``URGENT_AFTER_INPUT_S`` ago (a command that runs longer is not slowed by a flood's few ms)."""

    def __init__(self) -> None:
        self._wrote: dict[int, float] = {}  # id(channel) with a send in flight -> when its input last went out...
        # ...and when it last wrote or printed, unless it last printed in bulk (50 floods with sends in flight made
        # every look for an urgent one walk them all)
        self._active: dict[int, float] = {}
        # Floods waiting, (id(channel), "read" or "render") -> how to resume it: a channel's reader and renderer
        # are held apart (one resume for both lost the other's: its reader or renderer stopped for good).
        self._held: dict[tuple[int, str], Callable[[], None]] = {}

    def enter(self, key: int) -> None:
        self._active[key] = self._wrote[key] = time.monotonic()

    def touch(self, key: int, now: float, *, wrote: bool = False) -> None:
        """``key`` wrote input or printed at ``now`` (0: printed in bulk, which is not urgent)."""
        if key in self._wrote:
            if now:
                self._active[key] = now
            else:
                self._active.pop(key, None)
            if wrote:
                self._wrote[key] = now

    def leave(self, key: int) -> None:
        self._active.pop(key, None)
        self._wrote.pop(key, None)
        now = time.monotonic()
        # Floods have sends in flight too (`seq inf` sent without waiting): no urgent one left is what counts.
        if (self._held or READS.queued) and not self.holding(now):
            held, self._held = self._held, {}
            loop = asyncio.get_running_loop()
            for resume in held.values():  # each looks again then: held anew if another send began meanwhile
                loop.call_later(LANE_LINGER_S, resume)
            if READS.queued:
                loop.call_later(LANE_LINGER_S, READS.kick)

    def urgent(self, key: int, now: float) -> bool:
        """``key`` has a send in flight, wrote input or printed (not in bulk) within ``URGENT_S``, and wrote
        input within ``URGENT_AFTER_INPUT_S``."""
        return self._lapses(key) > now

    def _lapses(self, key: int) -> float:
        """When ``key`` stops being urgent (past: it is not)."""
        return min(self._active.get(key, -math.inf) + URGENT_S, self._wrote.get(key, -math.inf) + URGENT_AFTER_INPUT_S)

    def holding(self, now: float) -> float:
        """Seconds floods wait for the sends in flight: until the last urgent one lapses (0: none is urgent)."""
        return max(0.0, max((self._lapses(key) for key in self._active), default=now) - now)

    def busy(self, key: int, now: float) -> bool:
        """Another session is ``urgent``."""
        return any(k != key and self.urgent(k, now) for k in self._active)

    def hold(self, key: int, what: str, resume: Callable[[], None]) -> None:
        self._held[key, what] = resume

    def forget(self, key: int) -> None:
        for held in [held for held in self._held if held[0] == key]:
            del self._held[held]
        self.leave(key)


LANE = SendLane()
READS.gate = LANE.holding
