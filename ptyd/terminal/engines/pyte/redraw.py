"""pyte's screen written as VT sequences that draw it again (the ``screen`` of a handover's ``TerminalState``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ptyd.terminal.engines.pyte.screen import TerminalScreen

DECCKM = 1 << 5  # application cursor keys, as pyte keeps a private mode (shifted left 5)

_FG = {"default": 39, "black": 30, "red": 31, "green": 32, "brown": 33, "blue": 34, "magenta": 35, "cyan": 36}
_FG |= {"white": 37, **{f"bright{k}": v + 60 for k, v in _FG.items() if k != "default"}}
_FG["brightwhite"] = 97
_FLAGS = (("bold", 1), ("italics", 3), ("underscore", 4), ("blink", 5), ("reverse", 7), ("strikethrough", 9))


def _colour(name: str, base: int) -> str:
    """SGR parameters for a pyte colour: a name, or six hex digits (256-colour and true-colour cells)."""
    if name in _FG:
        return str(_FG[name] + base)
    if len(name) == 6:
        try:
            r, g, b = (int(name[i : i + 2], 16) for i in (0, 2, 4))
        except ValueError:
            return str(39 + base)
        return f"{38 + base};2;{r};{g};{b}"
    return str(39 + base)


def sgr(char: object) -> str:
    params = ["0"] + [str(code) for attr, code in _FLAGS if getattr(char, attr)]
    params += [_colour(str(getattr(char, "fg")), 0), _colour(str(getattr(char, "bg")), 10)]  # noqa: B009
    return "\x1b[" + ";".join(params) + "m"


def pyte_redraw(screen: TerminalScreen) -> bytes:
    """VT sequences that draw ``screen``'s active buffer, its modes, scroll region and cursor on a blank screen."""
    from pyte import modes as mo

    out = ["\x1b[?1049h" if screen.alt else "", "\x1b[0m\x1b[H\x1b[2J"]
    wrapped = False
    for y in range(screen.lines):
        row = screen.buffer.get(y)
        if not row and not wrapped:
            continue
        if not wrapped:  # a row the one above soft-wrapped onto is drawn by wrapping again: the flag comes back
            out.append(f"\x1b[{y + 1};1H")
        if row is None:
            row = screen.buffer[y]
        wrapped = bool(getattr(row, "wrapped", False)) and y + 1 < screen.lines
        pen = None
        for x in range(screen.columns):
            char = row[x]
            if char.data == "":  # the right half of a wide character
                continue
            style = sgr(char)
            if style != pen:
                out.append(style)
                pen = style
            out.append(char.data)
    out.append("\x1b[0m")
    if mo.DECAWM not in screen.mode:  # after the rows, which wrap as they did
        out.append("\x1b[?7l")
    if screen.margins is not None:
        out.append(f"\x1b[{screen.margins.top + 1};{screen.margins.bottom + 1}r")
    modes = ((mo.DECOM, "\x1b[?6h"), (mo.IRM, "\x1b[4h"), (mo.LNM, "\x1b[20h"), (mo.DECSCNM, "\x1b[?5h"))
    for mode, seq in (*modes, (DECCKM, "\x1b[?1h")):
        if mode in screen.mode:
            out.append(seq)
    cursor = screen.cursor
    top = screen.margins.top if screen.margins is not None and mo.DECOM in screen.mode else 0
    out.append(f"\x1b[{cursor.y - top + 1};{min(cursor.x, screen.columns - 1) + 1}H")
    out.append(sgr(cursor.attrs))
    if cursor.hidden:
        out.append("\x1b[?25l")
    return "".join(out).encode()
