"""The half of a session's terminal every engine shares: the numbered transcript, bounded scrollback, the head
capture of a send, and the handover snapshot built from an engine's screen dump.

The engines (``engines.ghostty``, ``engines.pyte``, and the daemon-side proxy of an engine worker,
``workers.proxy``) subclass ``Terminal`` for this; what the daemon reads off any of them is the
``engine.TerminalEngine`` protocol, and ``engines.open_terminal`` picks one.

Transcript line numbers are absolute from the session start: scrollback lines, then the rows of the main
screen. Row ``y`` of the screen is line ``scrollback.total + y``. An engine hands rows that leave the top of the
main screen (scrolling, ``clear``, a shrinking resize) to ``_scrolled_off``, and nothing from the alternate
screen or a scroll region.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ptyd.terminal.capture import HeadCapture
from ptyd.terminal.engine import ScreenView
from ptyd.terminal.replay import (
    TerminalState,
    main_screen_prefix,
    restore_scrollback,
    scrollback_state,
    title_suffix,
)
from ptyd.terminal.scrollback import Scrollback
from ptyd.terminal.styled import StyledScreen, plain


class Terminal:
    """Queue output with ``feed``, render it with ``process`` under a time budget, read the screen and the
    transcript. ``backlog`` is what is queued and not yet rendered (bytes or characters)."""

    engine = ""
    engine_note: str | None = None  # why the session runs on this engine, when it is not the one configured
    remote = False  # rendered in an engine worker: ``process`` only sends, acks come later (``on_progress``)

    def __init__(
        self,
        cols: int,
        rows: int,
        *,
        scrollback_lines: int,
        scrollback_bytes: int,
        on_reply: Callable[[bytes], None],
        emulator: str = "auto",
    ) -> None:
        self.scrollback = Scrollback(scrollback_lines, scrollback_bytes)
        self._on_reply = on_reply
        self.backlog = 0
        self.capture: HeadCapture | None = None
        self._generation = 0  # counts changes to the screen, for the used-rows cache
        self._used_cache: tuple[int, int] | None = None
        self.on_progress: Callable[[], None] | None = None  # told when a remote engine acknowledges output

    @property
    def units_sent(self) -> int:
        """A remote engine's count of output (and other work) sent to it; 0 in process."""
        return 0

    @property
    def units_acked(self) -> int:
        """...and of what it has acknowledged rendering."""
        return 0

    def close(self) -> None:
        """The session ended: free what the engine holds."""

    async def synced(self) -> None:
        """Everything fed is rendered and ``snapshot(render=True)`` will be exact (a worker's engine may need
        a round trip for it; an engine in this process is always ready)."""

    @property
    def generation(self) -> int:
        """Changes whenever output was rendered or the screen changed otherwise: nothing to look at again before."""
        return self._generation

    # --- what each engine provides -------------------------------------------------------------------------

    def feed(self, data: bytes, *, more: bool = False) -> None:
        """Queue raw output; ``process`` renders it. ``more``: the caller knows more output is waiting to be
        read, so a partial last line may be held for it (``flush`` releases it)."""
        raise NotImplementedError

    def flush(self) -> None:
        """Queue what ``feed`` held back: no more output came for it."""
        raise NotImplementedError

    def process(self, budget_s: float) -> bool:
        """Render queued output for about ``budget_s`` seconds; True if some is left."""
        raise NotImplementedError

    @property
    def idle(self) -> bool:
        raise NotImplementedError

    def settle(self) -> None:
        """Output has stopped for a while: free what only a flood needed."""

    def resize(self, cols: int, rows: int) -> None:
        raise NotImplementedError

    def current_screen(self) -> ScreenView:
        """The screen with every rendered line drawn on it; call before looking at it."""
        raise NotImplementedError

    @property
    def cols(self) -> int:
        raise NotImplementedError

    @property
    def rows(self) -> int:
        raise NotImplementedError

    @property
    def alt_screen(self) -> bool:
        raise NotImplementedError

    @property
    def app_cursor_keys(self) -> bool:
        """The program turned on application cursor keys (DECCKM): arrows, Home and End are sent as SS3."""
        raise NotImplementedError

    def styled(self) -> StyledScreen:
        """The active screen as styled cells (colours, attributes, cursor), as rendered now: each engine reads
        its own cells; this text-only fallback is what a screen of rows knows."""
        screen = self.current_screen()
        cursor = (int(screen.cursor.x), int(screen.cursor.y), bool(screen.cursor.hidden))
        return plain(self.cols, screen.visible_rows(), cursor, self.engine)

    async def styled_screen(self) -> StyledScreen:
        """``styled``, asked of wherever the engine renders (a worker's is a round trip)."""
        return self.styled()

    def _dump_screen(self) -> bytes:
        """VT sequences that draw the active screen, its modes and cursor (see ``replay``)."""
        raise NotImplementedError

    def _main_under_alt(self) -> tuple[list[str], tuple[int, int]] | None:
        """The main screen's rows and cursor while the alternate screen is active, else None."""
        raise NotImplementedError

    def _replay(self, data: bytes, state: TerminalState) -> None:
        """Draw ``data`` on this fresh terminal: nothing reaches the transcript, no query is answered."""
        raise NotImplementedError

    # --- handover --------------------------------------------------------------------------------------------

    def snapshot(self, *, render: bool = True, max_lines: int | None = None) -> TerminalState:
        """The transcript and the screen, for the next daemon. ``render``: render everything queued first (a
        handover, with the reader paused); otherwise what is rendered now (a periodic save). ``max_lines``: keep
        only the last lines of scrollback."""
        if render:
            self.flush()
            self.process(float("inf"))
        screen = self.current_screen()
        data = self._dump_screen()
        first, lines = scrollback_state(self.scrollback, max_lines)
        main = self._main_under_alt()
        return TerminalState(
            cols=self.cols,
            rows=self.rows,
            first=first,
            lines=lines,
            screen=data,
            main_rows=main[0] if main is not None else None,
            main_cursor=main[1] if main is not None else None,
            main_wraps=self._screen_wraps(0, self.rows) if main is not None else None,
            title=str(screen.title),
            visible=screen.visible_rows(),
            cursor=(int(screen.cursor.x), int(screen.cursor.y), bool(screen.cursor.hidden)),
            alt=self.alt_screen,
            app_cursor_keys=self.app_cursor_keys,
        )

    def restore(self, state: TerminalState) -> None:
        """Take over ``state`` on this new terminal of the same size, before any output is fed to it."""
        self._replay(main_screen_prefix(state) + state.screen + title_suffix(state.title), state)
        restore_scrollback(self.scrollback, state.first, state.lines)
        self._generation += 1
        self._used_cache = None

    # --- transcript ----------------------------------------------------------------------------------------

    def _scrolled_off(self, rows: list[str], wraps: Sequence[tuple[int, int]] = ()) -> None:
        """``rows`` left the main screen; ``wraps``: (index, width in cells) of those that continue on the next."""
        if self.capture is not None:
            self.capture.offer(self.scrollback.total, rows)
        self.scrollback.extend(rows, wraps)

    def _scrolled_off_joined(self, rows: str) -> None:
        """Rows joined by LF (none soft-wrapped) left the main screen: a fast-forward's middle, kept
        joined unless a send's head capture still takes rows."""
        if self.capture is not None and self.capture.room > 0:
            self._scrolled_off(rows.split("\n"))
        else:
            self.scrollback.extend_joined(rows)

    def _screen_wraps(self, start: int, end: int) -> list[int]:
        """Rows ``[start, end)`` of the main screen that the terminal soft-wrapped onto the next row."""
        return []

    def _active_wraps(self, rows: list[str]) -> list[int]:
        """Rows of the active screen (``rows``, their text) that soft-wrapped: for an engine worker's acks."""
        return [] if self.alt_screen else self._screen_wraps(0, len(rows))

    def wraps(self, start: int, end: int) -> dict[int, int]:
        """Transcript lines ``[start, end)`` that continue on the next line (soft-wrapped), with their widths."""
        sb = self.scrollback
        found = sb.wraps(start, end) if start < sb.total else {}
        if end > sb.total:
            top = max(start - sb.total, 0)
            found.update((sb.total + y, self.cols) for y in self._screen_wraps(top, end - sb.total))
        return found

    @property
    def cursor_line(self) -> int:
        """Transcript line of the (main screen's) cursor."""
        screen = self.current_screen()
        return self.scrollback.total + screen.main_cursor_y

    def _main_rows_used(self) -> int:
        """Rows of the main screen that belong to the transcript: down to the cursor or the last non-blank row.

        Found from the bottom up, rendering only the blank rows below the cursor; cached until the screen
        changes, so status polls cost nothing."""
        screen = self.current_screen()
        cached = self._used_cache
        if cached is not None and cached[0] == self._generation:
            return cached[1]
        used = max(screen.main_cursor_y + 1, 1)
        for y in range(screen.lines - 1, used - 1, -1):
            # A missing row is blank: seen once in the slow tier's pyte soup (seed 690271377, through a worker),
            # a screen whose rows ran short of its height raised IndexError in the output callback.
            if any(screen.main_rows(y, y + 1)):
                used = y + 1
                break
        self._used_cache = (self._generation, used)
        return used

    @property
    def total_lines(self) -> int:
        return self.scrollback.total + self._main_rows_used()

    def transcript(self, start: int, end: int) -> list[str]:
        """Retained transcript lines ``[start, end)``: only the screen rows asked for are rendered."""
        sb = self.scrollback
        out = sb.lines(start, end) if start < sb.total else []
        if end > sb.total:
            used = self._main_rows_used()
            out.extend(self.current_screen().main_rows(start - sb.total, min(end - sb.total, used)))
        return out

    def visible_rows(self) -> list[str]:
        rows = self.current_screen().visible_rows()
        while rows and not rows[-1]:
            rows.pop()
        return rows
