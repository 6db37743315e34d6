"""The renderer on bytes, no daemon: sanitizer, screen, scrollback, viewport bound, and the fast path against pyte.

Every test runs on each engine this machine has (ghostty where pyghostty imports, pyte always). Where the engines
render otherwise by design, the test says which does what and why; tests of pyte's own machinery (the sanitizer's
carry, the fast path) run on pyte only.
"""

from __future__ import annotations

import contextlib
import re
import sys
from collections.abc import Iterator
from unittest import mock

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from conftest import skip_expected
from ptyd.terminal import reports
from ptyd.terminal.capture import HeadCapture
from ptyd.terminal.engines import native_available, open_terminal
from ptyd.terminal.engines.pyte import engine as pyte_engine
from ptyd.terminal.engines.pyte.sanitize import MAX_CARRY
from ptyd.terminal.keys import encode as encode_keys
from ptyd.terminal.scrollback import LINE_OVERHEAD, WIDE_LINE_OVERHEAD, Scrollback, line_cost
from ptyd.terminal.viewport import bound

ENGINES = ["ghostty", "pyte"] if native_available() else ["pyte"]


class Term:
    """A Terminal plus what it answered, fed whole chunks and rendered to the end after each."""

    engine = "pyte"  # set per test by the ``engine`` fixture

    def __init__(self, cols: int = 20, rows: int = 5, *, lines: int = 1000, max_bytes: int = 1 << 20) -> None:
        self.replies: list[bytes] = []
        self.t = open_terminal(
            cols,
            rows,
            scrollback_lines=lines,
            scrollback_bytes=max_bytes,
            on_reply=self.replies.append,
            emulator=self.engine,
        )
        assert self.t.engine == self.engine

    def feed(self, *chunks: bytes | str) -> Term:
        for chunk in chunks:
            self.t.feed(chunk.encode() if isinstance(chunk, str) else chunk)
            self.t.process(float("inf"))
        assert self.t.idle
        return self

    @property
    def rows(self) -> list[str]:
        return self.t.current_screen().visible_rows()

    @property
    def text(self) -> str:
        """The visible rows, trailing blank rows removed."""
        return "\n".join(self.t.visible_rows())

    @property
    def cursor(self) -> tuple[int, int]:
        return self.t.current_screen().cursor.x, self.t.current_screen().cursor.y

    @property
    def scrollback(self) -> list[str]:
        sb = self.t.scrollback
        return sb.lines(sb.first, sb.total)

    def transcript(self) -> list[str]:
        return self.t.transcript(self.t.scrollback.first, self.t.total_lines)


@pytest.fixture(autouse=True, params=ENGINES)
def engine(request: pytest.FixtureRequest) -> Iterator[str]:
    Term.engine = request.param
    yield request.param
    Term.engine = "pyte"


def pyte_only(engine: str) -> None:
    if engine != "pyte":
        skip_expected("pyte's own machinery")


# Replies to device-attribute queries: both identify as a VT2xx-class xterm-compatible terminal.
DA1 = {"ghostty": b"\x1b[?62;22c", "pyte": b"\x1b[?6c"}
DA2 = {"ghostty": b"\x1b[>1;0;0c", "pyte": b"\x1b[>1;10;0c"}


def state(term: Term) -> tuple[object, ...]:
    t = term.t
    return (
        term.rows,
        term.cursor,
        t.alt_screen,
        t.scrollback.first,
        t.scrollback.total,
        term.transcript(),
        term.replies,
    )


# --- sanitizer ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "payload",
    [
        "\x1bPq#0;2;0;0;0#1;2;100;100;0#1~~@@vv\x1b\\",  # DCS (sixel)
        "\x1b_Gf=24,s=10,v=20;AAAAAAAA\x1b\\",  # APC (kitty graphics)
        "\x1b^private message\x1b\\",  # PM
        "\x1bXstart of string\x1b\\",  # SOS
        "\x1bP$q m\x1b\\",  # DECRQSS
    ],
)
def test_string_payloads_are_not_drawn(payload: str) -> None:
    assert Term().feed("a" + payload + "b").text == "ab"


@pytest.mark.parametrize(
    "sequence",
    ["\x1b[4:3m", "\x1b[38:2::10:20:30m", "\x1b[58:5:196m", "\x1b[<u", "\x1b[=5u", "\x1b[>1u", "\x1b[?u", "\x1b[2 q"],
)
def test_sequences_pyte_misparses_draw_nothing(sequence: str) -> None:
    assert Term().feed("a" + sequence + "b").text == "ab"


def test_modify_other_keys_does_not_turn_underline_on(engine: str) -> None:
    term = Term().feed("\x1b[>4;2mx")
    assert term.text == "x"
    if engine == "pyte":
        assert not term.t.current_screen().cursor.attrs.underscore  # type: ignore[attr-defined]


def test_escape_with_unknown_intermediate_draws_nothing() -> None:
    # pyte would dispatch ESC SP and then draw the final "F" (S7C1T), or "0" of a G2 designation.
    assert Term().feed("a\x1b Fb\x1b*0c\x1b+Bd").text == "abcd"


def test_unterminated_osc_is_bounded_and_output_resumes_after_its_terminator(engine: str) -> None:
    term = Term()
    term.feed("before\x1b]0;")
    for _ in range(256):
        term.feed("x" * 4096)
        if engine == "pyte":  # memory stays bounded while the string lasts
            assert len(term.t._sanitizer._carry) <= MAX_CARRY  # type: ignore[attr-defined]
    term.feed("\x07after")
    assert term.text == "beforeafter"


@pytest.mark.parametrize("final", ["m", "H", "J", "r"])
def test_digit_runs_past_the_int_limit_do_not_raise(final: str, engine: str) -> None:
    digits = "9" * 5000  # CPython refuses int() of more than 4300 digits
    # pyte's sanitizer drops such a sequence; Ghostty saturates the number, so CUP goes to the last row
    expected = "a\n\n\n\nb" if engine == "ghostty" and final == "H" else "ab"
    assert Term().feed("a\x1b[" + digits + final + "b").text == expected
    term = Term().feed("a\x1b[" + digits[:2500], digits[2500:] + final + "b")
    assert term.text == expected


def test_overlong_csi_split_across_chunks_is_discarded_whole() -> None:
    term = Term()
    term.feed("a\x1b[" + "1;" * 3000)  # longer than the carry: discarded until its final byte
    term.feed("1;" * 100 + "mb")
    assert term.text == "ab"


