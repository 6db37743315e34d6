"""The output economy of a flood's viewport (issue 28): a long output is folded in its first and last window
only, the lines between searched for errors alone, and the result is what folding it whole gives whenever
the whole would not show more (the cut keeps the tail, errors and head, which the windows hold)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ptyd.terminal import economy
from ptyd.terminal.economy import compact_bound

BUDGET = 4096  # windows of 4 KiB: every output below is windowed


def _whole(monkeypatch: pytest.MonkeyPatch, lines: list[str], numbers: list[int] | None = None) -> tuple:
    """The same viewport folded whole: windows as long as the output."""
    with monkeypatch.context() as m:
        m.setattr(economy, "WINDOW_MIN", 10**9)
        return compact_bound([], None, lines, 10, BUDGET, numbers)


@pytest.mark.parametrize(
    "lines",
    [
        [str(i) for i in range(30_000)],  # seq
        ["y"] * 30_000,  # yes: one run, folded whole
        ["y"] * 10_000 + [str(i) for i in range(10_000)] + ["z"] * 10_000,  # runs at both windows' edges
        [f"compiling {i}" + (" error: it broke" if i % 5_000 == 7 else "") for i in range(30_000)],
    ],
    ids=["seq", "yes", "runs-at-the-edges", "errors-in-the-middle"],
)
def test_a_flood_reads_as_if_folded_whole(monkeypatch: pytest.MonkeyPatch, lines: list[str]) -> None:
    windowed = compact_bound([], None, lines, 10, BUDGET)
    assert windowed == _whole(monkeypatch, lines)
    numbered = list(range(10, 10 + len(lines) + 1))  # as when wrapped rows are joined
    assert compact_bound([], None, lines, 10, BUDGET, numbered) == windowed


def test_errors_deep_in_a_flood_are_kept_oldest_first() -> None:
    lines = [str(i) for i in range(300_000)]
    lines[123_456] = "E   assert 1 == 2"
    lines[200_000] = "ValueError: bad value"
    lines[250_000] = "İstanbul: could not connect"  # lower() lengthens it: the line is still the right one
    text, truncated, _ = compact_bound([], None, lines, 10, BUDGET)
    assert truncated
    shown = text.splitlines()
    kept = [line for line in shown if not line.startswith("[...") and not line.isdigit()]
    assert kept == ["E   assert 1 == 2", "ValueError: bad value", "İstanbul: could not connect"]
    # Each is where the transcript has it: the omitted markers around it name its neighbours' lines.
    at = shown.index("ValueError: bad value")
    assert shown[at - 1].endswith(f"start_line={123_456 + 10 + 1} max_lines={200_000 - 123_456 - 1} ...]")


def test_a_middle_longer_than_a_window_in_bytes_is_windowed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fewer lines than the window has bytes (a 10,000-line scrollback of `cat`) is still a flood: folding
    its 7,000 lines whole cost the loop 0.25 s a result."""
    lines = [f"src/module_{i}/file.py" for i in range(7_000)]
    folded: list[int] = []
    real_fold = economy.fold
    monkeypatch.setattr(economy, "fold", lambda part, *a: folded.append(len(part)) or real_fold(part, *a))
    pieces, _, windowed = economy.fold_long(lines, 0, None, 16 * 1024)
    assert windowed
    assert sum(folded) < 2_000  # the two windows' lines, not the 7,000
    assert [piece.text for piece in pieces[:3]] == lines[:3]
    assert pieces[-1].text == lines[-1]


def test_errors_at_the_edges_of_the_searched_chunks_are_found() -> None:
    """The middle is searched ``ERROR_CHUNK`` lines at a time: a line first or last in a chunk is found as any."""
    lines = [str(i) for i in range(5 * economy.ERROR_CHUNK)]
    a = 100
    for k in range(1, 4):
        edge = a + k * economy.ERROR_CHUNK
        lines[edge - 1] = f"build failed {k}"
        lines[edge] = f"E   assert {k}"  # starts a chunk: no newline before it in its chunk's text
    lines[a] = "Error: the first line searched"
    expected = [i for i in range(a, len(lines)) if economy.LOOKS_LIKE_ERROR.search(lines[i])]
    assert len(expected) == 7
    assert economy._error_lines(lines, a, len(lines)) == expected


