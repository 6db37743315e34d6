"""Ghostty's active screen as styled cells (ptyd.terminal.styled), for screenshots and GIF frames."""

from __future__ import annotations

from typing import Any

from pyghostty import ffi, lib
from pyghostty.core import init_sized

from ptyd.terminal.engines.ghostty.history import GRID_REF
from ptyd.terminal.styled import (
    BOLD,
    DEFAULT,
    FAINT,
    INVERSE,
    INVISIBLE,
    ITALIC,
    RGB,
    STRIKE,
    UNDERLINE,
    Cell,
    StyledScreen,
)


def from_ghostty(handle: Any, cols: int, rows: int, cursor: tuple[int, int, bool]) -> StyledScreen:
    """Ghostty's active screen, cell by cell (``handle``: its GhosttyTerminal): a few C calls per cell, a few
    milliseconds for 80x24; only cells with text or styling have their style read."""
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