def test_secondary_device_attributes_and_colour_queries_are_answered(engine: str) -> None:
    term = Term().feed("\x1b[>c", "\x1b[>0c", "\x1b]10;?\x07", "\x1b]11;?\x1b\\")
    assert term.replies[0] == term.replies[1] == DA2[engine]
    # Ghostty ends the answer as the query ended (BEL here), as xterm does; the sanitizer always uses ST
    end = rb"\x07" if engine == "ghostty" else rb"\x1b\\"
    assert re.fullmatch(rb"\x1b\]10;rgb:[0-9a-f]{4}/[0-9a-f]{4}/[0-9a-f]{4}" + end, term.replies[2])
    assert re.fullmatch(rb"\x1b\]11;rgb:[0-9a-f]{4}/[0-9a-f]{4}/[0-9a-f]{4}\x1b\\", term.replies[3])
    assert term.text == ""


def test_primary_device_attributes_and_status_are_answered(engine: str) -> None:
    assert Term().feed("\x1b[c", "\x1b[5n").replies == [DA1[engine], b"\x1b[0n"]


def test_queries_are_answered_in_their_order(engine: str) -> None:
    term = Term(20, 5).feed("ab\x1b[6n\x1b[>c\x1b[c\x1b]11;?\x07\x1b[5n\x1b]10;?\x1b\\\x1b[2;2H\x1b[6n")
    assert [r[:4] for r in term.replies] == [
        b"\x1b[1;",
        b"\x1b[>1",
        DA1[engine][:4],
        b"\x1b]11",
        b"\x1b[0n",
        b"\x1b]10",
        b"\x1b[2;",
    ]
    assert term.replies[0] == b"\x1b[1;3R"
    assert term.replies[-1] == b"\x1b[2;2R"


def test_size_cursor_and_capability_queries_are_answered_in_order(engine: str) -> None:
    """What neither engine answers itself (``reports``): unanswered, a program waits out its own timeout."""
    term = Term(20, 5).feed("ab\x1b[18t", "\x1b[14t\x1b[6n\x1b[16t\x1b[19t", "\x1b[?6n", "\x1bP+q544e;636f\x1b\\\x1b[c")
    assert term.replies == [
        b"\x1b[8;5;20t",
        b"\x1b[4;80;160t",
        b"\x1b[1;3R",
        b"\x1b[6;16;8t",
        b"\x1b[9;5;20t",
        b"\x1b[?1;3;1R",
        b"\x1bP0+r544e;636f\x1b\\",
        DA1[engine],
    ]
    assert term.text == "ab"
    term.t.resize(30, 6)
    assert term.feed("\x1b[18t").replies[-1] == b"\x1b[8;6;30t"
    # An answer is the program's input: a capability name that is not hex is not echoed back (it could be a
    # command line a hostile file types into the shell when catted).
    term.feed("\x1bP+q\nrm -rf x\n\x1b\\")
    assert not any(b"rm" in reply for reply in term.replies)


@pytest.mark.parametrize(
    ("output", "query"),
    [
        (b"x\x1b[6n", True),
        (b"\x1b[>c", True),
        (b"\x1b[18t", True),
        (b"\x1b[?u", True),
        (b"\x1b[?2026$p", True),
        (b"\x1b[>q", True),
        (b"\x1b]11;?\x07", True),
        (b"x\x1b]52;c;?\x07", True),
        (b"\x1bP+q544e\x1b\\", True),
        (b"\x1b[6nx", False),  # drawn after: not waiting for it
        (b"\x1b[8;24;80t", False),  # a resize, not a report
        (b"\x1b[u", False),  # restore cursor
        (b"\x1b[2 q", False),  # cursor style
        (b"\x1b]0;title\x07", False),
        (b"\x1b[2J\x1b[1;1H", False),
    ],
)
def test_output_that_ends_in_a_query_is_told_apart(output: bytes, query: bool) -> None:
    assert reports.ends_in_query(output) is query


def test_application_cursor_keys_mode_is_seen_and_survives_a_handover(engine: str) -> None:
    term = Term(20, 5)
    assert term.t.app_cursor_keys is False
    term.feed("\x1b[?1h\x1b=")  # what ncurses' keypad() sends (smkx)
    assert term.t.app_cursor_keys is True
    restored = Term(20, 5)
    restored.t.restore(term.t.snapshot())
    assert restored.t.app_cursor_keys is True
    assert term.feed("\x1b[?1l").t.app_cursor_keys is False


def test_soft_wraps_on_the_screen_survive_a_handover(engine: str) -> None:
    """A snapshot redraws a wrapped row by writing it to its last column: the restored terminal wraps it again.
    The main screen under the alternate one keeps its flags too; scrollback's lines are text only."""
    term = Term(20, 6).feed("a" * 19 + " " + "b" * 25 + "\r\n" + "c" * 20 + "\r\nd" + "e" * 20)
    screen_wraps = term.t.wraps(term.t.scrollback.total, term.t.total_lines)
    assert len(screen_wraps) == 3
    restored = Term(20, 6)
    restored.t.restore(term.t.snapshot())
    assert restored.rows == term.rows
    assert restored.t.wraps(restored.t.scrollback.total, restored.t.total_lines) == screen_wraps
    term.feed("\x1b[?1049h\x1b[Hfull screen")
    under = Term(20, 6)
    under.t.restore(term.t.snapshot())
    assert under.t.alt_screen
    assert under.t.wraps(0, under.t.total_lines) == term.t.wraps(0, term.t.total_lines) == screen_wraps
    assert under.feed("\x1b[?1049l").t.wraps(0, under.t.total_lines) == screen_wraps


