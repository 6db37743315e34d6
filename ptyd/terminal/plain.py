"""Plain output: whole lines of printable ASCII and SGR colour, each ended by CRLF (seq, cat, logs, ls --color).

Both engines fast-forward runs of them: on a screen that simply scrolls, such a line becomes one row whose text
is the line without its SGR sequences (or several rows of ``cols`` characters, if it wraps), so the rows that
scroll off in the middle of a run can go to scrollback without being drawn. The native engine also takes lines of
*simple* characters (``all_simple``: a ``tree`` listing, CJK, emoji without modifiers) that cannot wrap.
"""

from __future__ import annotations

import re

SGR = re.compile(r"\x1b\[[0-9;]*m")
_PRINTABLE = bytes(range(0x20, 0x7F))
_PRINTABLE_CRLF = _PRINTABLE + b"\r\n"
_ONE_A_CHARACTER = bytes(b if b == 0x0A else 0x61 for b in range(256))  # for ``longer_than``: LF stays, all else "a"
_NOT_A_CHARACTER = b"\r" + bytes(range(0x80, 0xC0))  # ...CR and UTF-8 continuation bytes go
_TRAILING_BLANKS = re.compile(" +\n")
_NO_CR = {0x0D: None}
# Characters that are one cell each (or two, for the wide scripts), stand alone and are never dropped or joined:
# Latin, Greek, Cyrillic, punctuation, arrows, box drawing, blocks and shapes, kana, CJK ideographs, Hangul
# syllables, emoji without modifiers. No combining marks, format characters, variation selectors, joiners, skin
# tones or regional indicators, and no blank but the space.
_NOT_SIMPLE = re.compile(
    "[^ -~\r\n\u00a1-\u00ac\u00ae-\u024f\u0386-\u03ce\u0400-\u0482\u048a-\u04ff\u2010-\u2027\u2030-\u205e"
    "\u2190-\u21ff\u2500-\u25ff\u3041-\u3096\u30a1-\u30fa\u4e00-\u9fff\uac00-\ud7a3"
    "\U0001f300-\U0001f3fa\U0001f400-\U0001f64f]"
)


def all_plain(text: str) -> bool:
    """Whether ``text`` holds nothing but printable ASCII, CRLF pairs and SGR sequences (checked at C speed)."""
    crlf = text.count("\r\n")
    if text.count("\r") != crlf or text.count("\n") != crlf or not text.isascii():
        return False
    controls = text.encode().translate(None, _PRINTABLE)
    escapes = controls.count(b"\x1b")
    return len(controls) == 2 * crlf + escapes and (not escapes or escapes == len(SGR.findall(text)))


def all_simple(text: str) -> str | None:
    """``text`` without its SGR sequences if it holds nothing but CRLF pairs, SGR and characters that each draw
    on their own (``_NOT_SIMPLE``); None otherwise."""
    crlf = text.count("\r\n")
    if text.count("\r") != crlf or text.count("\n") != crlf:
        return None
    bare = SGR.sub("", text) if "\x1b" in text else text
    if bare.isascii():  # the common case: a byte translation finds a control 4x faster than the pattern
        return None if bare.encode().translate(None, _PRINTABLE_CRLF) else bare
    return None if _NOT_SIMPLE.search(bare) else bare


def longer_than(text: str, width: int) -> bool:
    """Whether a line of ``text`` (CRLF-ended lines of simple characters) holds more than ``width`` characters.
    Each character becomes one byte and each line end one LF, and the run of ``width + 1`` is searched for:
    ~2 ms/MB, where splitting into lines took 19 (``seq``: eight characters a line)."""
    marks = text.encode().translate(_ONE_A_CHARACTER, _NOT_A_CHARACTER)
    return b"a" * (width + 1) in marks


def after_lines(text: str, count: int) -> int:
    """Where line ``count`` of ``text`` (CRLF-ended lines) starts: just past its ``count``-th CRLF."""
    pos = 0
    for _ in range(count):
        pos = text.index("\r\n", pos) + 2
    return pos


def last_lines(text: str, count: int) -> int:
    """Where the last ``count`` lines of ``text`` (which ends with CRLF) start."""
    pos = len(text) - 2
    for _ in range(count):
        pos = text.rfind("\r\n", 0, pos)
        if pos < 0:  # all of it
            return 0
    return pos + 2


def joined_rows_of(text: str) -> str:
    """Screen rows of CRLF-ended plain lines (SGR removed) that fit their rows, joined by LF, with no trailing
    blanks (``rows_of(..., strip=True)`` without a list of them)."""
    # Every CR is a line end's: ASCII's translation takes them out at 1 ms/MB, replace's copies take 4 (seq).
    rows = text[:-2].translate(_NO_CR) if text.isascii() else text[:-2].replace("\r\n", "\n")
    if " \n" in rows:
        rows = _TRAILING_BLANKS.sub("\n", rows)
    return rows.rstrip(" ")


def wraps_of(lines: list[str], cols: int) -> list[tuple[int, int]]:
    """(index in ``rows_of(lines, ...)``, ``cols``) of the rows that continue on the next: every row of a line
    longer than ``cols`` but its last."""
    if not lines or max(map(len, lines)) <= cols:
        return []
    found: list[tuple[int, int]] = []
    index = 0
    for line in lines:
        count = max(1, -(-len(line) // cols))
        found.extend((index + k, cols) for k in range(count - 1))
        index += count
    return found


def rows_of(lines: list[str], cols: int, strip: bool) -> list[str]:
    """Screen rows of plain lines (SGR removed): wrapped at ``cols``, trailing blanks removed if ``strip``."""
    if not strip and (not lines or max(map(len, lines)) <= cols):
        return lines
    out: list[str] = []
    for line in lines:
        if len(line) <= cols:
            out.append(line.rstrip(" "))
        else:
            out.extend(line[i : i + cols].rstrip(" ") for i in range(0, len(line), cols))
    return out
