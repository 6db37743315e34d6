"""The engines of the sessions one worker renders, and what it tells the daemon after each batch.

Used in the worker process (``main``) and, when no worker can start, inside the daemon (``pool.LocalLink``). A
session's engine keeps no transcript here: rows that leave its screen are passed on in the next ``Ack``
(``RelayScrollback``), and the screen is sent as the rows that changed since the last one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import final

from ptyd.terminal.emulator import Terminal
from ptyd.terminal.engines import native_available, open_terminal
from ptyd.terminal.scrollback import Scrollback
from ptyd.terminal.workers import messages as m

_UNBOUNDED = 1 << 62
RENDER_AT = 16 * 1024  # output queued in an engine rendered before the next message (Ghostty: ~0.1 ms)


@final
class RelayScrollback(Scrollback):
    """Scrollback that keeps nothing: what an engine appends is collected for the daemon's own scrollback."""

    def __init__(self) -> None:
        super().__init__(_UNBOUNDED, _UNBOUNDED)  # never skips: the daemon's bound is the one that binds
        # Blocks of rows (one per run between skips; a fast-forward's joined already), or rows skipped.
        self.out: list[list[str] | str | int] = []
        self.out_wraps: list[tuple[int, int]] = []  # (index among the rows in ``out``, width): see ``Ack``
        self._out_rows = 0
        self.muted = False

    def extend(self, lines: list[str], wraps: Sequence[tuple[int, int]] = ()) -> None:
        if lines:
            if not self.muted:
                out = self.out
                # One block for all an ack brings (an engine appends per slice it renders): the daemon's scrollback
                # then pays its per-block costs (accounting, eviction) once per ack.
                if out and isinstance(out[-1], list):
                    out[-1].extend(lines)
                else:
                    out.append(list(lines))
                base = self._out_rows
                self.out_wraps.extend((base + index, width) for index, width in wraps)
                self._out_rows += len(lines)
            self.total += len(lines)

    def extend_joined(self, text: str, wraps: Sequence[tuple[int, int]] = ()) -> None:
        """Rows joined by LF (a fast-forward's middle): passed on as they are, one block of ``Ack.scrolled``."""
        count = text.count("\n") + 1
        if not self.muted:
            self.out_wraps.extend((self._out_rows + index, width) for index, width in wraps)
            self.out.append(text)
            self._out_rows += count
        self.total += count

    def take(self) -> tuple[list[str | list[str] | int], list[tuple[int, int]]]:
        """What was appended since the last call, for an ``Ack`` (blocks joined: see ``Ack.scrolled``)."""
        out, wraps = self.out, self.out_wraps
        self.out, self.out_wraps, self._out_rows = [], [], 0
        return [block if isinstance(block, int | str) else m.joined_rows(block) for block in out], wraps

    def skip(self, count: int) -> None:
        if not self.muted:
            self.out.append(count)
        self.total += count
        self.first = self.total

    def lines(self, start: int, end: int) -> list[str]:
        return []

    def clear(self) -> None:
        self.first = self.total


@final
class Hosted:
    """One session's engine, and what the daemon was last told about its screen."""

    def __init__(self, msg: m.Open) -> None:
        self.end = msg.end
        self.replies: list[bytes] = []
        self.relay = RelayScrollback()
        self.error: str | None = None
        engine = msg.engine
        if engine == "ghostty" and not native_available():  # installed, but its library does not load here
            engine, self.error = "pyte", "the native engine does not load in the engine worker"
        self.engine: Terminal = open_terminal(
            msg.cols, msg.rows, scrollback_lines=1, scrollback_bytes=1, on_reply=self._reply, emulator=engine
        )
        self.engine.scrollback = self.relay
        self.rows: list[str] = []  # the active screen as last sent
        self.wrapped: set[int] = set()  # ...the rows of it that soft-wrapped
        self.size = (msg.cols, msg.rows)
        self.main: list[str] | None = None
        self.main_wraps: list[int] = []
        self.answered = False  # rendering output whose queries the daemon answered: no answer is sent

    def _reply(self, data: bytes) -> None:
        if not self.relay.muted and not self.answered:
            self.replies.append(data)


