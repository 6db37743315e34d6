"""Cursor movement, tab stops, scroll regions and state reports as xterm does them, on every engine this machine has.

The cases are libvterm's own (t/11state_movecursor.test, t/12state_scroll.test, t/21state_tabstops.test,
t/22state_save.test, on its default 80x25 screen), each a list of (output, cursor as (row, column)) checked in
turn, as libvterm's PUSH / ?cursor lines are; where libvterm's recorded expectation is not xterm's (it once left the
cursor in place at DECSTBM), xterm's is used and the case says so. The reports (DECRQM, DECRQSS) are xterm's answers
to the state each case sets up, the same on both engines except where a case names the engine.
"""

from __future__ import annotations

import pytest

from ptyd.terminal.emulator import Terminal
from ptyd.terminal.engines import native_available, open_terminal

ENGINES = ["ghostty", "pyte"] if native_available() else ["pyte"]
COLS, ROWS = 80, 25

Steps = list[tuple[str, tuple[int, int]]]

CURSOR_CASES: dict[str, Steps] = {
    "text, BS, HT, CR, LF": [("ABC", (0, 3)), ("\b", (0, 2)), ("\t", (0, 8)), ("\r", (0, 0)), ("\n", (1, 0))],
    "IND, RI, NEL": [("ABC\x1bD", (1, 3)), ("\x1bM", (0, 3)), ("\x1bE", (1, 0))],
    "CUD, CUF, CUU, CUB": [
        ("\x1b[B", (1, 0)),
        ("\x1b[3B", (4, 0)),
        ("\x1b[0B", (5, 0)),
        ("\x1b[C", (5, 1)),
        ("\x1b[3C", (5, 4)),
        ("\x1b[0C", (5, 5)),
        ("\x1b[A", (4, 5)),
        ("\x1b[3A", (1, 5)),
        ("\x1b[0A", (0, 5)),
        ("\x1b[D", (0, 4)),
        ("\x1b[3D", (0, 1)),
        ("\x1b[0D", (0, 0)),
    ],
    "CNL, CPL": [
        ("   ", (0, 3)),
        ("\x1b[E", (1, 0)),
        ("   \x1b[2E", (3, 0)),
        ("\x1b[0E", (4, 0)),
        ("   \x1b[F", (3, 0)),
        ("   \x1b[2F", (1, 0)),
        ("\x1b[0F", (0, 0)),
    ],
    "CHA, CUP": [
        ("\n\x1b[20G", (1, 19)),
        ("\x1b[G", (1, 0)),
        ("\x1b[10;5H", (9, 4)),
        ("\x1b[8H", (7, 0)),
        ("\x1b[H", (0, 0)),
    ],
    "bounds": [
        ("\x1b[A", (0, 0)),
        ("\x1b[D", (0, 0)),
        ("\x1b[25;80H", (24, 79)),
        ("\x1b[B", (24, 79)),
        ("\x1b[C", (24, 79)),
        ("\x1b[E", (24, 0)),
        ("\x1b[H\x1b[F", (0, 0)),
        ("\x1b[999G", (0, 79)),
        ("\x1b[99;99H", (24, 79)),
    ],
    # pyte 0.8.2 ignored HPA (mapped to no final byte), HPB and VPB.
    "HPA, HPR, HPB, HVP, VPA, VPR, VPB": [
        ("\x1b[5`", (0, 4)),
        ("\x1b[3a", (0, 7)),
        ("\x1b[3j", (0, 4)),
        ("\x1b[3;3f", (2, 2)),
        ("\x1b[5d", (4, 2)),
        ("\x1b[2e", (6, 2)),
        ("\x1b[2k", (4, 2)),
    ],
    "HT, CHT, CBT": [
        ("\t", (0, 8)),
        ("   \t", (0, 16)),
        ("       \t", (0, 24)),
        ("        \t", (0, 40)),
        ("\x1b[I", (0, 48)),
        ("\x1b[2I", (0, 64)),
        ("\x1b[Z", (0, 56)),
        ("\x1b[2Z", (0, 40)),
    ],
    "HTS": [("\x1b[5G\x1bH\x1b[G\t", (0, 4)), ("\t", (0, 8))],
    # libghostty-vt ignored CSI g with the parameter omitted (the stop stayed); CSI 0 g and CSI ; g worked.
    "TBC, parameter omitted": [("\x1b[9G\x1b[g\r\t", (0, 16)), ("\x1b[17G\x1b[0g\r\t", (0, 24))],
    "TBC 3": [("\x1b[3g\r\t", (0, 79))],
    "LF at the bottom of the screen": [("\n" * 24, (24, 0)), ("\n", (24, 0))],
    "LF in DECSTBM": [("\x1b[1;10r", (0, 0)), ("\n" * 9, (9, 0)), ("\n", (9, 0))],
    # pyte stopped a LF below the region at the region's bottom, pulling the cursor up into it.
    "LF below DECSTBM": [("\x1b[9;10r", (0, 0)), ("\x1b[20H\n", (20, 0)), ("\x1b[25H\n", (24, 0))],
    "RI above DECSTBM": [("\x1b[9;10r\x1b[5H\x1bM", (3, 0)), ("\x1b[H\x1bM", (0, 0)), ("\x1b[9H\x1bM", (8, 0))],
    "CUU and CUD outside DECSTBM stop at the screen's edge or the far margin": [
        ("\x1b[10;20r\x1b[3H\x1b[30B", (19, 0)),
        ("\x1b[24H\x1b[30A", (9, 0)),
        ("\x1b[24H\x1b[30B", (24, 0)),
        ("\x1b[3H\x1b[30A", (0, 0)),
    ],
    # libvterm's t/12state_scroll.test once recorded the cursor left in place at "\e[9;10r"; xterm (ctlseqs:
    # "DECSTBM ... moves the cursor to column 1, line 1 of the page") and Ghostty home it, CSI r included (pyte did
    # not home at CSI r).
    "DECSTBM homes the cursor": [
        ("\x1b[3;3H\x1b[r", (0, 0)),
        ("\x1b[3;3H\x1b[2;4r", (0, 0)),
        ("\x1b[?6h\x1b[2;20r", (1, 0)),
        ("\x1b[3;3H\x1b[r", (0, 0)),
        ("\x1b[?6l\x1b[5;5H\x1b[;10r", (0, 0)),
    ],
    # pyte ignored mode 1048.
    "mode 1048 saves and restores the cursor": [
        ("\x1b[2;2H", (1, 1)),
        ("\x1b[?1048h", (1, 1)),
        ("\x1b[5;5H", (4, 4)),
        ("\x1b[?1048l", (1, 1)),
    ],
}


