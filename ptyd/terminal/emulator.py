"""The session's terminal: raw PTY bytes in, a rendered screen and a numbered transcript out.

Two engines sit behind this one class. ``Terminal(...)`` builds the one the ``emulator`` setting names: "ghostty"
(libghostty-vt, Ghostty's VT core, through pyghostty: native, ~300 MB/s), "pyte" (pure Python, 1-2 MB/s, with a
fast path for plain floods), or "auto", the native one wherever it imports. What the daemon promises is kept
here, once, for both: the transcript and its numbering, bounded scrollback, the head capture of a send.

Transcript line numbers are absolute from the session start: scrollback lines, then the rows of the main
screen. Row ``y`` of the screen is line ``scrollback.total + y``. An engine hands rows that leave the top of the
main screen (scrolling, ``clear``, a shrinking resize) to ``_scrolled_off``, and nothing from the alternate
screen or a scroll region.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any, Protocol, final

from ptyd.terminal.replay import (
    TerminalState,
    main_screen_prefix,
    restore_scrollback,
    scrollback_state,
    title_suffix,
)
from ptyd.terminal.scrollback import Scrollback, utf8_len

ENGINES = ("ghostty", "pyte")


class CursorView(Protocol):
    @property
    def x(self) -> int: ...
    @property
    def y(self) -> int: ...
    @property
    def hidden(self) -> bool: ...


class ScreenView(Protocol):
    """What the daemon reads off a screen."""

    @property
    def lines(self) -> int: ...
    @property
    def cursor(self) -> CursorView: ...
    @property
    def title(self) -> str: ...
    @property
    def main_cursor_y(self) -> int: ...
    def visible_rows(self) -> list[str]: ...
    def main_rows(self, start: int = 0, end: int | None = None) -> list[str]:
        """Rows ``[start, end)`` of the main screen (the saved ones while the alternate screen is active)."""
        ...


@final
class HeadCapture:
    """Keeps the first rows of one send's output, so its head survives even if scrollback drops it."""

    def __init__(self, start_line: int, budget_bytes: int) -> None:
        self.start_line = start_line
        self.room = budget_bytes
        self.lines: list[str] = []
        self.end_line = start_line  # one past the last captured line

    def offer(self, first: int, rows: list[str]) -> None:
        """Rows ``first``, ``first + 1``... left the screen; keep those past the capture's end while room lasts."""
        if self.room <= 0 or first + len(rows) <= self.end_line:
            return
        if first > self.end_line:  # rows in between were never offered: the head ends at the gap
            self.room = 0
            return
        for row in rows[max(0, self.end_line - first) :]:
            size = utf8_len(row) + 1
            if size > self.room:
                self.room = 0
                return
            self.lines.append(row)
            self.room -= size
            self.end_line += 1


def native_available() -> bool:
    try:
        import ptyd.terminal.ghostty_engine  # noqa: F401
    except (ImportError, OSError):  # no wheel for this platform, or its library does not load
        return False
    return True


def engine_name(emulator: str = "auto") -> str:
    """The engine ``emulator`` ("auto", "ghostty" or "pyte") resolves to here. ``PTYD_EMULATOR`` overrides
    "auto" (the tests run the daemon on the fallback with it)."""
    if emulator == "auto":
        emulator = os.environ.get("PTYD_EMULATOR", "auto")
    if emulator not in ("auto", *ENGINES):
        raise ValueError(f"unknown emulator {emulator!r}: expected auto, ghostty or pyte")
    if emulator == "auto":
        return "ghostty" if native_available() else "pyte"
    return emulator


class Terminal:
    """Queue output with ``feed``, render it with ``process`` under a time budget, read the screen and the
    transcript. ``backlog`` is what is queued and not yet rendered (bytes or characters)."""

    engine = ""

    def __new__(cls, *_args: Any, emulator: str = "auto", **_kwargs: Any) -> Terminal:
        if cls is Terminal:
            if engine_name(emulator) == "ghostty":
                from ptyd.terminal.ghostty_engine import GhosttyTerminal

                cls = GhosttyTerminal
            else:
                from ptyd.terminal.pyte_engine import PyteTerminal

                cls = PyteTerminal
        return object.__new__(cls)

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
            title=str(screen.title),
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

    def _screen_wraps(self, start: int, end: int) -> list[int]:
        """Rows ``[start, end)`` of the main screen that the terminal soft-wrapped onto the next row."""
        return []

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
            if screen.main_rows(y, y + 1)[0]:
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
