"""Minimal reproducers of terminal output that crashed an engine, kept as regression cases (``hunt.py`` finds and
minimises them; docs/hostile-output.md has the upstream report).

Each case is steps of (cols, rows, output): the terminal starts at the first step's size and is resized before
each step whose size differs. ``hit`` is what the case did to the engine it was found on (``found_on``: "raw" is
pyghostty 0.1.3 driven as anyone would, "engine" is ptyd's native engine). Sizes below 2x2 exist only in raw
pyghostty (a session is at least 2x2), so ``daemon_steps`` lifts them to 2 for the daemon's tests: the cases still
hit the panic there (checked by ``test_cases_still_hit_what_they_hit``).
"""

from __future__ import annotations

from typing import NamedTuple

from hostile.probe import Step


class Case(NamedTuple):
    name: str
    hit: str
    steps: list[Step]
    found_on: str = "engine"


PANIC = "panic: increaseCapacity OutOfSpace"
STALL = "stall: 7 s in one write"

CASES: list[Case] = [
    # The issue's: an open hyperlink, then REP past what the page holds (no resize needed).
    Case("issue-18", PANIC, [(500, 100, b"\x1b[?1049hx\x1b]8;;http://a\x1b\\\x1b[99999b")], "raw"),
    # The same class reached through a resize: the hyperlink opened at another size.
    Case("alt-hyperlink-resized", PANIC, [(2, 2, b"\x91\x1b[?1049h\x1b]8;;"), (500, 100, b"x\x1b[65535b")]),
    # No alternate screen: a scroll region, a few lines, an open hyperlink and REP.
    Case("region-hyperlink", PANIC, [(2, 2, b"\x1b]8;;h"), (500, 100, b"\x1b[6r\n\n\n\n\n\nx\x1b[99999b")]),
    # The same at one size, on the main screen: a scroll region past the screen's bottom.
    Case("region-hyperlink-one-size", PANIC, [(500, 100, b"\x1b]8;;R\x1b[5;647r\n\n\n\n\nz\x1b[65536b")]),
    # The old alternate screen (47) and a cursor move.
    Case("alt47-hyperlink", PANIC, [(500, 100, b"\x1b[?47h\x1b]8;;}\x1b[3fx\x1b[65535b")]),
    # VT and FF line feeds under a scroll region, a wide character repeated.
    Case(
        "region-vt-ff-wide",
        PANIC,
        [
            (2, 2, b"\x1b]8;;p"),
            (500, 100, b"\x1b[7;534r"),
            (500, 100, b"\xe6\xbc\xa2" + b"\x0b\x0c" * 20 + b"\x1b[15656b"),
        ],
    ),
    # Not a crash but a stall: text under a hyperlink with a long URI costs libghostty-vt ~0.1 ms a cell at 160x40
    # (7 s for these 66 KB; the same at 500x100 is the panic above). In-process, the daemon's loop stops that long.
    Case("long-hyperlink-stall", STALL, [(160, 40, b"\x1b]8;;" + b"u" * 2000 + b"\x1b\\" + b"x" * 65535)], "raw"),
    # ptyd's own: a taller screen while the alternate screen is active kept the main screen's shorter row list
    # (IndexError reading the transcript). Fixed in the native engine's resize.
    Case("alt-then-taller", "exit 1: IndexError: list index out of range", [(2, 2, b"\x1b[?1049h"), (10, 3, b"")]),
]


def daemon_steps(case: Case) -> list[Step]:
    """The case at sizes a session can have (at least 2x2, at most 1000x500)."""
    return [(min(max(c, 2), 1000), min(max(r, 2), 500), data) for c, r, data in case.steps]
