"""A screen as styled cells: what a screenshot draws, read from either engine's own state (one place for both).

A colour is an int: ``DEFAULT`` (the terminal's default foreground or background), 0-255 (the palette: 16 named
colours, the 6x6x6 cube, the grey ramp), or ``RGB | 0xRRGGBB`` (a direct colour). Attributes are bit flags.
Only cells that draw something are kept (a glyph, a background, an underline or an inverse); a blank default
cell is left out, so an idle 80x24 shell is a few dozen cells on the wire between a worker and the daemon.
"""

from __future__ import annotations

from typing import Any

import msgspec

DEFAULT = -1
RGB = 1 << 24
BOLD, ITALIC, UNDERLINE, INVERSE, FAINT, STRIKE, INVISIBLE = 1, 2, 4, 8, 16, 32, 64

_PYTE_NAMES = ("black", "red", "green", "brown", "blue", "magenta", "cyan", "white")
PYTE_COLOURS: dict[str, int] = {name: i for i, name in enumerate(_PYTE_NAMES)}
PYTE_COLOURS |= {"bright" + name: i + 8 for i, name in enumerate(_PYTE_NAMES)}
PYTE_COLOURS["bfightmagenta"] = 13  # pyte 0.8.2's own spelling of SGR 105
PYTE_COLOURS["default"] = DEFAULT


class Cell(msgspec.Struct, array_like=True, frozen=True):
    """One cell that draws something: column ``x``, its text (a grapheme cluster), 1 or 2 columns wide."""

    x: int
    text: str
    width: int = 1
    fg: int = DEFAULT
    bg: int = DEFAULT
    attrs: int = 0


class StyledScreen(msgspec.Struct, array_like=True, frozen=True):
    """The active screen: ``cells[y]`` are row y's drawn cells, left to right; the cursor as the engine has it."""

    cols: int
    rows: int
    cells: list[list[Cell]]
    cursor: tuple[int, int, bool]  # x, y, hidden
    engine: str = ""


def plain(cols: int, rows: list[str], cursor: tuple[int, int, bool], engine: str = "") -> StyledScreen:
    """Rows of text alone, in the default colours (what a screen mirror knows, when no engine can be asked)."""
    cells = [[Cell(x, ch) for x, ch in enumerate(row) if ch != " "] for row in rows]
    return StyledScreen(cols=cols, rows=len(rows), cells=cells, cursor=cursor, engine=engine)


# --- pyte -------------------------------------------------------------------------------------------------


def _pyte_colour(name: str) -> int:
    found = PYTE_COLOURS.get(name)
    if found is not None:
        return found
    try:  # 256-colour and direct colours arrive as hex (pyte turns the palette's into its RGB)
        return RGB | int(name, 16)
    except ValueError:
        return DEFAULT


def from_pyte(screen: Any, engine: str = "pyte") -> StyledScreen:
    """A pyte ``Screen``'s buffer: a wide character's cell holds it, the stub after it holds ""."""
    cols, lines = int(screen.columns), int(screen.lines)
    out: list[list[Cell]] = []
    buffer = screen.buffer
    for y in range(lines):
        row: list[Cell] = []
        line = buffer.get(y, {})
        for x in sorted(line):
            if x >= cols:
                break
            char = line[x]
            attrs = (
                (BOLD if char.bold else 0)
                | (ITALIC if char.italics else 0)
                | (UNDERLINE if char.underscore else 0)
                | (INVERSE if char.reverse else 0)
                | (STRIKE if char.strikethrough else 0)
            )
            fg, bg = _pyte_colour(char.fg), _pyte_colour(char.bg)
            text = char.data
            if not text or (text == " " and bg == DEFAULT and not attrs & (INVERSE | UNDERLINE | STRIKE)):
                continue
            wide = x + 1 < cols and (x + 1) in line and line[x + 1].data == ""
            row.append(Cell(x, text, 2 if wide else 1, fg, bg, attrs))
        out.append(row)
    cursor = screen.cursor
    return StyledScreen(
        cols=cols, rows=lines, cells=out, cursor=(int(cursor.x), int(cursor.y), bool(cursor.hidden)), engine=engine
    )