@final
class EngineHost:
    def __init__(self) -> None:
        self.sessions: dict[int, Hosted] = {}
        self._dirty: dict[int, None] = {}  # sessions to acknowledge after this batch, in order
        self.closed = 0  # sessions closed since the worker last gave their memory back (``memory``)

    def handle(self, msg: m.ToWorker) -> list[m.ToDaemon]:
        """Take one message; returns what is answered at once (snapshots). Acks wait for ``finish``."""
        if isinstance(msg, m.Open):
            self.sessions[msg.sid] = Hosted(msg)
            self._dirty[msg.sid] = None
            return []
        rec = self.sessions.get(msg.sid)
        if rec is None:
            return []
        if isinstance(msg, m.Close):
            del self.sessions[msg.sid]
            self._dirty.pop(msg.sid, None)
            rec.engine.close()
            self.closed += 1
            return []
        try:
            return self._apply(rec, msg)
        except Exception as exc:
            rec.error = f"{type(exc).__name__}: {exc}"[:200]
            self._dirty[msg.sid] = None
            return []

    def _apply(self, rec: Hosted, msg: m.ToWorker) -> list[m.ToDaemon]:
        engine = rec.engine
        if isinstance(msg, m.Feed):
            if msg.muted:
                # What came before is not muted. ``current_screen`` draws what an engine left to draw later (pyte's
                # last screenful after a fast-forward), whose rows scroll off then: inside the window they belong to.
                engine.process(float("inf"))
                engine.current_screen()
                rec.relay.muted = True
                try:
                    engine.feed(msg.data, more=msg.more)
                    if msg.flush:
                        engine.flush()
                    engine.process(float("inf"))
                    engine.current_screen()
                finally:
                    rec.relay.muted = False
            elif msg.answered:
                # Only its own queries are answered already: those of the output before it are this engine's.
                engine.process(float("inf"))
                rec.answered = True
                try:
                    engine.feed(msg.data, more=msg.more)
                    if msg.flush:
                        engine.flush()
                    engine.process(float("inf"))
                finally:
                    rec.answered = False
            else:
                if msg.data:
                    engine.feed(msg.data, more=msg.more)
                if msg.flush:
                    engine.flush()
                if engine.backlog >= RENDER_AT:
                    engine.process(float("inf"))  # now, so the time it takes shows between messages
            rec.end = msg.end
        elif isinstance(msg, m.Resize):
            rec.relay.muted = msg.muted
            try:
                engine.resize(msg.cols, msg.rows)
            finally:
                rec.relay.muted = False
            rec.end = msg.end
        elif isinstance(msg, m.Restore):
            engine.restore(msg.state)
            rec.end = msg.end
        elif isinstance(msg, m.Settle):
            engine.settle()
            return []
        elif isinstance(msg, m.Paint):
            engine.process(float("inf"))
            self._dirty[msg.sid] = None
            return [m.Painted(sid=msg.sid, end=rec.end, screen=engine.styled())]
        elif isinstance(msg, m.Snap):
            state = engine.snapshot(render=True, max_lines=0)
            self._dirty[msg.sid] = None  # rendering for it may have scrolled rows off
            return [m.Snapshot(sid=msg.sid, end=rec.end, state=state)]
        self._dirty[msg.sid] = None
        return []

    def finish(self) -> list[m.ToDaemon]:
        """Render everything taken, and acknowledge it: one ``Ack`` per session that had work."""
        out: list[m.ToDaemon] = []
        for sid in self._dirty:
            rec = self.sessions.get(sid)
            if rec is not None:
                out.append(self._ack(sid, rec))
        self._dirty.clear()
        return out

    def _ack(self, sid: int, rec: Hosted) -> m.Ack:
        engine = rec.engine
        try:
            engine.process(float("inf"))
            screen = engine.current_screen()
            rows = screen.visible_rows()
            wrapped = set(engine._active_wraps(rows))
            under = engine._main_under_alt()
            main_wraps = engine._screen_wraps(0, engine.rows) if under is not None else []
            cursor = screen.cursor
            state = (
                (int(cursor.x), int(cursor.y), bool(cursor.hidden)),
                int(screen.main_cursor_y),
                str(screen.title),
                engine.alt_screen,
                engine.app_cursor_keys,
            )
        except Exception as exc:
            rec.error = f"{type(exc).__name__}: {exc}"[:200]
            rows, wrapped, under, main_wraps = rec.rows, rec.wrapped, None, []
            state = ((0, 0, False), 0, "", False, False)
        sent, was = rec.rows, rec.wrapped
        # A new size: everything again (the daemon's mirror cut its rows and dropped their flags meanwhile).
        resized = rec.size != (engine.cols, engine.rows)
        rec.size = (engine.cols, engine.rows)
        if resized or len(sent) != len(rows):
            changed = [m.Row(y, text, y in wrapped) for y, text in enumerate(rows)]
        else:
            changed = [
                m.Row(y, text, y in wrapped)
                for y, (text, old) in enumerate(zip(rows, sent, strict=True))
                if text != old or (y in wrapped) != (y in was)
            ]
        rec.rows, rec.wrapped = rows, wrapped
        main = under[0] if under is not None else None
        main_changed = resized or main != rec.main or main_wraps != rec.main_wraps
        rec.main, rec.main_wraps = main, main_wraps
        scrolled, scrolled_wraps = rec.relay.take()
        replies, rec.replies = rec.replies, []
        error, rec.error = rec.error, None
        cursor_t, main_y, title, alt, keys = state
        return m.Ack(
            sid=sid,
            end=rec.end,
            scrolled=scrolled,
            rows=changed,
            main=main if main_changed else None,
            main_changed=main_changed,
            cols=engine.cols,
            lines=engine.rows,
            cursor=cursor_t,
            main_cursor_y=main_y,
            title=title,
            alt=alt,
            app_cursor_keys=keys,
            replies=replies,
            error=error,
            scrolled_wraps=scrolled_wraps,
            main_wraps=main_wraps if main_changed else [],
        )