def open_80x25(engine: str, replies: list[bytes] | None = None) -> Terminal:
    return open_terminal(
        COLS,
        ROWS,
        scrollback_lines=1000,
        scrollback_bytes=1 << 20,
        on_reply=(replies.append if replies is not None else lambda _: None),
        emulator=engine,
    )


def push(term: Terminal, output: str, *, bytewise: bool = False) -> tuple[int, int]:
    data = output.encode()
    for chunk in [data[i : i + 1] for i in range(len(data))] if bytewise else [data]:
        term.feed(chunk)
        term.process(float("inf"))
    assert term.idle
    cursor = term.current_screen().cursor
    return cursor.y, cursor.x


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("bytewise", [False, True], ids=["whole", "bytewise"])  # every sequence split
@pytest.mark.parametrize("case", sorted(CURSOR_CASES))
def test_cursor_moves_as_in_xterm(case: str, bytewise: bool, engine: str) -> None:
    term = open_80x25(engine)
    for i, (output, expected) in enumerate(CURSOR_CASES[case]):
        assert push(term, output, bytewise=bytewise) == expected, (i, output)


@pytest.mark.parametrize("engine", ENGINES)
def test_scrolling_a_region_keeps_the_rows_outside_it(engine: str) -> None:
    term = open_80x25(engine)
    push(term, "\x1b[2;4r\x1b[1;1Htop\x1b[5;1Hbelow\x1b[2;1Ha\r\nb\r\nc\r\nd")
    assert term.current_screen().visible_rows()[:5] == ["top", "b", "c", "d", "below"]


@pytest.mark.parametrize("engine", ENGINES)
def test_a_tab_stop_cleared_by_tbc_is_cleared_for_text(engine: str) -> None:
    term = open_80x25(engine)
    push(term, "\x1b[9G\x1b[g\ra\tb\x1b[3g\r\nc\td")
    assert term.current_screen().visible_rows()[:2] == ["a" + " " * 15 + "b", "c" + " " * 78 + "d"]


