"""Output economy: what an agent reads of a long output, at a fraction of its tokens, with nothing hidden for good.

Applied to viewports and terminal_output when the caller asks (``compact``), never to the transcript:

- a run of identical lines becomes the line and a marker with the count (``yes``: 12000 lines, two kept);
- a run of progress lines printed one under the other (``45%``, ``12/200``, ``3.1 MB``), the same but for their
  numbers, keeps its last state, as a progress bar redrawn in place already does on the rendered screen;
- a cut keeps the tail first, then the lines that look like errors or warnings from the part cut out, then what
  room is left of the head, where a plain cut keeps a fixed quarter of head.

Every marker names the transcript lines it stands for, so ``terminal_read`` returns them while they are retained.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from ptyd.terminal.scrollback import utf8_len
from ptyd.terminal.viewport import LINE_CUT_MIN, MARKER_RESERVE, cut_line

REPEAT_MIN = 3  # a shorter run of identical lines costs less than its marker
PROGRESS_MIN = 3
TAIL_SHARE = (5, 8)  # of the budget, for the tail; errors get at most a quarter, the head what is left
ERROR_SHARE = 4
_DIGITS = re.compile(r"\d+")
_PROGRESS = re.compile(r"\d%|\d+/\d+|\d\s?(?:[kKMGT]i?B|B/s|it/s)\b|\beta\b", re.IGNORECASE)
LOOKS_LIKE_ERROR = re.compile(
    r"\b(?:error|errors|fatal|failed|failure|fail|exception|traceback|panic|panicked|warning|warn|denied|abort"
    r"|aborted|segmentation fault|cannot|could not|no such file|not found|undefined reference)\b"
    r"|^E\s{2,}|^\s*\w+(?:Error|Exception):",
    re.IGNORECASE,
)


class Piece(NamedTuple):
    """Transcript lines ``[first, end)`` as they are shown: one line, or a line and the marker of its run."""

    first: int
    end: int
    text: str


def fold(lines: list[str], start: int, numbers: list[int] | None = None) -> tuple[list[Piece], int]:
    """``lines`` (transcript lines from ``start``, or numbered by ``numbers`` as in ``viewport.bound``) with runs
    folded; also how many lines the folds left out."""
    if numbers is None:
        numbers = list(range(start, start + len(lines) + 1))
    pieces: list[Piece] = []
    folded = 0
    i, n = 0, len(lines)
    while i < n:
        line = lines[i]
        j = i + 1
        while j < n and lines[j] == line:
            j += 1
        if j - i >= REPEAT_MIN:
            marker = f"[... the line above {j - i - 1} more times: lines {numbers[i + 1]}-{numbers[j] - 1} ...]"
            pieces.append(Piece(numbers[i], numbers[j], f"{line}\n{marker}"))
            folded += j - i - 1
            i = j
            continue
        if _PROGRESS.search(line):
            shape = _DIGITS.sub("#", line)
            j = i + 1
            while j < n and lines[j] != lines[j - 1] and _DIGITS.sub("#", lines[j]) == shape:
                j += 1
            if j - i >= PROGRESS_MIN:
                span = f"lines {numbers[i]}-{numbers[j - 1] - 1}"
                marker = f"[... {j - i - 1} lines like the next but for their numbers (progress): {span} ...]"
                pieces.append(Piece(numbers[i], numbers[j], f"{marker}\n{lines[j - 1]}"))
                folded += j - i - 1
                i = j
                continue
        pieces.append(Piece(numbers[i], numbers[i + 1], line))
        i += 1
    return pieces, folded


def _size(piece: Piece) -> int:
    return utf8_len(piece.text) + 1


def _omitted(first: int, end: int, gone: str = "") -> str:
    count = end - first
    return f"[... {count} lines omitted: terminal_read start_line={first} max_lines={max(count, 1)}{gone} ...]"


def compact_bound(
    head: list[str],
    gap: tuple[int, int] | None,
    tail: list[str],
    tail_start: int,
    max_bytes: int,
    numbers: list[int] | None = None,
) -> tuple[str, bool, int]:
    """As ``viewport.bound`` (``head``, kept apart from ``tail`` by the lines of ``gap`` no longer retained), with
    runs folded and a cut that keeps errors before head. Returns the text, whether lines were cut, and how many
    lines folds left out."""
    if gap is None:
        pieces, folded = fold(head + tail, tail_start - len(head), None if head else numbers)
        lost: tuple[int, int] | None = None
    else:
        head_pieces, folded_head = fold(head, gap[0] - len(head))
        tail_pieces, folded = fold(tail, tail_start, numbers)
        pieces, folded = head_pieces + tail_pieces, folded + folded_head
        lost = (gap[0], tail_start)
    if lost is None and sum(map(_size, pieces)) <= max_bytes + 1:
        return "\n".join(piece.text for piece in pieces), False, folded
    budget = max(max_bytes - 3 * MARKER_RESERVE, 64)
    # The tail, newest first.
    tail_budget = budget * TAIL_SHARE[0] // TAIL_SHARE[1]
    used = 0
    cut = len(pieces)
    while cut > 0 and used + _size(pieces[cut - 1]) <= tail_budget:
        cut -= 1
        used += _size(pieces[cut])
    kept = set(range(cut, len(pieces)))
    partial: Piece | None = None
    room = tail_budget - used - 1
    if cut > 0 and (cut == len(pieces) or room >= LINE_CUT_MIN):  # a huge line: keep both its ends
        huge = pieces[cut - 1]
        partial = Piece(huge.first, huge.end, cut_line(huge.text, room))
        used += _size(partial)
        cut -= 1
    # Then what looks like an error, oldest first (a first error is the cause of the next ones), at most a share.
    error_budget = budget // ERROR_SHARE
    error_used = 0
    for k in range(cut):
        size = _size(pieces[k])
        if error_used + size > error_budget:
            continue
        if LOOKS_LIKE_ERROR.search(pieces[k].text):
            kept.add(k)
            error_used += size
    used += error_used
    # Then the head, with what room is left.
    for k in range(cut):
        if k in kept:
            continue
        size = _size(pieces[k])
        if used + size > budget:
            break
        kept.add(k)
        used += size
    out: list[str] = []
    position = pieces[0].first if pieces else tail_start
    for k, piece in enumerate(pieces):
        shown = partial if partial is not None and k == cut else (piece if k in kept else None)
        if shown is None:
            continue
        if piece.first > position:
            gone = ""
            if lost is not None and position < lost[1] and piece.first >= lost[0]:
                gone = f" (lines before {lost[1]} are no longer retained)"
            out.append(_omitted(position, piece.first, gone))
        out.append(shown.text)
        position = piece.end
    return "\n".join(out), True, folded