@pytest.mark.parametrize("fill", ["━", "⠋", "é", "日", "✔\ufe0f", "ж│"])
def test_rows_of_narrow_symbols_wrap_and_wide_ones_too(fill: str, engine: str) -> None:
    # Rows that are not ASCII are asked of the engine whenever they may be as wide as the screen: a row of braille
    # or box drawing is as wide as it is long, one of CJK or emoji twice that.
    term = Term(40, 8).feed(fill * 100 + "\r\nshort " + fill * 3 + "\r\n")
    found = term.t.wraps(term.t.scrollback.total, term.t.total_lines)
    cells = 2 if fill in ("日", "✔\ufe0f") else len(fill)
    assert len(found) == -(-100 * cells // 40) - 1


@pytest.mark.parametrize(
    ("keys", "normal", "application"),
    [
        (["Up", "Down", "Right", "Left"], "\x1b[A\x1b[B\x1b[C\x1b[D", "\x1bOA\x1bOB\x1bOC\x1bOD"),
        (["home", "END"], "\x1b[H\x1b[F", "\x1bOH\x1bOF"),
        (["C-Left", "S-Up", "M-Right", "C-M-S-Down"], "\x1b[1;5D\x1b[1;2A\x1b[1;3C\x1b[1;8B", None),
        (["F1", "F4", "F5", "F12", "C-F5", "S-F1"], "\x1bOP\x1bOS\x1b[15~\x1b[24~\x1b[15;5~\x1b[1;2P", None),
        (["PageUp", "PgDn", "Delete", "Insert", "C-Delete"], "\x1b[5~\x1b[6~\x1b[3~\x1b[2~\x1b[3;5~", None),
        (["Enter", "Tab", "S-Tab", "BTab", "Escape", "Space", "Backspace"], "\r\t\x1b[Z\x1b[Z\x1b \x7f", None),
        (["C-c", "C-D", "C-[", "C-@", "C-Space", "C-?", "M-x", "M-Enter", "S-a", "q", "-", "é"], None, None),
    ],
)
def test_named_keys_are_encoded_for_the_cursor_mode(
    keys: list[str], normal: str | None, application: str | None
) -> None:
    if normal is None:
        normal = "\x03\x04\x1b\x00\x00\x7f\x1bx\x1b\rAq-é"
    assert encode_keys(keys, app_cursor=False) == normal
    assert encode_keys(keys, app_cursor=True) == (application or normal)


@pytest.mark.parametrize("key", ["Down2", "C-1", "C-Enter", "", "M-", "Hyper-a", "ctrl-c"])
def test_an_unknown_key_is_refused_by_name(key: str) -> None:
    with pytest.raises(ValueError) as err:
        encode_keys(["Up", key], app_cursor=False)
    assert (repr(key) if key else "an empty key") in str(err.value)


def test_a_program_cannot_forge_the_sanitizer_answer_marker(engine: str) -> None:
    term = Term().feed("a\x1b[y\x1b[5yb", "\x1b[>c")
    assert term.replies == [DA2[engine]]
    assert term.text == "ab"


def test_c1_controls_start_no_sequence() -> None:
    # U+009B is CSI as an 8-bit control; in UTF-8 text it is ignored (as xterm does), never a sequence start.
    assert Term().feed("a\u009b31mb\u009d0;t\u0007c\u0085d").text == "a31mb0;tcd"
    assert Term().feed(b"a\x9b31mb").text == "a\ufffd31mb"  # a raw 0x9b byte is invalid UTF-8


def test_osc_title_is_not_drawn(engine: str) -> None:
    # OSC 133;A (a prompt starts) is a fresh line in Ghostty, as in terminals with shell integration.
    expected = "abcd\ne" if engine == "ghostty" else "abcde"
    assert Term().feed("a\x1b]0;title\x07b\x1b]2;other\x1b\\c\x1b]8;;http://x\x1b\\d\x1b]133;A\x07e").text == expected


def test_window_title_is_kept_and_other_osc_strings_leave_it() -> None:
    term = Term().feed("\x1b]0;first title\x07")
    assert term.t.current_screen().title == "first title"
    term.feed("\x1b]2;second\x1b\\", "\x1b]133;A\x07\x1b]8;;http://x\x1b\\\x1b]7;file:///tmp\x07")
    assert term.t.current_screen().title == "second"
    term.feed("\x1b]2;" + "t" * 10_000 + "\x07")  # over-long titles are dropped, not kept
    assert term.t.current_screen().title == "second"


def test_soft_reset_restores_modes_without_moving_the_cursor(engine: str) -> None:
    term = Term().feed("\x1b[2;4r\x1b[4h\x1b[?7l\x1b[3;5H", "\x1b[!p", "x")
    assert term.cursor == (5, 2)
    term.feed("\x1b[5;1H\r\n" + "y" * 21 + "\x1b[5;1HZ")  # no region (the whole screen scrolls), autowrap, replace
    assert term.rows == ["    x", "", "", "y" * 20, "Z"]
    if engine == "pyte":
        assert term.t.current_screen().fast_forward_ok  # type: ignore[attr-defined]


MIXED = (
    "plain \x1b[1;31mred\x1b[0m \x1b[4:3mcurly\x1b[m 中文 😀 ✔️ e\u0301\r\n"
    "\x1bPq#0;2;0;0;0\x1b\\\x1b_Gf=24;AAAA\x1b\\\x1b]0;title\x07\x1b]2;st\x1b\\\x1b[>c\x1b]10;?\x07"
    "\x1b[<u\x1b[=5u\x1b[>4;2m\x1b(0lqk\x1b(B\x1b[2;3Hmoved\x1b[K\x1b[6n\x1b[!p\x1b[10Cend\x1b 7"
)


def test_a_sequence_split_at_any_byte_renders_as_if_whole() -> None:
    data = MIXED.encode()
    whole = state(Term().feed(data))
    for cut in range(1, len(data)):
        assert state(Term().feed(data[:cut], data[cut:])) == whole, cut


def test_input_fed_one_byte_at_a_time_renders_as_if_whole() -> None:
    data = MIXED.encode()
    assert state(Term().feed(*(data[i : i + 1] for i in range(len(data))))) == state(Term().feed(data))


def test_a_rejected_sequence_does_not_lose_the_rest_of_the_chunk() -> None:
    # Each of these makes a pyte handler raise; pyte would then drop everything after it in the same feed.
    term = Term().feed("a\x1b[4Jb\x1b[3Kc\x1b[1;2;3Hd\x1b[?6h\x1b[5de")
    assert term.text.replace("\n", "").replace(" ", "") == "abcde"


# --- screen ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("enter", "leave"), [("\x1b[?1049h", "\x1b[?1049l"), ("\x1b[?1047h", "\x1b[?1047l"), ("\x1b[?47h", "\x1b[?47l")]
)
def test_alternate_screen_restores_the_main_screen(enter: str, leave: str) -> None:
    term = Term().feed("one\r\ntwo", enter, "\x1b[2J\x1b[Hfull screen\r\nprogram")
    assert term.t.alt_screen
    assert term.text == "full screen\nprogram"
    term.feed(leave)
    assert not term.t.alt_screen
    assert term.text == "one\ntwo"


def test_leaving_1049_restores_the_cursor() -> None:
    term = Term().feed("one\r\ntwo", "\x1b[?1049h\x1b[5;10Hx", "\x1b[?1049l", "!")
    assert term.text == "one\ntwo!"


def test_alternate_screen_output_stays_out_of_the_transcript() -> None:
    term = Term(rows=3).feed("$ vim\r\n", "\x1b[?1049h")
    term.feed("".join(f"tui row {i}\r\n" for i in range(50)))  # scrolling inside the alternate screen
    assert term.t.transcript(0, term.t.total_lines) == ["$ vim", ""]
    term.feed("\x1b[?1049l$ ")
    assert term.scrollback == []
    assert term.transcript() == ["$ vim", "$"]


def test_reset_leaves_the_alternate_screen_and_keeps_the_main_screen_in_scrollback() -> None:
    term = Term().feed("kept\r\n", "\x1b[?1049hTUI", "\x1bc", "after")
    assert not term.t.alt_screen
    assert term.text == "after"
    assert term.scrollback == ["kept"]