def test_a_captured_head_reads_as_if_folded_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    """A send's captured head is folded in its windows too (2,000 lines of it folded whole were 20-40 ms of each
    such result): what the cut shows of it is the same."""
    head = [f"{i} compiling module_{i}" + (" warning: unused" if i % 700 == 3 else "") for i in range(2_000)]
    tail = [f"{i} linking" for i in range(50_000, 60_000)]
    windowed = compact_bound(head, (2_000, 50_000), tail, 50_000, BUDGET)
    with monkeypatch.context() as m:
        m.setattr(economy, "WINDOW_MIN", 10**9)
        assert windowed == compact_bound(head, (2_000, 50_000), tail, 50_000, BUDGET)


OLD_PROGRESS = re.compile(r"\d%|\d+/\d+|\d\s?(?:[kKMGT]i?B|B/s|it/s)\b|\beta\b", re.IGNORECASE)
LINES = st.text(st.sampled_from("0123456789 %/kKmMgGtTiIbB.sSeEaAx:"), max_size=24)


@settings(max_examples=500, deadline=None)
@given(LINES)
def test_the_progress_and_error_searches_agree_with_their_patterns(line: str) -> None:
    # Each search is a faster spelling of the pattern it stands for: the same verdict on every line.
    assert bool(economy._PROGRESS.search(line)) == bool(OLD_PROGRESS.search(line))
    for text in (line, f"{line} Error: {line}", f"E   {line}", f"{line} could not {line}", line.upper()):
        assert economy.looks_like_error(text) == bool(economy.LOOKS_LIKE_ERROR.search(text))


def _fold_line_by_line(lines: list[str], start: int, numbers: list[int] | None = None) -> tuple[list, int]:
    """``fold`` as it was written before its lines were taken in chunks: each line looked at, the reference."""
    numbers = numbers or list(range(start, start + len(lines) + 1))
    pieces: list[economy.Piece] = []
    folded, i, n = 0, 0, len(lines)
    while i < n:
        line, j = lines[i], i + 1
        while j < n and lines[j] == line:
            j += 1
        if j - i >= economy.REPEAT_MIN:
            marker = f"[... the line above {j - i - 1} more times: lines {numbers[i + 1]}-{numbers[j] - 1} ...]"
            pieces.append(economy.Piece(numbers[i], numbers[j], f"{line}\n{marker}"))
            folded, i = folded + j - i - 1, j
            continue
        if OLD_PROGRESS.search(line):
            shape, j = re.sub(r"\d+", "#", line), i + 1
            while j < n and lines[j] != lines[j - 1] and re.sub(r"\d+", "#", lines[j]) == shape:
                j += 1
            if j - i >= economy.PROGRESS_MIN:
                span = f"lines {numbers[i]}-{numbers[j - 1] - 1}"
                marker = f"[... {j - i - 1} lines like the next but for their numbers (progress): {span} ...]"
                pieces.append(economy.Piece(numbers[i], numbers[j], f"{marker}\n{lines[j - 1]}"))
                folded, i = folded + j - i - 1, j
                continue
        pieces.append(economy.Piece(numbers[i], numbers[i + 1], line))
        i += 1
    return pieces, folded


# Lines that repeat, count (progress) and do neither, in runs that cross the chunks' edges.
FOLDED = st.lists(st.sampled_from(["7", "8", "y", "x 1%", "x 2%", "x 3%", "eta 4", "E  no", "1/2", "b"]), max_size=60)


@settings(max_examples=500, deadline=None)
@given(FOLDED, st.integers(min_value=1, max_value=9))
def test_folding_in_chunks_is_folding_line_by_line(lines: list[str], chunk: int) -> None:
    with pytest.MonkeyPatch.context() as m:
        m.setattr(economy, "SEARCH_CHUNK", chunk)
        assert economy.fold(lines, 5) == _fold_line_by_line(lines, 5)
        numbered = list(range(5, 5 + 2 * len(lines) + 1, 2))  # wrapped rows joined: numbers not consecutive
        assert economy.fold(lines, 5, numbered) == _fold_line_by_line(lines, 5, numbered)


@settings(max_examples=300, deadline=None)
@given(FOLDED, st.integers(min_value=1, max_value=9), st.integers(min_value=256, max_value=2048))
def test_errors_found_by_chunk_are_the_errors(lines: list[str], chunk: int, budget: int) -> None:
    """The cut looks for errors only in chunks whose text holds an error word: it keeps what looking at every
    piece keeps."""
    with pytest.MonkeyPatch.context() as m:
        m.setattr(economy, "SEARCH_CHUNK", chunk)
        chunked = compact_bound([], None, lines * 8, 10, budget)
        m.setattr(economy, "_error_candidates", lambda pieces, end: range(end))
        assert chunked == compact_bound([], None, lines * 8, 10, budget)
