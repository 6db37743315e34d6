"""Logical lines: transcript rows the terminal soft-wrapped, joined back into the lines the program printed.

A wrapped row filled its width; its trailing blanks were trimmed when it was rendered as text, so an ASCII row is
padded back to its width before the next row is appended (``word word`` wrapped after the space keeps the space).
A row of wide characters is taken as it is: a wide character that did not fit left a blank cell, not a space.
"""

from __future__ import annotations

JOIN_MAX_ROWS = 1000  # rows one logical line may span when reading on past a page's end: a bound on a page's size


def join(lines: list[str], start: int, wraps: dict[int, int]) -> tuple[list[str], list[int]]:
    """``lines`` (transcript lines from ``start``) with wrapped rows joined; also each joined line's first row."""
    if not wraps:
        return lines, list(range(start, start + len(lines)))
    out: list[str] = []
    firsts: list[int] = []
    parts: list[str] = []
    first = start
    for number, line in enumerate(lines, start):
        width = wraps.get(number)
        if not parts:
            first = number
        if width is None:
            parts.append(line)
            out.append("".join(parts))
            firsts.append(first)
            parts = []
            continue
        parts.append(line.ljust(width) if line.isascii() else line)
    if parts:
        out.append("".join(parts))
        firsts.append(first)
    return out, firsts
