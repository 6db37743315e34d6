"""A terminal's state carried across a daemon handover: the transcript, and the screen as bytes that redraw it.

Both engines write their screen as VT sequences (Ghostty with its own formatter, pyte with ``redraw.pyte_redraw``) and
either engine reads them back, so the next daemon may even run the other engine. A replay keeps every cell's text
and style, the cursor and its visibility, the modes and the scroll region, the alternate screen with the main
screen's rows under it, and the title. It does not keep a half-received escape sequence (output is rendered to
the end before a snapshot, so only one a program is in the middle of writing), nor a pending wrap at the last
column.
"""

from __future__ import annotations

import msgspec

from ptyd.terminal.scrollback import Scrollback


class TerminalState(msgspec.Struct, frozen=True, kw_only=True):
    cols: int
    rows: int
    first: int  # number of the oldest retained transcript line
    lines: list[str]  # the retained scrollback, from ``first``
    screen: bytes  # VT sequences that draw the active screen, its modes and cursor
    main_rows: list[str] | None = None  # the main screen's rows while a full-screen program holds the alternate one
    main_cursor: tuple[int, int] | None = None  # ...and its cursor (x, y)
    title: str = ""
    # What the daemon reads off the screen, as text, so a terminal whose engine is in a worker has it at once
    # after a handover (before its worker has replayed ``screen``); None from a daemon that did not write it.
    visible: list[str] | None = None
    cursor: tuple[int, int, bool] | None = None  # x, y, hidden
    alt: bool = False
    app_cursor_keys: bool = False
    main_wraps: list[int] | None = None  # rows of ``main_rows`` that soft-wrapped onto the next (redrawn so)


def main_screen_prefix(state: TerminalState) -> bytes:
    """What to draw before the alternate screen's own bytes: the main screen's rows and cursor under it."""
    if state.main_rows is None:
        return b""
    x, y = state.main_cursor or (0, 0)
    wraps = set(state.main_wraps or ())
    parts: list[str] = []
    for index, row in enumerate(state.main_rows[: state.rows]):
        # Written to its end, a wrapped row wraps again (a row of wide characters is not padded by cells here:
        # it keeps its line end and loses the flag).
        if index in wraps and index + 1 < min(len(state.main_rows), state.rows) and row.isascii():
            parts.append(row.ljust(state.cols))
        else:
            parts.append(row + "\r\n")
    rows = "".join(parts).removesuffix("\r\n")
    return f"\x1b[H\x1b[2J{rows}\x1b[{y + 1};{min(x, state.cols - 1) + 1}H".encode()


def title_suffix(title: str) -> bytes:
    safe = "".join(ch for ch in title if ch.isprintable())
    return f"\x1b]2;{safe}\x07".encode() if safe else b""


def restore_scrollback(scrollback: Scrollback, first: int, lines: list[str]) -> None:
    scrollback.clear()
    scrollback.first = scrollback.total = first
    scrollback.extend(lines)


def scrollback_state(scrollback: Scrollback, max_lines: int | None) -> tuple[int, list[str]]:
    """``first`` and the retained lines, or only the last ``max_lines`` of them."""
    first = scrollback.first if max_lines is None else max(scrollback.first, scrollback.total - max_lines)
    return first, scrollback.lines(first, scrollback.total)
