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


# --- Ghostty ----------------------------------------------------------------------------------------------


def from_ghostty(handle: Any, cols: int, rows: int, cursor: tuple[int, int, bool]) -> StyledScreen:
    """Ghostty's active screen, cell by cell (``handle``: its GhosttyTerminal): a few C calls per cell, a few
    milliseconds for 80x24; only cells with text or styling have their style read."""
    from pyghostty import ffi, lib
    from pyghostty.core import init_sized

    from ptyd.terminal.engines.ghostty.history import GRID_REF

    point = ffi.new("GhosttyPointS*")
    point.tag = lib.GHOSTTY_POINT_TAG_ACTIVE
    ref = init_sized("GhosttyGridRef")
    cell = ffi.new("GhosttyCell*")
    style = init_sized("GhosttyStyle")
    u32 = ffi.new("uint32_t*")
    flag = ffi.new("bool*")
    wide = ffi.new("GhosttyCellWide*")
    tag = ffi.new("GhosttyCellContentTag*")
    grapheme = ffi.new("uint32_t[]", 32)
    count = ffi.new("size_t*")
    palette_index = ffi.new("GhosttyColorPaletteIndex*")
    rgb = ffi.new("GhosttyColorRgb*")

    def colour(c: Any) -> int:
        if c.tag == lib.GHOSTTY_STYLE_COLOR_PALETTE:
            return int(c.value.palette)
        if c.tag == lib.GHOSTTY_STYLE_COLOR_RGB:
            v = c.value.rgb
            return RGB | (int(v.r) << 16) | (int(v.g) << 8) | int(v.b)
        return DEFAULT

    out: list[list[Cell]] = []
    for y in range(rows):
        row: list[Cell] = []
        for x in range(cols):
            point.value.x, point.value.y = x, y
            if GRID_REF(handle, point[0], ref) != lib.GHOSTTY_SUCCESS:
                continue
            lib.ghostty_grid_ref_cell(ref, cell)
            lib.ghostty_cell_get(cell[0], lib.GHOSTTY_CELL_DATA_WIDE, wide)
            if wide[0] in (lib.GHOSTTY_CELL_WIDE_SPACER_TAIL, lib.GHOSTTY_CELL_WIDE_SPACER_HEAD):
                continue
            lib.ghostty_cell_get(cell[0], lib.GHOSTTY_CELL_DATA_CONTENT_TAG, tag)
            if tag[0] == lib.GHOSTTY_CELL_CONTENT_BG_COLOR_PALETTE:
                lib.ghostty_cell_get(cell[0], lib.GHOSTTY_CELL_DATA_COLOR_PALETTE, palette_index)
                row.append(Cell(x, " ", 1, DEFAULT, int(palette_index[0])))
                continue
            if tag[0] == lib.GHOSTTY_CELL_CONTENT_BG_COLOR_RGB:
                lib.ghostty_cell_get(cell[0], lib.GHOSTTY_CELL_DATA_COLOR_RGB, rgb)
                row.append(Cell(x, " ", 1, DEFAULT, RGB | (int(rgb.r) << 16) | (int(rgb.g) << 8) | int(rgb.b)))
                continue
            lib.ghostty_cell_get(cell[0], lib.GHOSTTY_CELL_DATA_HAS_TEXT, flag)
            text = ""
            if flag[0]:
                if tag[0] == lib.GHOSTTY_CELL_CONTENT_CODEPOINT_GRAPHEME:
                    lib.ghostty_grid_ref_graphemes(ref, grapheme, 32, count)
                    text = "".join(chr(grapheme[i]) for i in range(count[0]))
                else:
                    lib.ghostty_cell_get(cell[0], lib.GHOSTTY_CELL_DATA_CODEPOINT, u32)
                    text = chr(u32[0])
            lib.ghostty_cell_get(cell[0], lib.GHOSTTY_CELL_DATA_HAS_STYLING, flag)
            if not flag[0]:
                if text and text != " ":
                    row.append(Cell(x, text, 2 if wide[0] == lib.GHOSTTY_CELL_WIDE_WIDE else 1))
                continue
            lib.ghostty_grid_ref_style(ref, style)
            attrs = (
                (BOLD if style.bold else 0)
                | (ITALIC if style.italic else 0)
                | (UNDERLINE if style.underline else 0)
                | (INVERSE if style.inverse else 0)
                | (FAINT if style.faint else 0)
                | (STRIKE if style.strikethrough else 0)
                | (INVISIBLE if style.invisible else 0)
            )
            width = 2 if wide[0] == lib.GHOSTTY_CELL_WIDE_WIDE else 1
            row.append(Cell(x, text or " ", width, colour(style.fg_color), colour(style.bg_color), attrs))
        out.append(row)
    return StyledScreen(cols=cols, rows=rows, cells=out, cursor=cursor, engine="ghostty")