@pytest.mark.parametrize("zero_width", ["\u200d", "\ufe0f", "\u200b", "\u2060", "\u0301"])
def test_zero_width_character_keeps_the_rest_of_the_line(zero_width: str, engine: str) -> None:
    term = Term(40).feed(f"ab{zero_width}cd and the rest")
    if engine == "ghostty" and zero_width in "\ufe0f\u200b\u2060":
        # Ghostty drops invisible format characters that join nothing (ZWSP, WJ, VS16 after a letter)
        assert term.text == "abcd and the rest"
    else:
        assert term.text == f"ab{zero_width}cd and the rest"  # kept in its cell: the text reads back as written


def test_emoji_clusters_read_back_as_written() -> None:
    line = "I ❤️ you ✔️ ⚠️ 👨\u200d👩\u200d👧 👍🏽 🇫🇷 done"
    assert Term(60).feed(line).text == line


@pytest.mark.parametrize(
    ("cluster", "width"),
    [
        ("中", 2),
        ("😀", 2),
        ("✔", 1),
        ("✔️", 2),
        ("👨\u200d👩\u200d👧", 2),
        ("👍🏽", 2),
        ("🇫🇷", 2),
        ("e\u0301", 1),
        ("ｱ", 1),
    ],
)
def test_cluster_width(cluster: str, width: int) -> None:
    term = Term(20).feed("[" + cluster)
    assert term.cursor == (1 + width, 0)
    term.feed("\r\x1b[" + str(1 + width) + "C]")  # the cell right after the cluster
    assert term.text == "[" + cluster + "]"


def test_wide_character_that_does_not_fit_wraps_first() -> None:
    term = Term(10).feed("x" * 9 + "中文")
    assert term.rows[:2] == ["x" * 9, "中文"]
    assert term.cursor == (4, 1)


def test_wide_characters_wrap_at_the_screen_edge() -> None:
    term = Term(10).feed("a" + "中" * 10)
    assert term.rows[:3] == ["a" + "中" * 4, "中" * 5, "中"]


def test_vs16_widening_at_the_last_column_keeps_the_cell_narrow(engine: str) -> None:
    term = Term(10).feed("x" * 9 + "✔\ufe0f", "y")
    if engine == "ghostty":  # Ghostty moves the now wide cluster to the next row instead
        assert term.rows[:2] == ["x" * 9, "✔\ufe0fy"]
    else:
        assert term.rows[:2] == ["x" * 9 + "✔\ufe0f", "y"]


def test_overwriting_half_of_a_wide_character_blanks_the_other_half() -> None:
    assert Term(10).feed("中文\rab").text == "ab文"
    assert Term(10).feed("中文\r\x1b[Cx").text == " x文"
    assert Term(10).feed("a中文\r\x1b[2Cx").text == "a x文"


def test_combining_mark_after_the_last_column_does_not_wrap() -> None:
    term = Term(10).feed("x" * 10 + "\u0301\r\nnext")
    assert term.rows[:2] == ["x" * 9 + "x\u0301", "next"]


def test_a_flood_of_combining_marks_stays_bounded() -> None:
    term = Term(10).feed("e" + "\u0301" * 100_000 + "x")
    assert term.text.startswith("e\u0301")
    assert len(term.text) < 100
    assert term.text.endswith("x")


def test_dec_line_drawing() -> None:
    assert Term().feed("\x1b(0lqqk\r\nx  x\r\nmqqj\x1b(B ok").text == "┌──┐\n│  │\n└──┘ ok"


def test_shift_out_alone_does_not_switch_to_line_drawing() -> None:
    assert Term().feed("\x0eqx\x0f").text == "qx"


def test_repeat_scroll_and_ansi_cursor_save() -> None:
    assert Term().feed("ab\x1b[3b").text == "abbbb"
    assert Term().feed("start\x1b[s\r\nmore\x1b[uX").text == "startX\nmore"
    assert Term(rows=3).feed("1\r\n2\r\n3\x1b[S").text == "2\n3"
    assert Term(rows=3).feed("1\r\n2\r\n3\x1b[T").text == "\n1\n2"
    assert Term(30).feed("a\x1b[2Ib\x1b[2Zc").text == "a       c       b"


def test_scroll_up_on_the_main_screen_moves_the_row_to_scrollback() -> None:
    term = Term(rows=3).feed("1\r\n2\r\n3", "\x1b[2S")
    assert term.scrollback == ["1", "2"]


def test_restoring_the_saved_cursor_twice_returns_to_the_same_place() -> None:
    term = Term().feed("ab\x1b7", "\x1b[3;5H1\x1b8", "2\x1b[4;1H\x1b8", "3")
    assert term.rows[0] == "ab3"


def test_column_mode_does_not_resize_the_screen() -> None:
    term = Term(40).feed("keep\x1b[?3h\x1b[?3l")
    assert term.t.cols == 40
    assert term.text == "keep"


@pytest.mark.parametrize(
    ("setup", "reply"),
    [
        ("", b"\x1b[1;1R"),
        ("\x1b[3;7H", b"\x1b[3;7R"),
        ("abc", b"\x1b[1;4R"),
        ("x" * 20, b"\x1b[1;20R"),  # the pending wrap after the last column: still column 20
        ("\x1b[2;4r\x1b[?6h\x1b[2;3H", b"\x1b[2;3R"),  # origin mode: relative to the scroll region
        ("\x1b[?6h\x1b[2;3H", b"\x1b[2;3R"),  # origin mode without a region
        ("\x1b[?1049h\x1b[4;2H", b"\x1b[4;2R"),
        ("\x1b[99;99H", b"\x1b[5;20R"),
    ],
)
def test_cursor_position_report(setup: str, reply: bytes) -> None:
    term = Term(20, 5).feed(setup, "\x1b[6n")
    assert term.replies == [reply]


def test_cursor_position_report_after_a_burst_reflects_the_burst() -> None:
    burst = "".join(f"{i}\r\n" for i in range(5000))  # long enough for the fast path
    term = Term(20, 5).feed(burst + "abc\x1b[6n")
    assert term.replies == [b"\x1b[5;4R"]
    assert term.rows == ["4996", "4997", "4998", "4999", "abc"]


def test_cursor_up_and_down_end_a_pending_wrap() -> None:
    # As tmux renders it: after the last column, CUU/CUD move from the last column; the next text does not wrap.
    term = Term(10, 6).feed("abcdefghij\x1b[BA", "\x1b[4;1Habcdefghij\x1b[AB")
    assert term.rows[:4] == ["abcdefghij", "         A", "         B", "abcdefghij"]


def test_linefeed_keeps_a_pending_wrap(engine: str) -> None:
    term = Term(10, 4).feed("abcdefghij\nX")  # as in tmux: the wrap still happens, on the next row
    if engine == "ghostty":  # Ghostty (and xterm) end the pending wrap at a linefeed
        assert term.rows[:3] == ["abcdefghij", "         X", ""]
    else:
        assert term.rows[:3] == ["abcdefghij", "", "X"]


def test_erasing_the_terminal_scrollback_keeps_the_screen_and_the_transcript() -> None:
    term = Term(rows=3).feed("1\r\n2\r\n3\r\n4", "\x1b[3J")
    assert term.rows == ["2", "3", "4"]
    assert term.transcript() == ["1", "2", "3", "4"]


