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
from bisect import bisect_left
from collections.abc import Iterator, Sequence
from itertools import compress, count, islice, repeat
from operator import eq
from typing import NamedTuple

from ptyd.terminal.scrollback import utf8_len
from ptyd.terminal.viewport import LINE_CUT_MIN, MARKER_RESERVE, cut_line

REPEAT_MIN = 3  # a shorter run of identical lines costs less than its marker
PROGRESS_MIN = 3
SEARCH_CHUNK = 256  # lines whose joined text is searched at once (for progress, for errors)
TAIL_SHARE = (5, 8)  # of the budget, for the tail; errors get at most a quarter, the head what is left
ERROR_SHARE = 4
_DIGITS = re.compile(r"\d+")
# Searched in every folded line: "\d/\d" finds what "\d+/\d+" would without backtracking through each run of
# digits, and cases spelled out rather than IGNORECASE (a window of `seq` lines: 9 -> 4 ms a result).
_PROGRESS = re.compile(r"\d(?:%|/\d|\s?(?:[kKmMgGtT][iI]?[bB]|[bB]/[sS]|[iI][tT]/[sS])\b)|\b[eE][tT][aA]\b")
_PROGRESS_CHARS = "%/bBaA"  # one in each alternative: "%", a count's or "it/s"'s "/", a unit's "b", "eta"'s "a"
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
    numbering: Sequence[int] = range(start, start + len(lines) + 1) if numbers is None else numbers
    pieces: list[Piece] = []
    folded = 0
    n = len(lines)
    # Only a line equal to the next or one that looks like progress can start a fold. Where a chunk of lines has
    # none of the latter, the lines up to the next of the former are pieces of their own, made at once (a window of
    # `seq` lines, line by line, was ~10 ms of each such result); elsewhere each line is looked at.
    repeats = list(compress(count(), map(eq, lines, islice(lines, 1, None))))
    hot = _progress_chunks(lines)
    i = 0
    while i < n:
        chunk = i // SEARCH_CHUNK
        if chunk not in hot:
            end = min(n, (chunk + 1) * SEARCH_CHUNK)
            k = bisect_left(repeats, i)
            stop = repeats[k] if k < len(repeats) and repeats[k] < end else end
            pieces.extend(_pieces(numbering, lines, i, stop))
            i = stop
            if stop == end:
                continue
        i, left_out = _fold_at(lines, i, numbering, pieces)
        folded += left_out
    return pieces, folded


def _progress_chunks(lines: list[str]) -> set[int]:
    """The chunks of ``SEARCH_CHUNK`` lines where a line may look like progress: those whose joined text does
    (the pattern has no anchors, and its word edges are the same where a line ends as where a newline follows).
    Each of its alternatives holds one of ``_PROGRESS_CHARS``: text of digits alone (`seq`) is not searched, where
    the pattern tries its units at every digit (8 ms for 10,000 such lines)."""
    hot: set[int] = set()
    for chunk, a in enumerate(range(0, len(lines), SEARCH_CHUNK)):
        joined = "\n".join(lines[a : a + SEARCH_CHUNK])
        if any(ch in joined for ch in _PROGRESS_CHARS) and _PROGRESS.search(joined):
            hot.add(chunk)
    return hot


def _fold_at(lines: list[str], i: int, numbers: Sequence[int], pieces: list[Piece]) -> tuple[int, int]:
    """The piece (or folded run) that starts at line ``i``, appended to ``pieces``; returns the next line and
    how many lines the fold left out."""
    line, n = lines[i], len(lines)
    j = i + 1
    while j < n and lines[j] == line:
        j += 1
    if j - i >= REPEAT_MIN:
        marker = f"[... the line above {j - i - 1} more times: lines {numbers[i + 1]}-{numbers[j] - 1} ...]"
        pieces.append(Piece(numbers[i], numbers[j], f"{line}\n{marker}"))
        return j, j - i - 1
    if _PROGRESS.search(line):
        shape = _DIGITS.sub("#", line)
        j = i + 1
        while j < n and lines[j] != lines[j - 1] and _DIGITS.sub("#", lines[j]) == shape:
            j += 1
        if j - i >= PROGRESS_MIN:
            span = f"lines {numbers[i]}-{numbers[j - 1] - 1}"
            marker = f"[... {j - i - 1} lines like the next but for their numbers (progress): {span} ...]"
            pieces.append(Piece(numbers[i], numbers[j], f"{marker}\n{lines[j - 1]}"))
            return j, j - i - 1
    pieces.append(Piece(numbers[i], numbers[i + 1], line))
    return i + 1, 0


def _pieces(numbers: Sequence[int], lines: list[str], a: int, b: int) -> Iterator[Piece]:
    """Lines ``[a, b)`` as a piece each, made in C (``Piece(...)`` runs its Python ``__new__`` per line)."""
    return map(tuple.__new__, repeat(Piece), zip(numbers[a:b], numbers[a + 1 : b + 1], lines[a:b], strict=True))


# A flood's output is folded only in its first and last window, each at least a viewport's worth of bytes; the
# lines between are searched for errors alone. Folding a 300,000-line `seq` whole took the loop 3.3 s on 2 busy
# cores, every session unserved meanwhile, a handover too (issue 28; tests/unit/test_economy_floods.py).
WINDOW_MIN = 1024
ERROR_WORDS = (
    "error",
    "fatal",
    "fail",
    "exception",
    "traceback",
    "panic",
    "warn",
    "denied",
    "abort",
    "segmentation fault",
    "cannot",
    "could not",
    "no such file",
    "not found",
    "undefined reference",
)  # every alternative of LOOKS_LIKE_ERROR contains one (lower case), or the line starts with E


