"""Plain output: whole lines of printable ASCII and SGR colour, each ended by CRLF (seq, cat, logs, ls --color).

Both engines fast-forward runs of them: on a screen that simply scrolls, such a line becomes one row whose text
is the line without its SGR sequences (or several rows of ``cols`` characters, if it wraps), so the rows that
scroll off in the middle of a run can go to scrollback without being drawn.
"""

from __future__ import annotations

import re

SGR = re.compile(r"\x1b\[[0-9;]*m")
_PRINTABLE = bytes(range(0x20, 0x7F))


def all_plain(text: str) -> bool:
    """Whether ``text`` holds nothing but printable ASCII, CRLF pairs and SGR sequences (checked at C speed)."""
    crlf = text.count("\r\n")
    if text.count("\r") != crlf or text.count("\n") != crlf or not text.isascii():
        return False
    controls = text.encode().translate(None, _PRINTABLE)
    escapes = controls.count(b"\x1b")
    return len(controls) == 2 * crlf + escapes and (not escapes or escapes == len(SGR.findall(text)))


def rows_of(lines: list[str], cols: int, strip: bool) -> list[str]:
    """Screen rows of plain lines (SGR removed): wrapped at ``cols``, trailing blanks removed if ``strip``."""
    if not strip and (not lines or max(map(len, lines)) <= cols):
        return lines
    out: list[str] = []
    for line in lines:
        if len(line) <= cols:
            out.append(line.rstrip())
        else:
            out.extend(line[i : i + cols].rstrip() for i in range(0, len(line), cols))
    return out