def test_clear_moves_the_screen_into_scrollback() -> None:
    term = Term(rows=4).feed("one\r\ntwo\r\n$ clear\r\n", "\x1b[H\x1b[2J\x1b[3J", "$ ")
    assert term.scrollback == ["one", "two", "$ clear"]
    assert term.text == "$"
    assert term.transcript() == ["one", "two", "$ clear", "$"]


def test_scroll_region_scrolling_does_not_reach_scrollback() -> None:
    term = Term(rows=5).feed("header\r\n", "\x1b[2;4r\x1b[4;1H", "".join(f"\r\nlog {i}" for i in range(20)), "\x1b[r")
    assert term.scrollback == []
    assert term.rows[0] == "header"
    assert term.rows[1:4] == ["log 17", "log 18", "log 19"]


def test_scroll_region_covering_the_whole_screen_scrolls_into_scrollback() -> None:
    term = Term(rows=3).feed("\x1b[1;3r", "1\r\n2\r\n3\r\n4")
    assert term.scrollback == ["1"]


# --- resize ------------------------------------------------------------------------------------------------


def test_shrinking_keeps_the_cursor_on_screen_and_rows_go_to_scrollback() -> None:
    term = Term(20, 5).feed("1\r\n2\r\n3\r\n4\r\n$ ")
    term.t.resize(20, 2)
    assert term.rows == ["4", "$"]
    assert term.cursor == (2, 1)
    assert term.scrollback == ["1", "2", "3"]
    term.feed("typed")
    assert term.rows == ["4", "$ typed"]
    assert term.transcript() == ["1", "2", "3", "4", "$ typed"]


def test_shrinking_drops_blank_rows_below_the_cursor_first() -> None:
    term = Term(20, 6).feed("$ ")
    term.t.resize(20, 2)
    assert term.scrollback == []
    assert term.rows == ["$", ""]


def test_growing_adds_rows_below() -> None:
    term = Term(10, 2).feed("1\r\n2\r\n3")
    term.t.resize(30, 4)
    assert term.rows == ["2", "3", "", ""]
    term.feed("\r\n" + "x" * 25)
    assert term.rows == ["2", "3", "x" * 25, ""]


def test_narrowing_truncates_rows_and_clamps_the_cursor(engine: str) -> None:
    term = Term(20, 3).feed("0123456789abcdef")
    term.t.resize(8, 3)
    if engine == "ghostty":  # Ghostty reflows the main screen: the cut text wraps onto the next row
        assert term.rows[:2] == ["01234567", "89abcdef"]
        assert term.cursor == (0, 2)
    else:
        assert term.rows[0] == "01234567"
        assert term.cursor == (7, 0)


def test_resize_resets_the_scroll_region(engine: str) -> None:
    term = Term(20, 6).feed("\x1b[2;5r\x1b[5;1H")
    term.t.resize(20, 3)
    term.feed("\r\n\r\n\r\nX")
    if engine == "pyte":
        assert term.t.current_screen().margins is None  # type: ignore[attr-defined]
    assert term.cursor[1] <= 2
    assert "X" in term.text


def test_growing_extends_tab_stops_and_keeps_the_fast_path(engine: str) -> None:
    term = Term(16, 3)
    term.t.resize(40, 3)
    assert term.feed("a\tb\tc\td").text == "a       b       c       d"
    term.t.resize(16, 3)
    if engine == "pyte":
        assert term.t.current_screen().fast_forward_ok  # type: ignore[attr-defined]


def test_shrinking_during_the_alternate_screen_keeps_the_shell_screen() -> None:
    term = Term(20, 5).feed("1\r\n2\r\n3\r\n4\r\n$ vim", "\x1b[?1049h\x1b[HTUI")
    term.t.resize(20, 2)
    assert term.t.cursor_line == term.t.total_lines - 1
    term.feed("\x1b[?1049l")
    assert term.rows == ["4", "$ vim"]
    assert term.scrollback == ["1", "2", "3"]
    assert term.cursor == (5, 1)


# --- scrollback --------------------------------------------------------------------------------------------


def test_scrollback_keeps_the_newest_lines_within_the_line_bound() -> None:
    sb = Scrollback(max_lines=10, max_bytes=1 << 20)
    for i in range(25):
        sb.append(f"line {i}")
    assert (sb.first, sb.total, sb.retained) == (15, 25, 10)
    assert sb.lines(0, 100) == [f"line {i}" for i in range(15, 25)]
    assert sb.lines(20, 22) == ["line 20", "line 21"]


def test_scrollback_keeps_the_newest_lines_within_the_memory_bound() -> None:
    cost = 9 + LINE_OVERHEAD  # an ASCII line of 9 characters
    sb = Scrollback(max_lines=1000, max_bytes=10 * cost)
    sb.extend([f"{i:09d}" for i in range(30)])
    assert sb.bytes <= 10 * cost
    assert sb.lines(0, 100) == [f"{i:09d}" for i in range(20, 30)]
    # 40 non-ASCII characters are counted at 4 bytes each: CPython may store them so.
    sb.append("é" * 40)
    assert sb.bytes == 160 + WIDE_LINE_OVERHEAD + 6 * cost  # four older lines made room
    assert sb.lines(0, 100) == [f"{i:09d}" for i in range(24, 30)] + ["é" * 40]


def test_scrollback_skip_counts_lines_without_keeping_them() -> None:
    sb = Scrollback(max_lines=10, max_bytes=1 << 20)
    sb.extend(["a", "b"])
    sb.skip(1000)
    assert (sb.first, sb.total, sb.retained, sb.bytes) == (1002, 1002, 0, 0)
    sb.append("c")
    assert sb.lines(1002, 1003) == ["c"]
    assert sb.lines(0, 1002) == []


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 20),
    st.integers(1, 200),
    st.lists(st.lists(st.text(st.sampled_from("aé中x"), max_size=12), max_size=40), max_size=30),
)
def test_scrollback_is_a_list_that_drops_its_oldest_lines(
    max_lines: int, max_bytes: int, blocks: list[list[str]]
) -> None:
    sb = Scrollback(max_lines, max_bytes)
    everything: list[str] = []
    for block in blocks:
        sb.extend(block)
        everything.extend(block)
        kept = everything[-max_lines:] if everything else []
        while kept and sum(map(line_cost, kept)) > max_bytes:
            kept.pop(0)
        assert sb.total == len(everything)
        assert sb.first == len(everything) - len(kept)
        assert sb.lines(0, sb.total) == kept
        assert sb.bytes == sum(map(line_cost, kept))


# --- viewport bound ----------------------------------------------------------------------------------------


def test_bound_returns_everything_that_fits() -> None:
    assert bound([], None, ["a", "b", "c"], 7, 256) == ("a\nb\nc", False)