def looks_like_error(text: str) -> bool:
    """``LOOKS_LIKE_ERROR.search``, the words looked for first: its alternatives take ~24 us a log line, the
    words under 1 (a result's head of 2,000 lines was looked through line by line)."""
    return _may_look_like_error(text.lower()) and LOOKS_LIKE_ERROR.search(text) is not None


def _may_look_like_error(low: str) -> bool:
    """Whether lowered text holds what one of ``LOOKS_LIKE_ERROR``'s alternatives needs: a line starting with "e",
    or one of ``ERROR_WORDS``."""
    return low.startswith("e") or "\ne" in low or any(word in low for word in ERROR_WORDS)


ERROR_HITS = 256  # lines looked at per word in the middle of a flood: the oldest errors are what is kept
ERROR_CHUNK = 2048  # lines searched at a time


def fold_long(lines: list[str], start: int, numbers: list[int] | None, window: int) -> tuple[list[Piece], int, bool]:
    """``fold``, bounded for a flood: only the first and the last window (of ``window`` bytes at least) are
    folded, and of the more than ``window`` bytes of lines between, only those that look like errors are pieces. Also
    whether lines were left out so."""
    n = len(lines)
    # Each window ends where a line differs from the one before, past ``window`` bytes of the lines that differ
    # (a piece is as long as its line at least, but for a progress run's), whatever runs there are.
    a, size = 0, 0
    while a < n and size < window:
        a += 1
        if a == n or lines[a] != lines[a - 1]:
            size += len(lines[a - 1]) + 1
    b, size = n, 0
    while b > a and size < window:
        b -= 1
        if lines[b] != lines[b - 1]:
            size += len(lines[b]) + 1
    # Bytes, not lines: a middle of 7,600 lines (a 10,000-line scrollback's worth of `cat`) was folded whole, 0.25 s
    # of the loop for each such send's result.
    if b - a + sum(map(len, lines[a:b])) < window:
        pieces, folded = fold(lines, start, numbers)
        return pieces, folded, False

    def number(i: int) -> int:
        return numbers[i] if numbers is not None else start + i

    head, folded_head = fold(lines[:a], start, numbers[: a + 1] if numbers is not None else None)
    tail, folded_tail = fold(lines[b:], number(b), numbers[b:] if numbers is not None else None)
    errors = [Piece(number(i), number(i + 1), lines[i]) for i in _error_lines(lines, a, b)]
    return head + errors + tail, folded_head + folded_tail, True


def _error_lines(lines: list[str], a: int, b: int) -> list[int]:
    """Lines ``[a, b)`` that look like errors, oldest first: found by words in the joined text (a regex per line
    costs ~2 us, a flood's million lines 2 s), then each candidate line checked by ``LOOKS_LIKE_ERROR``. Joined
    ``ERROR_CHUNK`` lines at a time: a scrollback of 4-byte text joined whole, and lowered, was 8 MB more of RSS
    for each such result."""
    found = dict.fromkeys((*ERROR_WORDS, "\ne"), 0)  # hits per word so far: the oldest ERROR_HITS are looked at
    indices: list[int] = []
    for start in range(a, b, ERROR_CHUNK):
        part = lines[start : min(b, start + ERROR_CHUNK)]
        low = "\n".join(part).lower()  # lower() may change lengths: offsets are counted in ``low`` alone
        hits: set[int] = {0} if low.startswith("e") else set()
        for word in found:
            pos = low.find(word)
            while pos >= 0 and found[word] < ERROR_HITS:
                hits.add(pos + 1 if word == "\ne" else pos)
                found[word] += 1
                end = low.find("\n", pos + 1)
                pos = low.find(word, end) if end >= 0 else -1
        line, last = 0, 0
        for pos in sorted(hits):
            line += low.count("\n", last, pos)
            last = pos
            if (not indices or indices[-1] != start + line) and LOOKS_LIKE_ERROR.search(part[line]):
                indices.append(start + line)
    return indices


def _error_candidates(pieces: list[Piece], end: int) -> Iterator[int]:
    """The pieces of ``[0, end)`` that may look like errors, in order: those of each ``SEARCH_CHUNK`` whose
    joined text, lowered, holds an error word or a line starting with "e" (a piece that looks like one holds
    either, and lowering the whole lowers each piece alike). 10,000 lines of `seq` were ~5 ms of a result."""
    for a in range(0, end, SEARCH_CHUNK):
        b = min(end, a + SEARCH_CHUNK)
        if _may_look_like_error("\n".join([piece.text for piece in pieces[a:b]]).lower()):
            yield from range(a, b)


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
    window = max(max_bytes, WINDOW_MIN)  # a piece is a byte at least: a window holds more than the budget
    if gap is None:
        pieces, folded, windowed = fold_long(head + tail, tail_start - len(head), None if head else numbers, window)
        lost: tuple[int, int] | None = None
    else:
        # The head too is folded in its windows alone: a captured head of 2,000 `seq` lines folded whole was
        # 20-40 ms of each such result, for a head that gets less than the budget.
        head_pieces, folded_head, _ = fold_long(head, gap[0] - len(head), None, window)
        tail_pieces, folded, windowed = fold_long(tail, tail_start, numbers, window)
        pieces, folded = head_pieces + tail_pieces, folded + folded_head
        lost = (gap[0], tail_start)
    if lost is None and not windowed and sum(map(_size, pieces)) <= max_bytes + 1:
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
    for k in _error_candidates(pieces, cut):
        size = _size(pieces[k])
        if error_used + size > error_budget:
            continue
        if looks_like_error(pieces[k].text):
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
