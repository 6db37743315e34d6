"""Bounding rendered output to a UTF-8 byte budget: keep the head and (most of all) the tail, mark the cut.

The marker tells the reader how much was left out and which transcript lines hold it, so nothing is lost from
the caller's point of view: ``terminal_read`` returns those lines while they are retained.
"""

from __future__ import annotations

from ptyd.terminal.scrollback import utf8_len

HEAD_SHARE = 4  # a quarter of the budget for the head, the rest for the tail
MARKER_RESERVE = 160
LINE_CUT_MIN = 256  # room left at which a line too long for it is cut (head and tail kept) rather than left out


def cut_utf8_tail(text: str, max_bytes: int) -> str:
    """The longest suffix of ``text`` that fits in ``max_bytes`` of UTF-8, cut at a character boundary."""
    data = text.encode()
    if len(data) <= max_bytes:
        return text
    return data[len(data) - max_bytes :].decode("utf-8", errors="ignore")


def cut_line(text: str, max_bytes: int) -> str:
    """``text`` within ``max_bytes`` of UTF-8: its head and its tail, the characters between them counted. A single
    logical line longer than a budget (a 14 KB JSON answer) keeps both ends rather than disappearing whole."""
    data = text.encode()
    if len(data) <= max_bytes:
        return text
    room = max(max_bytes - 48, 16)  # the count's own text
    head = data[: room // HEAD_SHARE].decode("utf-8", errors="ignore")
    tail = cut_utf8_tail(text, room - len(head.encode()))
    return f"{head}[... {len(text) - len(head) - len(tail)} characters cut ...]{tail}"


def bound(
    head: list[str],
    gap: tuple[int, int] | None,
    tail: list[str],
    tail_start: int,
    max_bytes: int,
    numbers: list[int] | None = None,
) -> tuple[str, bool]:
    """Join ``head`` + ``tail`` (transcript lines from ``tail_start``) within ``max_bytes``.

    ``gap`` is a range of line numbers between head and tail that is already gone (dropped from scrollback).
    ``numbers``: the first transcript line of each tail line and then the line after the last, when tail lines
    are logical lines (several rows each). Returns the text and whether anything was left out.
    """

    def number(index: int) -> int:  # of rest[index]
        return numbers[index] if numbers is not None else rest_start + index

    if gap is None and not head:
        size = sum(utf8_len(line) + 1 for line in tail)
        if size <= max_bytes + 1:
            return "\n".join(tail), False
    budget = max(max_bytes - MARKER_RESERVE, 64)
    head_budget = budget // HEAD_SHARE
    lines = head + tail if gap is None else head
    kept_head: list[str] = []
    used = 0
    for line in lines:
        size = utf8_len(line) + 1
        if used + size > head_budget:
            break
        kept_head.append(line)
        used += size
    if gap is None:
        head_end = tail_start - len(head) + len(kept_head)
        rest = lines[len(kept_head) :]
        rest_start = head_end
    else:
        head_end = gap[0] - len(head) + len(kept_head)
        rest = tail
        rest_start = tail_start
    tail_budget = budget - used
    kept_tail: list[str] = []
    used_tail = 0
    partial = False
    for line in reversed(rest):
        size = utf8_len(line) + 1
        if used_tail + size > tail_budget:
            room = tail_budget - used_tail - 1
            if not kept_tail or room >= LINE_CUT_MIN:  # a huge line: keep both its ends, count the rest
                kept_tail.append(cut_line(line, room))
                partial = True
            break
        kept_tail.append(line)
        used_tail += size
    kept_tail.reverse()
    if numbers is not None and gap is None:  # head is empty: rest is the tail, numbered by ``numbers``
        head_end = numbers[len(kept_head)]
        rest = tail[len(kept_head) :]
        numbers = numbers[len(kept_head) :]
    omitted_start = head_end
    omitted_end = number(len(rest) - len(kept_tail))
    if omitted_end <= omitted_start and gap is None and not partial:
        return "\n".join(kept_head + kept_tail), False
    if partial:
        omitted_end = number(len(rest) - len(kept_tail) + 1)  # the cut line's start is left out too
    omitted = omitted_end - omitted_start
    gone = f" (lines before {gap[1]} are no longer retained)" if gap is not None else ""
    marker = (
        f"[... {omitted} lines omitted: terminal_read start_line={omitted_start} max_lines={max(omitted, 1)}{gone} ...]"
    )
    return "\n".join([*kept_head, marker, *kept_tail]), True