def test_bound_keeps_head_and_tail_and_names_the_omitted_lines() -> None:
    tail = [f"line {i:04d}" for i in range(1000)]
    text, truncated = bound([], None, tail, 500, 2000)
    assert truncated
    assert len(text.encode()) <= 2000
    out = text.split("\n")
    marker = next(i for i, line in enumerate(out) if line.startswith("[..."))
    m = re.fullmatch(
        r"\[\.\.\. (\d+) lines omitted: terminal_read start_line=(\d+) max_lines=\d+ \.\.\.\]", out[marker]
    )
    assert m is not None
    omitted, start = map(int, m.groups())
    assert out[:marker] == tail[:marker]
    assert start == 500 + marker
    assert out[marker + 1 :] == tail[marker + omitted :]
    assert out[-1] == "line 0999"


def test_bound_cuts_utf8_at_a_character_boundary() -> None:
    text, truncated = bound([], None, ["中" * 5000], 0, 1000)
    assert truncated
    assert len(text.encode()) <= 1000
    marker, cut = text.split("\n")
    assert "1 lines omitted: terminal_read start_line=0" in marker
    head, count, tail = re.fullmatch(r"(中+)\[\.\.\. (\d+) characters cut \.\.\.\](中+)", cut).groups()  # type: ignore[union-attr]
    assert len(head) + int(count) + len(tail) == 5000  # both ends kept whole, no half character at either cut


def test_bound_of_one_huge_line_keeps_its_end() -> None:
    line = "".join(f"{i:08d}" for i in range(10_000))
    text, _ = bound([], None, ["first", line], 10, 4096)
    assert len(text.encode()) <= 4096
    assert text.endswith(line[-1000:])
    assert text.startswith("first\n[... 1 lines omitted: terminal_read start_line=11")


def test_bound_with_a_gap_says_the_lines_are_gone() -> None:
    head = ["$ make", "building a"]
    text, truncated = bound(head, (12, 5000), ["done", "$"], 5000, 1024)
    assert truncated
    marker = (
        "[... 4988 lines omitted: terminal_read start_line=12 max_lines=4988"
        " (lines before 5000 are no longer retained) ...]"
    )
    assert text == "\n".join(["$ make", "building a", marker, "done", "$"])


@settings(max_examples=80, deadline=None)
@given(st.lists(st.text(st.sampled_from("ab中😀 "), max_size=300), max_size=60), st.integers(256, 3000))
def test_bound_never_exceeds_the_budget_and_drops_only_the_marked_lines(lines: list[str], max_bytes: int) -> None:
    text, truncated = bound([], None, lines, 100, max_bytes)
    assert len(text.encode()) <= max_bytes
    if not truncated:
        assert text == "\n".join(lines)
        return
    out = text.split("\n")
    marker = next(i for i, line in enumerate(out) if line.startswith("[... "))
    m = re.search(r"(\d+) lines omitted: terminal_read start_line=(\d+)", out[marker])
    assert m is not None
    omitted, start = int(m.group(1)), int(m.group(2))
    assert out[:marker] == lines[:marker]
    assert start == 100 + marker
    after = out[marker + 1 :]
    resume = marker + omitted
    if len(after) == len(lines) - resume:
        assert after == lines[resume:]
    else:  # the first line after the marker is the end of a cut line
        assert lines[resume - 1].endswith(after[0])
        assert after[1:] == lines[resume:]


# --- the fast path renders what pyte renders ---------------------------------------------------------------


def render_all(term: Term, chunks: list[bytes], *, fast: bool) -> Term:
    with contextlib.ExitStack() as stack:
        if not fast:  # every chunk is then "too short" for the fast path: the emulator renders all of it
            stack.enter_context(mock.patch.object(pyte_engine, "_FAST_MIN_CHARS", sys.maxsize))
            if term.engine == "ghostty":
                from ptyd.terminal.engines.ghostty import output as ghostty_output

                stack.enter_context(mock.patch.object(ghostty_output, "FAST_MIN_BYTES", sys.maxsize))
        term.feed(*chunks)
    return term


def count_emulated(term: Term) -> list[int]:
    """Counts what goes through the emulator itself (pyte, or Ghostty), fast path aside."""
    fed = [0]
    if term.engine == "ghostty":
        write = term.t._write  # type: ignore[attr-defined]

        def counting_write(data: bytes, *, harvest: bool = True) -> None:
            fed[0] += len(data)
            write(data, harvest=harvest)

        term.t._write = counting_write  # type: ignore[attr-defined]
        return fed
    feed = term.t._stream.feed  # type: ignore[attr-defined]

    def counting(text: str) -> None:
        fed[0] += len(text)
        feed(text)

    term.t._stream.feed = counting  # type: ignore[attr-defined]
    return fed


def test_head_capture_of_a_burst_beyond_scrollback_is_contiguous() -> None:
    term = Term(80, 24, lines=100)
    term.t.capture = HeadCapture(0, 100_000)
    term.feed("".join(f"{i}\r\n" for i in range(50_000)))
    captured = term.t.capture.lines
    assert len(captured) > 1000
    assert captured == [str(i) for i in range(len(captured))]
    assert term.t.capture.end_line == len(captured)


def test_a_burst_of_plain_lines_mostly_bypasses_the_emulator() -> None:
    data = "".join(f"{i}\r\n" for i in range(20_000)).encode()
    term = Term(80, 24, lines=500)
    fed = count_emulated(term)
    render_all(term, [data], fast=True)
    assert fed[0] < len(data) // 20
    assert state(term) == state(render_all(Term(80, 24, lines=500), [data], fast=False))


