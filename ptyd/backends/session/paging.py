"""Paging the retained transcript (terminal_read): scrollback followed by the screen, as rendered lines."""

from __future__ import annotations

from ptyd import protocol as p
from ptyd.terminal.engine import TerminalEngine
from ptyd.terminal.logical import JOIN_MAX_ROWS, join
from ptyd.terminal.scrollback import detached
from ptyd.terminal.viewport import bound


def page(
    term: TerminalEngine, start_line: int | None, max_lines: int, max_bytes: int, *, join_wrapped: bool = False
) -> p.TerminalReadResult:
    """Lines from ``start_line`` (negative: from the end; None: the last ``max_lines``), at most ``max_lines``
    and ``max_bytes`` (a single longer line is cut, its cut marked). ``join_wrapped``: soft-wrapped rows are
    joined into logical lines (a line that goes on past the page's end is read to its end)."""
    total = term.total_lines
    first = term.scrollback.first
    start = -max_lines if start_line is None else start_line
    if start < 0:
        start = max(total + start, 0)
    begin = max(start, first)
    end = min(begin + max_lines, total)
    lines = term.transcript(begin, end)
    firsts = list(range(begin, end))
    if join_wrapped:
        wraps = term.wraps(begin, end)
        if end - 1 in wraps:  # the last line goes on: read it to its end
            more = min(end + JOIN_MAX_ROWS, total)
            wraps.update(term.wraps(end, more))
            stop = end
            while stop < more and stop - 1 in wraps:
                stop += 1
            lines += term.transcript(end, stop)
            end = stop
        lines, firsts = join(lines, begin, wraps)
    used = 0
    kept = 0
    for line in lines:
        used += len(line.encode()) + 1
        if used > max_bytes and kept:
            break
        kept += 1
    cut = kept < len(lines)
    next_line = firsts[kept] if cut else end
    if cut:
        lines = lines[:kept]
    if len(lines) == 1 and used > max_bytes:
        lines = [bound([], None, lines, begin, max_bytes)[0]]
    return p.TerminalReadResult(
        lines=detached(lines),  # encoded into the reply: the scrollback's own strs would keep their UTF-8
        start_line=begin,
        next_line=next_line,
        first_retained_line=first,
        total_lines=total,
        truncated=cut or begin > start,
    )
