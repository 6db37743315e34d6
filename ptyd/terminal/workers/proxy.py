"""A session's terminal whose engine runs in a worker process: the transcript and a mirror of the screen here.

Output goes to the worker as ``Feed`` messages; each ``Ack`` brings the rows that scrolled off (into this side's
``Scrollback`` and head capture, as an in-process engine would hand them), the screen rows that changed, the
cursor, title and modes, and the answers to queries (written to the program before anyone waiting on the
rendering is told). So every read the daemon does stays synchronous and exact as of the last acknowledged byte.

For a worker's death, every message since the last snapshot the worker sent is journaled (bounded: a snapshot is
asked for when the journal passes ``JOURNAL_SNAPSHOT_BYTES``, or a second after output last changed it). A new
worker gets the snapshot, then the journal: acknowledged messages muted (their rows and answers were delivered),
the rest as new. ``pool`` decides on which worker, in what order, and on which engine. Until a session's worker
is up, the daemon answers its queries (``early``).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import Protocol, final

import msgspec

from ptyd.terminal.emulator import Terminal
from ptyd.terminal.replay import TerminalState, restore_scrollback, scrollback_state
from ptyd.terminal.styled import StyledScreen
from ptyd.terminal.workers import messages as m
from ptyd.terminal.workers.early import EarlyAnswers


class Link(Protocol):
    """One worker (or the in-daemon fallback) as a terminal sees it."""

    sessions: dict[int, RemoteTerminal]

    @property
    def ready(self) -> bool:
        """It renders now (a worker said hello): the daemon answers no query of its sessions."""
        ...

    def send(self, msg: m.ToWorker) -> None: ...
    def may_send(self, term: RemoteTerminal) -> bool: ...


class Placement(Protocol):
    """What a terminal asks of the pool that placed it (``pool.EnginePool``)."""

    loop: asyncio.AbstractEventLoop
    early_answers: bool  # the daemon answers a session's queries until its worker is up (``early``)

    def new_sid(self) -> int: ...
    def attach(self, term: RemoteTerminal) -> Link: ...
    def detach(self, term: RemoteTerminal) -> None: ...
    def engine_failed(self, term: RemoteTerminal, error: str) -> None: ...
    def progressed(self, term: RemoteTerminal) -> None: ...


JOURNAL_SNAPSHOT_BYTES = 256 * 1024  # journal past this: ask for a snapshot (~0.5 ms of the worker's time)
SNAPSHOT_INTERVAL_S = 1.0  # ...or this long after output first went into it
Journaled = m.Feed | m.Resize
# Output sent in pieces of at most this: the worker acknowledges after each piece once 50 ms went by, and pyte
# renders 32 KiB in ~50 ms (Ghostty 256 KiB in ~1 ms), so a paused reader never waits long enough to look idle.
FEED_BYTES = 256 * 1024
PYTE_FEED_BYTES = 32 * 1024


@final
class MirrorCursor:
    __slots__ = ("hidden", "x", "y")

    def __init__(self) -> None:
        self.x = 0
        self.y = 0
        self.hidden = False


@final
class MirrorScreen:
    """The active screen as the worker last acknowledged it."""

    def __init__(self, cols: int, rows: int) -> None:
        self.lines = rows
        self.cols = cols
        self.cursor = MirrorCursor()
        self.title = ""
        self.main_cursor_y = 0
        self.rows = [""] * rows
        self.wrapped: set[int] = set()  # rows that soft-wrapped onto the next
        self.main: list[str] | None = None  # the main screen's rows while the alternate screen is active
        self.main_wraps: list[int] = []  # ...and which of them soft-wrapped
        self.alt = False
        self.app_cursor_keys = False

    def visible_rows(self) -> list[str]:
        return list(self.rows)

    def main_rows(self, start: int = 0, end: int | None = None) -> list[str]:
        rows = self.main if self.alt and self.main is not None else self.rows
        return rows[max(start, 0) : self.lines if end is None else min(end, self.lines)]

    def wraps(self, start: int, end: int) -> list[int]:
        """Rows ``[start, end)`` of the main screen (the saved one under the alternate) that soft-wrapped."""
        rows = self.main_wraps if self.alt and self.main is not None else self.wrapped
        return sorted(y for y in rows if start <= y < end)

    def resize(self, cols: int, rows: int) -> None:
        """Until the worker's answer: the same rows, cut or padded to the new size (a wrapped row no longer
        fills a row of another width; the worker's answer after the resize sends every row again)."""
        if cols != self.cols:
            self.wrapped, self.main_wraps = set(), []
        self.wrapped = {y for y in self.wrapped if y < rows}
        self.main_wraps = [y for y in self.main_wraps if y < rows]
        self.cols, self.lines = cols, rows
        self.rows = ([row[:cols] for row in self.rows] + [""] * rows)[:rows]
        if self.main is not None:
            self.main = ([row[:cols] for row in self.main] + [""] * rows)[:rows]
        self.cursor.x, self.cursor.y = min(self.cursor.x, cols), min(self.cursor.y, rows - 1)
        self.main_cursor_y = min(self.main_cursor_y, rows - 1)

    def apply(self, ack: m.Ack) -> None:
        if ack.lines != self.lines:
            self.rows = ([*self.rows] + [""] * ack.lines)[: ack.lines]
            self.wrapped = {y for y in self.wrapped if y < ack.lines}
        self.cols, self.lines = ack.cols, ack.lines
        rows, wrapped = self.rows, self.wrapped
        for row in ack.rows:
            if row.y < len(rows):
                rows[row.y] = row.text
                if row.wrapped:
                    wrapped.add(row.y)
                else:
                    wrapped.discard(row.y)
        if ack.main_changed:
            self.main = ack.main
            self.main_wraps = ack.main_wraps
        self.cursor.x, self.cursor.y, self.cursor.hidden = ack.cursor
        self.main_cursor_y = ack.main_cursor_y
        self.title = ack.title
        self.alt = ack.alt
        self.app_cursor_keys = ack.app_cursor_keys

    def take(self, state: TerminalState) -> None:
        """What a handed-over state says the screen shows, until the worker's first answer."""
        self.resize(state.cols, state.rows)
        if state.visible is None or state.cursor is None:
            return
        self.rows = (list(state.visible) + [""] * self.lines)[: self.lines]
        self.cursor.x, self.cursor.y, self.cursor.hidden = state.cursor
        self.alt = state.alt
        self.app_cursor_keys = state.app_cursor_keys
        self.title = state.title
        self.main = list(state.main_rows) if state.main_rows is not None else None
        self.main_wraps = list(state.main_wraps or ())
        self.wrapped = set()  # the worker's first answer brings them (its engine redraws them from ``screen``)
        self.main_cursor_y = state.main_cursor[1] if state.alt and state.main_cursor is not None else state.cursor[1]

    def redraw(self) -> bytes:
        """VT sequences that draw this mirror (text only: no colours), for a state saved between snapshots."""
        out = ["\x1b[?1049h" if self.alt else "", "\x1b[0m\x1b[H\x1b[2J"]
        wrapped = False
        for y, row in enumerate(self.rows):
            if not wrapped and row:
                out.append(f"\x1b[{y + 1};1H")
            # A wrapped row written to its last column wraps again onto the next (wide characters aside).
            wrapped = y in self.wrapped and y + 1 < self.lines and row.isascii()
            out.append(row.ljust(self.cols) if wrapped else row)
        if self.app_cursor_keys:
            out.append("\x1b[?1h")
        out.append(f"\x1b[{self.cursor.y + 1};{min(self.cursor.x, self.cols - 1) + 1}H")
        if self.cursor.hidden:
            out.append("\x1b[?25l")
        return "".join(out).encode()