ascii_text = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=30)
bursts = st.one_of(  # long runs of plain lines: what the fast path takes
    st.lists(st.one_of(ascii_text, st.text(st.sampled_from("ab "), max_size=90)), min_size=100, max_size=400).map(
        lambda ls: "".join(f"{s}\r\n" for s in ls)
    ),
    st.integers(150, 1500).map(lambda n: "".join(f"\x1b[3{n % 8}m{i}\x1b[0m\r\n" for i in range(n))),
    # tree-style lines: box drawing, accents, wide CJK and emoji (the native engine's fast path takes them), now
    # and then a combining mark or a joiner (it must not).
    st.lists(st.text(st.sampled_from("aé日😀│├ ─жß"), max_size=6), min_size=600, max_size=1200).map(
        lambda ls: "".join(f"{s}\r\n" for s in ls)
    ),
    st.lists(st.text(st.sampled_from("aé日│ \u0301\u200d"), max_size=5), min_size=600, max_size=900).map(
        lambda ls: "".join(f"{s}\r\n" for s in ls)
    ),
    # CRLF text through a tty that adds its own CR (`cat` of a CRLF file): CR CR LF.
    st.lists(st.text(st.sampled_from("a日│ "), max_size=6), min_size=600, max_size=1200).map(
        lambda ls: "".join(f"{s}\r\r\n" for s in ls)
    ),
    # Short lines, trailing blanks and colour left set: what a narrow screen's fast path takes.
    st.lists(st.text(st.sampled_from("ab \x1b[1m"), max_size=7), min_size=600, max_size=1200).map(
        lambda ls: "".join(f"{s.replace(chr(27), '')}\r\n".replace("[1m", "\x1b[1m") for s in ls)
    ),
)
pieces = st.one_of(
    ascii_text.map(lambda s: s + "\r\n"),
    st.text(st.sampled_from("abc "), min_size=30, max_size=130).map(lambda s: s + "\r\n"),  # long lines, wrapped
    st.sampled_from(["\x1b[31m", "\x1b[0m", "\x1b[1;4;38;5;200m", "\x1b[m", "\x1b[7mrev\x1b[27m"]),
    st.tuples(ascii_text, ascii_text).map(lambda ab: f"{ab[0]}\r{ab[1]}\r\n"),  # CR overlays
    st.sampled_from(["\t", "a\tb\r\n", "\x08", "\r", "\n", " \r\n", "  \r\n"]),
    st.sampled_from(["\x1b[A", "\x1b[3B", "\x1b[2C", "\x1b[D", "\x1b[H", "\x1b[2;3H", "\x1b[K", "\x1b[1K", "\x1b[J"]),
    st.sampled_from(["\x1b[2J", "\x1b[2;4r", "\x1b[r", "\x1b[?1049h", "\x1b[?1049l", "\x1b[?7l", "\x1b[?7h"]),
    st.sampled_from(["é", "中文", "😀", "✔️", "e\u0301", "👨\u200d👩", "naïve\r\n", "日本語のテキスト\r\n"]),
)


@st.composite
def sessions(draw: st.DrawFn, floods: bool = False) -> tuple[int, int, int, int, int, list[bytes]]:
    cols = draw(st.integers(8, 40))
    rows = draw(st.integers(2, 10))
    max_lines = draw(st.integers(5, 300))
    max_bytes = draw(st.integers(200, 100_000))
    capture_bytes = draw(st.integers(0, 20_000))
    if floods:  # runs of lines only, each a chunk of its own, as a program flooding the PTY delivers them
        parts = draw(st.lists(bursts, min_size=1, max_size=4))
        return cols, rows, max_lines, max_bytes, capture_bytes, [part.encode() for part in parts]
    parts = draw(st.lists(st.one_of(pieces, pieces, bursts), min_size=1, max_size=16))
    data = "".join(parts).encode()
    cuts = sorted(draw(st.lists(st.integers(0, len(data)), max_size=4)))
    chunks = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True) if b > a]
    return cols, rows, max_lines, max_bytes, capture_bytes, chunks


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.one_of(sessions(), sessions(floods=True)))
def test_fast_path_renders_what_the_emulator_renders(session: tuple[int, int, int, int, int, list[bytes]]) -> None:
    cols, rows, max_lines, max_bytes, capture_bytes, chunks = session
    fast = Term(cols, rows, lines=max_lines, max_bytes=max_bytes)
    slow = Term(cols, rows, lines=max_lines, max_bytes=max_bytes)
    for term in (fast, slow):
        term.t.capture = HeadCapture(0, capture_bytes)  # a send's head, kept even where scrollback drops it
    fed = count_emulated(fast)
    render_all(fast, chunks, fast=True)
    render_all(slow, chunks, fast=False)
    event("fast path taken" if fed[0] < sum(map(len, chunks)) - 1000 else "fast path not taken")
    assert state(fast) == state(slow)
    assert (fast.t.total_lines, fast.t.cursor_line) == (slow.t.total_lines, slow.t.cursor_line)
    assert fast.t.capture is not None
    assert slow.t.capture is not None
    assert (fast.t.capture.lines, fast.t.capture.end_line) == (slow.t.capture.lines, slow.t.capture.end_line)


@pytest.mark.parametrize("cols", [37, 80, 160, 300])
def test_a_flood_of_non_ascii_lines_reaches_the_transcript_whole(cols: int) -> None:
    # Ghostty's history holds a page of rows: every row must be copied out before it is dropped, at any width.
    lines = [f"日本語 é ü 🎉 {i}" for i in range(3000)]
    data = "".join(line + "\r\n" for line in lines).encode()
    term = Term(cols, 40, lines=10_000, max_bytes=64 << 20).feed(
        *(data[i : i + 4096] for i in range(0, len(data), 4096))
    )
    assert term.transcript() == [*lines, ""]


def unbounded_history(term: Term) -> Term:
    """``term`` with a Ghostty history far larger than any test's output: no row is ever dropped, nothing is cut."""
    from ptyd.terminal.engines.ghostty import engine as ghostty_engine
    from ptyd.terminal.engines.ghostty import history as ghostty_history

    t = term.t
    assert isinstance(t, ghostty_engine.GhosttyTerminal)
    ghostty_history.set_size(t._handle, ghostty_history.lib.GHOSTTY_TERMINAL_OPT_SCROLLBACK_MAX_BYTES, 1 << 30)
    t._history_rows = 1 << 30
    return term


SCROLLERS = {  # output that scrolls many rows for its size, each past the plain count of linefeeds
    "cursor-forward wraps": "".join(f"\x1b[999C{i % 10}{i % 7}" for i in range(6000)),
    "tab wraps": "".join("\t" * 40 + f"{i}" for i in range(3000)),
    "bare linefeeds": "".join(f"{'x' * (i % 50)}\n{'y' * 290}" for i in range(3000)),
    "index and next line": "".join(f"{i}\x1bD\x1bE" for i in range(5000)),
    "index among colour": "".join(f"\x1b[3{i % 8}mDone {i}\x1b[0mEnd\x1bD" for i in range(5000)),
    "scroll up": "".join(f"{i}\x1b[50S\x1b[999S" for i in range(300)),
    "repeat": "".join(f"{i % 10}\x1b[65535b\r\n" for i in range(20)),
    "wrapped long lines": "".join(f"{i}:" + "é" * 700 + "\r\n" for i in range(1000)),
    # Only SGR among them: counted by runs between CRs (``max_scrolls``' printed bound).
    "coloured runs that wrap": "".join(f"\r\x1b[3{i % 8}m{'x' * (i * 37 % 700)}\x1b[0m" for i in range(3000)),
    "coloured bare linefeeds": "".join(f"\x1b[1m{'x' * (i % 50)}\x1b[m\n\x1b[32;1m{'y' * 290}" for i in range(3000)),
    "coloured redraws": "".join(
        f"\r\x1b[32m⠋\x1b[0m {i} \x1b[35m{'━' * (i % 90)}\x1b[0m" + "\r\n" * (i % 7 == 0) for i in range(20000)
    ),
    "coloured wide": "".join(f"\x1b[38;2;1;2;3m{'日本' * (i % 200)}\x1b[0m\r\n" for i in range(1500)),
    "tabs among colour": "".join("\x1b[31m\t\x1b[m" * 40 + f"{i}\r" for i in range(3000)),
    "colour, margins mode on": "\x1b[?69h" + "".join(f"\r\x1b[3{i % 8}m{'x' * (i * 37 % 700)}" for i in range(3000)),
}


