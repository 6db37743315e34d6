"""The cuts the native engine's fast path makes in a run of plain lines without splitting it into a list of them
(issue 29: ``seq`` is 125,000 lines a MB): where lines start, whether one is too long for its row, and the rows
joined for scrollback."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ptyd.terminal.plain import after_lines, joined_rows_of, last_lines, longer_than, rows_of

LINES = st.lists(st.text(st.sampled_from("ab é日😀│ "), max_size=12), min_size=1, max_size=40)


@settings(max_examples=300, deadline=None)
@given(LINES, st.integers(0, 40), st.integers(1, 14))
def test_cuts_and_rows_agree_with_the_lines(lines: list[str], count: int, width: int) -> None:
    text = "".join(f"{line}\r\n" for line in lines)
    count = min(count, len(lines))
    assert text[after_lines(text, count) :] == "".join(f"{line}\r\n" for line in lines[count:])
    assert text[last_lines(text, count) :] == "".join(f"{line}\r\n" for line in lines[len(lines) - count :])
    assert longer_than(text, width) == (max(map(len, lines)) > width)
    assert joined_rows_of(text) == "\n".join(rows_of(lines, 1 << 20, strip=True))


def test_a_line_of_exactly_the_width_fits() -> None:
    assert not longer_than("x" * 80 + "\r\n" + "y\r\n", 80)
    assert longer_than("y\r\n" + "x" * 81 + "\r\n", 80)
    assert not longer_than("日" * 80 + "\r\n", 80)  # characters, not bytes: wide ones are the caller's to halve
