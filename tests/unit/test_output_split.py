"""The sequences the native engine acts on before Ghostty sees them are found by one pattern over every byte of
output; its faster spelling (issue 29) finds exactly what the plain one did."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from ptyd.terminal import reports
from ptyd.terminal.engines.ghostty.output import _SPECIAL

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
