"""The sequences the native engine acts on before Ghostty sees them are found by one pattern over every byte of
output; its faster spelling (issue 29) finds exactly what the plain one did. Output whose only sequences are SGR
is queued as such (``Coloured``: what it can scroll is counted from its CRs and linefeeds alone)."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from ptyd.terminal import reports
from ptyd.terminal.engines.ghostty.output import _SPECIAL, Coloured, OutputQueue

PLAIN = re.compile(
    rb"\x1b\[(?:[23]J|\?(?:1049|1047|47)h|\?3[hl]|!p|[^@-~\x1b]*S|[0-9]*b|1[4689]t|\?6n|g)|\x1bc"
    rb"|\x1bP\+q" + reports.CAPABILITY_NAMES.encode() + rb"\x1b\\"
)
PIECES = st.sampled_from(
    [
        *(b"\x1b[", b"\x1b", b"S", b"b", b"1", b"4", b";", b"?", b"J", b"2", b"m", b"h", b"t", b"g", b"c", b"x"),
        *(b"\x1bc", b"6n", b"!p", b"1049h", b"3l", b"\x1bP+q", b"544e", b"\x1b\\", b" ", b"\x00", b"\xff", b"\x1b[32m"),
    ]
)


@settings(max_examples=400, deadline=None)
@given(st.lists(PIECES, max_size=60).map(b"".join))
def test_the_specials_found_are_the_plain_patterns(data: bytes) -> None:
    assert [(m.start(), m.group()) for m in _SPECIAL.finditer(data)] == [
        (m.start(), m.group()) for m in PLAIN.finditer(data)
    ]


SGR = re.compile(rb"\x1b\[[0-9;:]*m")


@settings(max_examples=400, deadline=None)
@given(st.lists(PIECES, max_size=60).map(b"".join))
def test_output_is_called_coloured_only_where_every_sequence_is_sgr(data: bytes) -> None:
    queue = OutputQueue()
    queue.put(data)
    items = list(queue.items)
    queued = b"".join(item[0] if isinstance(item, tuple) else item for item in items if not isinstance(item, str))
    assert queued == data[: len(queued)]  # the rest is held: it may start a special sequence
    for item in items:
        if isinstance(item, Coloured):
            assert item.count(b"\x1b") == len(SGR.findall(item)) > 0


def test_a_progress_bar_is_coloured_and_a_cursor_move_is_not() -> None:
    queue = OutputQueue()
    queue.put(b"\r\x1b[32m\xe2\xa0\x8b\x1b[0m 45% \x1b[38;2;1;2;3m\xe2\x94\x81\x1b[m")
    queue.put(b"\x1b[2Cx\x1b[1mbold\x1b[m")
    assert [type(item) for item in queue.items] == [Coloured, bytes]