@final
class RemoteTerminal(Terminal):
    remote = True

    def __init__(
        self,
        cols: int,
        rows: int,
        *,
        scrollback_lines: int,
        scrollback_bytes: int,
        on_reply: Callable[[bytes], None],
        pool: Placement,
        engine: str,
        label: str,
    ) -> None:
        super().__init__(
            cols, rows, scrollback_lines=scrollback_lines, scrollback_bytes=scrollback_bytes, on_reply=on_reply
        )
        self.engine = engine
        self.label = label  # the session's id, for the log
        self.sid = pool.new_sid()
        self._pool = pool
        self._screen = MirrorScreen(cols, rows)
        self._sent = 0  # units of work sent (output bytes, one per other change)
        self._acked = 0
        # After a rebuild, the end the mirror already shows: the new worker's acks before it (its snapshot restored,
        # the journal replayed) would show an older screen, while every byte still reads as rendered.
        self._shown_end = 0
        self._given = 0  # ...of which handed to the worker (the rest held in ``outbox``)
        self._holding = False  # the last feed said more is coming: the worker may hold a partial line
        self._opened = (cols, rows)
        self._snap: m.Snapshot | None = None
        self._restored = False  # the snapshot is the state this session was restored from
        self._journal: deque[Journaled] = deque()
        self._journal_bytes = 0
        self._snap_asked = False
        self._snap_waiters: list[asyncio.Future[None]] = []
        self._snap_timer = False  # a snapshot is due within SNAPSHOT_INTERVAL_S
        self._paint_waiters: list[asyncio.Future[StyledScreen]] = []  # screenshots waiting for the worker's cells
        self.closed = False
        self.wanted = engine  # the engine it renders on whenever a worker can (pyte once quarantined)
        self.outbox: list[m.ToWorker] = []  # messages held while another session's output is on probation
        self.link: Link = pool.attach(self)
        self.link.send(m.Open(sid=self.sid, engine=engine, cols=cols, rows=rows, end=0))
        self._early = EarlyAnswers(cols, rows, on_reply, engine) if pool.early_answers and not self.link.ready else None

    # --- output ----------------------------------------------------------------------------------------

    def _push(self, msg: m.ToWorker) -> None:
        if isinstance(msg, m.Feed | m.Resize):
            self._journal.append(msg)
            if isinstance(msg, m.Feed):
                self._journal_bytes += len(msg.data)
        if self.outbox or not self.link.may_send(self):
            self.outbox.append(msg)
        else:
            self._give(msg)
        self.backlog = self._sent - self._acked

    def _give(self, msg: m.ToWorker) -> None:
        self.link.send(msg)
        if isinstance(msg, m.Feed | m.Resize | m.Restore):
            self._given = max(self._given, msg.end)

    def release(self) -> None:
        """Send what was held for a probe."""
        held, self.outbox = self.outbox, []
        for msg in held:
            self._give(msg)

    def feed(self, data: bytes, *, more: bool = False) -> None:
        if not data:
            return
        self._holding = more
        answered = self._early is not None and self._answered_early(data, more)
        piece = PYTE_FEED_BYTES if self.engine == "pyte" else FEED_BYTES
        for start in range(0, len(data), piece):
            chunk = data[start : start + piece]
            self._sent += len(chunk)
            last = start + piece >= len(data)
            self._push(m.Feed(sid=self.sid, end=self._sent, data=chunk, more=more if last else True, answered=answered))

    def _answered_early(self, data: bytes, more: bool) -> bool:
        """The daemon answered ``data``'s queries itself: its worker is not up yet."""
        assert self._early is not None
        if not self.link.ready and self._early.answer(data, more=more):
            return True
        self.worker_up()
        return False

    def worker_up(self) -> None:
        """Its worker answers from now on: the daemon's early answers (a pyte terminal) are dropped."""
        if self._early is not None:
            self._early.close()
            self._early = None

    def flush(self) -> None:
        if self._holding:
            self._holding = False
            self._sent += 1
            self._push(m.Feed(sid=self.sid, end=self._sent, data=b"", more=False, flush=True))

    def process(self, budget_s: float) -> bool:
        return not self.idle

    @property
    def idle(self) -> bool:
        return self._acked >= self._sent

    @property
    def units_sent(self) -> int:
        return self._sent

    @property
    def units_acked(self) -> int:
        return self._acked

    def settle(self) -> None:
        self._push(m.Settle(sid=self.sid))

    def resize(self, cols: int, rows: int) -> None:
        self._sent += 1
        self._push(m.Resize(sid=self.sid, end=self._sent, cols=cols, rows=rows))
        if self._early is not None:
            self._early.resize(cols, rows)
        self._screen.resize(cols, rows)
        self._generation += 1
        self._used_cache = None

    # --- acknowledgements ------------------------------------------------------------------------------

    def acked(self, ack: m.Ack) -> None:
        """The worker rendered up to ``ack.end``: take its rows and screen, write its answers, tell the channel."""
        if self.closed:
            return
        wraps, w, offset = ack.scrolled_wraps, 0, 0
        for block in ack.scrolled:
            if isinstance(block, int):
                self.scrollback.skip(block)
                continue
            # A joined block stays joined unless a send's head capture still takes rows (see ``extend_joined``).
            joined = block if isinstance(block, str) and (self.capture is None or self.capture.room <= 0) else None
            rows = m.scrolled_rows(block) if joined is None else []
            end = offset + (len(rows) if joined is None else joined.count("\n") + 1)
            mine: list[tuple[int, int]] = []
            while w < len(wraps) and wraps[w][0] < end:
                mine.append((wraps[w][0] - offset, wraps[w][1]))
                w += 1
            if joined is None:
                self._scrolled_off(rows, mine)
            else:
                self.scrollback.extend_joined(joined, mine)
            offset = end
        if ack.end >= self._shown_end:
            self._screen.apply(ack)  # rows, cursor and modes are whole in each ack: skipping older ones loses none
        self._generation += 1
        self._used_cache = None
        self._acked = max(self._acked, ack.end)
        self.backlog = self._sent - self._acked
        for reply in ack.replies:
            self._on_reply(reply)
        if ack.error is not None:
            self._pool.engine_failed(self, ack.error)
        self._maybe_snapshot()
        self._pool.progressed(self)
        if self.on_progress is not None:
            self.on_progress()

    def _maybe_snapshot(self) -> None:
        if self._snap_asked or not self._journal:
            return
        if self._journal_bytes >= JOURNAL_SNAPSHOT_BYTES or self._snap_waiters:
            self._ask_snapshot()
        elif not self._snap_timer:
            self._snap_timer = True
            self._pool.loop.call_later(SNAPSHOT_INTERVAL_S, self._snapshot_due)

    def _snapshot_due(self) -> None:
        self._snap_timer = False
        if not self.closed and not self._snap_asked and self._journal:
            self._ask_snapshot()

    def _ask_snapshot(self) -> None:
        self._snap_asked = True
        self._push(m.Snap(sid=self.sid))

    def snapshotted(self, snap: m.Snapshot) -> None:
        """The worker's state at ``snap.end``: the journal before it is no longer needed."""
        self._snap_asked = False
        if self.closed:
            return
        self._snap = snap
        self._generation += 1  # the state the daemon saves is now the engine's own (modes, title), not the mirror's
        self._restored = False
        journal = self._journal
        while journal and journal[0].end <= snap.end:
            entry = journal.popleft()
            if isinstance(entry, m.Feed):
                self._journal_bytes -= len(entry.data)
        if snap.end >= self._sent:
            for fut in self._snap_waiters:
                if not fut.done():
                    fut.set_result(None)
            self._snap_waiters.clear()
        elif self._snap_waiters:
            self._ask_snapshot()

    # --- screenshots ------------------------------------------------------------------------------------

    async def styled_screen(self) -> StyledScreen:
        """The worker's engine reads its cells after rendering everything sent before: one round trip."""
        if self.closed:
            return self.styled()
        fut: asyncio.Future[StyledScreen] = self._pool.loop.create_future()
        first = not self._paint_waiters
        self._paint_waiters.append(fut)
        if first:
            self._push(m.Paint(sid=self.sid))
        return await fut

    def painted(self, msg: m.Painted) -> None:
        waiters, self._paint_waiters = self._paint_waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(msg.screen)

    def _paint_failed(self) -> None:
        """The session closed: what the mirror has (its text) answers the screenshots still waiting."""
        waiters, self._paint_waiters = self._paint_waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(self.styled())

    # --- a new worker ------------------------------------------------------------------------------------

    @property
    def in_flight(self) -> bool:
        """Work handed to the worker is not acknowledged yet."""
        return self._acked < self._given

    def reopen(self, link: Link, engine: str, *, held: bool) -> None:
        """Rebuild this session's engine on ``link`` (``engine`` may be the fallback): the snapshot, the
        acknowledged journal muted, the rest as new. ``held``: keep it all back until this session's probe."""
        self.link = link
        self.engine = engine
        self._snap_asked = False
        self.outbox = []
        self._given = self._acked
        self._shown_end = self._acked
        snap = self._snap
        cols, rows = (snap.state.cols, snap.state.rows) if snap is not None else self._opened
        msgs: list[m.ToWorker] = [m.Open(sid=self.sid, engine=engine, cols=cols, rows=rows, end=0)]
        if snap is not None:
            msgs.append(m.Restore(sid=self.sid, end=snap.end, state=snap.state))
        for entry in self._journal:
            msgs.append(msgspec.structs.replace(entry, muted=True) if entry.end <= self._acked else entry)
        if held:
            self.outbox = msgs
        else:
            for msg in msgs:
                self._give(msg)
        if self._snap_waiters:
            self._ask_snapshot()
        if self._paint_waiters:  # the dead worker's answer will not come: the new one is asked
            self._push(m.Paint(sid=self.sid))

    # --- handover ----------------------------------------------------------------------------------------

    def _exact(self) -> bool:
        """The last snapshot is the screen as of everything sent, and every row before it is here. A state
        this session was restored from is, before its worker even acknowledged it."""
        snap = self._snap
        return snap is not None and snap.end >= self._sent and (self.idle or self._restored)

    async def synced(self) -> None:
        """Wait until everything sent is rendered and a snapshot of it is here (a handover, reader held)."""
        if self._exact():
            return
        fut = self._pool.loop.create_future()
        self._snap_waiters.append(fut)
        if not self._snap_asked:
            self._ask_snapshot()
        await fut

    def snapshot(self, *, render: bool = True, max_lines: int | None = None) -> TerminalState:
        snap = self._snap
        screen = self._screen
        first, lines = scrollback_state(self.scrollback, max_lines)
        if snap is not None and self._exact():
            return msgspec.structs.replace(snap.state, first=first, lines=lines)
        return TerminalState(
            cols=screen.cols,
            rows=screen.lines,
            first=first,
            lines=lines,
            screen=screen.redraw(),
            main_rows=list(screen.main) if screen.alt and screen.main is not None else None,
            main_cursor=(0, screen.main_cursor_y) if screen.alt else None,
            main_wraps=list(screen.main_wraps) if screen.alt and screen.main is not None else None,
            title=screen.title,
            visible=list(screen.rows),
            cursor=(screen.cursor.x, screen.cursor.y, screen.cursor.hidden),
            alt=screen.alt,
            app_cursor_keys=screen.app_cursor_keys,
        )

    def restore(self, state: TerminalState) -> None:
        """Take over ``state`` (a handover or an adoption): it is this session's first snapshot."""
        restore_scrollback(self.scrollback, state.first, state.lines)
        self.worker_up()  # not yet, but the early answers' screen is not this state's: the worker answers
        self._sent += 1
        bare = msgspec.structs.replace(state, lines=[], first=0)
        self._snap = m.Snapshot(sid=self.sid, end=self._sent, state=bare)
        self._restored = True
        self._journal.clear()
        self._journal_bytes = 0
        self._push(m.Restore(sid=self.sid, end=self._sent, state=bare))
        self._screen.take(state)
        self._generation += 1
        self._used_cache = None

    # --- the screen ------------------------------------------------------------------------------------

    def _screen_wraps(self, start: int, end: int) -> list[int]:
        return self._screen.wraps(start, end)

    def current_screen(self) -> MirrorScreen:
        return self._screen

    @property
    def cols(self) -> int:
        return self._screen.cols

    @property
    def rows(self) -> int:
        return self._screen.lines

    @property
    def alt_screen(self) -> bool:
        return self._screen.alt

    @property
    def app_cursor_keys(self) -> bool:
        return self._screen.app_cursor_keys

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.worker_up()
            self.link.send(m.Close(sid=self.sid))
            self._pool.detach(self)
            for fut in self._snap_waiters:
                if not fut.done():
                    fut.set_result(None)
            self._paint_failed()