# (set-up output, query, answer): DECRQM (xterm's DECRPM: 0 unknown, 1 set, 2 reset) and DECRQSS (1: valid).
REPORTS = [
    ("", "\x1b[?7$p", "\x1b[?7;1$y"),  # DECAWM, set at start
    ("\x1b[?7l", "\x1b[?7$p", "\x1b[?7;2$y"),
    ("", "\x1b[?25$p", "\x1b[?25;1$y"),
    ("", "\x1b[?1$p", "\x1b[?1;2$y"),
    ("\x1b[?1h", "\x1b[?1$p", "\x1b[?1;1$y"),
    ("\x1b[?6h", "\x1b[?6$p", "\x1b[?6;1$y"),
    ("", "\x1b[?5$p", "\x1b[?5;2$y"),
    ("", "\x1b[4$p", "\x1b[4;2$y"),
    ("\x1b[4h", "\x1b[4$p", "\x1b[4;1$y"),
    ("", "\x1b[20$p", "\x1b[20;2$y"),
    ("\x1b[?1049h", "\x1b[?1049$p", "\x1b[?1049;1$y"),
    ("\x1b[?1049h", "\x1b[?47$p", "\x1b[?47;2$y"),
    ("\x1b[?1049h\x1b[?1049l", "\x1b[?1049$p", "\x1b[?1049;2$y"),
    ("", "\x1b[?2004$p", "\x1b[?2004;2$y"),
    ("\x1b[?2004h", "\x1b[?2004$p", "\x1b[?2004;1$y"),
    ("", "\x1b[?2026$p", "\x1b[?2026;2$y"),
    ("\x1b[?1000h\x1b[?1006h", "\x1b[?1006$p", "\x1b[?1006;1$y"),
    ("", "\x1b[?9999$p", "\x1b[?9999;0$y"),
    ("", "\x1b[99$p", "\x1b[99;0$y"),
    ("", "\x1bP$qm\x1b\\", "\x1bP1$r0m\x1b\\"),
    ("\x1b[1;4;7m", "\x1bP$qm\x1b\\", "\x1bP1$r0;1;4;7m\x1b\\"),
    ("\x1b[3;31;44m", "\x1bP$qm\x1b\\", "\x1bP1$r0;3;31;44m\x1b\\"),
    ("\x1b[1;95;102m\x1b[22m", "\x1bP$qm\x1b\\", "\x1bP1$r0;95;102m\x1b\\"),
    ("", "\x1bP$qr\x1b\\", "\x1bP1$r1;25r\x1b\\"),
    ("\x1b[2;4r", "\x1bP$qr\x1b\\", "\x1bP1$r2;4r\x1b\\"),
    ("", '\x1bP$q"p\x1b\\', "\x1bP0$r\x1b\\"),  # DECSCL: neither engine keeps it
]
# Where the engines word the same state otherwise: Ghostty writes extended colours in the ":" form, pyte in the
# ";" form its own parser reads back (the sanitizer drops ":" SGR), and as RGB (it keeps 256 colours as RGB).
# DECSCUSR is Ghostty's; the pyte engine drops it unread.
ENGINE_REPORTS = {
    "ghostty": [
        ("\x1b[38;5;196m", "\x1bP$qm\x1b\\", "\x1bP1$r0;38:5:196m\x1b\\"),
        ("\x1b[48;2;1;2;3m", "\x1bP$qm\x1b\\", "\x1bP1$r0;48:2::1:2:3m\x1b\\"),
        ("\x1b[4 q", "\x1bP$q q\x1b\\", "\x1bP1$r4 q\x1b\\"),
    ],
    "pyte": [
        ("\x1b[38;5;196m", "\x1bP$qm\x1b\\", "\x1bP1$r0;38;2;255;0;0m\x1b\\"),
        ("\x1b[48;2;1;2;3m", "\x1bP$qm\x1b\\", "\x1bP1$r0;48;2;1;2;3m\x1b\\"),
        ("\x1b[4 q", "\x1bP$q q\x1b\\", "\x1bP0$r\x1b\\"),
    ],
}


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("bytewise", [False, True], ids=["whole", "bytewise"])
@pytest.mark.parametrize(("setup", "query", "answer"), REPORTS)
def test_state_reports_are_truthful(setup: str, query: str, answer: str, bytewise: bool, engine: str) -> None:
    replies: list[bytes] = []
    push(open_80x25(engine, replies), setup + query, bytewise=bytewise)
    assert replies == [answer.encode()]


@pytest.mark.parametrize("engine", ENGINES)
def test_state_reports_worded_per_engine(engine: str) -> None:
    for setup, query, answer in ENGINE_REPORTS[engine]:
        replies: list[bytes] = []
        push(open_80x25(engine, replies), setup + query)
        assert replies == [answer.encode()], (setup, query)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_report_describes_the_state_at_its_query_not_at_the_chunk_end(engine: str) -> None:
    """The pyte engine filters a whole chunk before drawing it: the answer must still be the state at the query."""
    replies: list[bytes] = []
    push(open_80x25(engine, replies), "\x1b[?2004h\x1b[?2004$p\x1b[?2004l\x1b[?2004$p\x1b[1m\x1bP$qm\x1b\\\x1b[m")
    assert replies == [b"\x1b[?2004;1$y", b"\x1b[?2004;2$y", b"\x1bP1$r0;1m\x1b\\"]