@pytest.mark.parametrize("kind", SCROLLERS)
@pytest.mark.parametrize("size", [(300, 100), (160, 40), (37, 10)])
def test_no_scrolled_row_is_lost_however_few_bytes_scroll_it(kind: str, size: tuple[int, int], engine: str) -> None:
    # Ghostty's history is a page: each write is cut so that what it can scroll fits, whatever scrolls it.
    if engine != "ghostty":
        skip_expected("Ghostty's history only")
    data = SCROLLERS[kind].encode()
    chunks = [data[i : i + 65536] for i in range(0, len(data), 65536)]
    cols, rows = size
    term = Term(cols, rows, lines=1 << 20, max_bytes=1 << 30).feed(*chunks)
    reference = unbounded_history(Term(cols, rows, lines=1 << 20, max_bytes=1 << 30)).feed(*chunks)
    assert term.t.scrollback.total == reference.t.scrollback.total > rows
    assert term.transcript() == reference.transcript()


# Coloured output as programs print it, and now and then a sequence that moves the cursor or scrolls (IND), or turns
# margins mode on: what ``max_scrolls`` counts by runs between CRs, and what it must not.
COLOURED = st.one_of(
    st.sampled_from(["\x1b[m", "\x1b[0m", "\x1b[1;31m", "\x1b[38;2;10;20;30m", "\x1b[38:5:200m", "\x1b[48;5;17m"]),
    st.sampled_from(["\r", "\n", "\r\n", "\t", "\x0b", "\x0c", "\x08", "\r\r\n"]),
    st.text(alphabet="ab ━│╺⠋é日😀", min_size=1, max_size=400),
    st.sampled_from(["\x1b[5C", "\x1b[999C", "\x1bD", "\x1bE", "\x1b[?69h", "\x1b[3"]),
)


@pytest.mark.parametrize("engine", ENGINES[:1], indirect=True)  # ghostty where it imports: no pyte run to skip
@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(COLOURED, min_size=1, max_size=12).map("".join),
    st.sampled_from([(300, 100), (160, 40), (37, 10)]),
    st.integers(1, 1 << 17),
)
@example(unit="\x1b[31m" + "x" * 3000 + "\x1b[m", size=(160, 40), cut=1 << 17)  # wraps alone pass the history
def test_coloured_output_cut_anywhere_loses_no_scrolled_row(
    engine: str, unit: str, size: tuple[int, int], cut: int
) -> None:
    """Long enough to pass Ghostty's history many times over, in chunks cut anywhere (inside a sequence, a
    character): the transcript is the one a history that never drops a row gives."""
    if engine != "ghostty":
        skip_expected("Ghostty's history only")
    data = (unit * (200_000 // len(unit.encode()) + 1)).encode()[:200_000]
    chunks = [data[i : i + cut] for i in range(0, len(data), cut)]
    cols, rows = size
    term = Term(cols, rows, lines=1 << 20, max_bytes=1 << 30).feed(*chunks)
    reference = unbounded_history(Term(cols, rows, lines=1 << 20, max_bytes=1 << 30)).feed(*chunks)
    event("scrolled past the history" if reference.t.scrollback.total > 2000 else "scrolled less")
    assert term.t.scrollback.total == reference.t.scrollback.total
    assert term.transcript() == reference.transcript()


@pytest.mark.parametrize("sequence", ["\x1b[?3h", "\x1b[?3l", "\x1b[?40;3h", "\x1b[?3;4l"])
def test_column_mode_never_resizes_even_when_allowed(sequence: str) -> None:
    # Mode 40 lets xterm (and Ghostty) honour DECCOLM; the PTY's size is the agent's to set, whatever the program.
    # Alone, DECCOLM is ignored; inside a longer mode sequence, Ghostty may still clear the screen.
    term = Term(20, 5).feed("\x1b[?40h", "keep", sequence, "\r\n" + "x" * 25)
    assert term.t.cols == 20
    assert term.rows[1:3] == ["x" * 20, "x" * 5]
    assert term.rows[0] == "keep" or (term.engine == "ghostty" and ";" in sequence)


@pytest.mark.parametrize("size", [(30, 4), (12, 4), (10, 3)])
def test_resizing_after_a_flood_copies_no_row_twice(size: tuple[int, int]) -> None:
    # Rows already in scrollback may still sit in the emulator's own history, where a resize reflows them.
    lines = [f"line {i:04d} {'x' * (i % 7)}".rstrip() for i in range(600)]
    term = Term(20, 5, lines=10_000).feed("".join(f"{line}\r\n" for line in lines))
    before = term.t.scrollback.total
    term.t.resize(*size)
    term.feed("after\r\n")
    assert term.scrollback[:before] == lines[:before]
    later = term.scrollback[before:]
    assert len(later) <= 2 * 5
    assert all(int(row[5:9]) >= before for row in later if row.startswith("line "))


def test_backlog_returns_to_zero_after_a_flood_of_non_ascii_lines() -> None:
    # The channel stops reading the PTY while the backlog is over its bound: it must count what it removes.
    data = "".join(f"│   ├── naïve-日本語-{i}.txt\r\n" for i in range(3000)).encode()
    term = Term(80, 24, lines=10_000)
    for i in range(0, len(data), 4095):
        term.t.feed(data[i : i + 4095], more=True)
        assert term.t.backlog > 0
        term.t.process(float("inf"))
        assert term.t.backlog == 0


def test_a_dropped_native_terminal_is_freed_outside_the_collector(engine: str) -> None:
    # The collector runs finalizers wherever it runs: once inside cffi while it held its lock to parse a type,
    # where the finalizer's lookup of a library function deadlocked the daemon. A dropped terminal is only queued
    # there, and freed at the next entry into the engine.
    if engine != "ghostty":
        skip_expected("the native engine's finalizer")
    import gc

    from pyghostty import ffi

    from ptyd.terminal.engines.ghostty import lifetime as ghostty_lifetime

    dropped = Term(20, 5).feed("".join(f"line {i}\r\n" for i in range(50)))  # history and its mark
    assert dropped.t.scrollback.total > 0
    gc.collect()  # what earlier tests left in reference cycles, freed before this one is dropped
    ghostty_lifetime.free_dropped()
    del dropped
    with ffi._lock:  # as while cffi parses a type: nothing the collector runs may need it
        gc.collect()
    assert len(ghostty_lifetime.dropped) == 1
    kept = Term(20, 5).feed("next\r\n")  # the next terminal frees it
    assert ghostty_lifetime.dropped == []
    assert kept.text == "next"
