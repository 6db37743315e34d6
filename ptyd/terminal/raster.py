"""Styled cells drawn as pixels (Pillow, the extra ``ptyd[screenshot]``): PNG screenshots and GIF animations.

Every cell is a fixed box of the font's advance by its line height; a wide cell is two boxes, its glyph drawn
from its first. Colours resolve through xterm's palette, the defaults being the native engine's own (light grey
on black); italics are drawn upright (no oblique face is loaded). The cursor is a block in the foreground
colour with the glyph under it in the background colour.
Pillow is imported on first use; without it, ``ExtraMissing`` names the extra.
"""

from __future__ import annotations

import io
import os
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from ptyd.errors import ExtraMissing
from ptyd.terminal.styled import (
    BOLD,
    DEFAULT,
    FAINT,
    INVERSE,
    INVISIBLE,
    RGB,
    STRIKE,
    UNDERLINE,
    StyledScreen,
)

FOREGROUND = (0xE5, 0xE5, 0xE5)  # the native engine's defaults (ghostty/engine.py)
BACKGROUND = (0, 0, 0)
# xterm's 16 named colours: the ones programs are tested against.
NAMED = (
    (0x00, 0x00, 0x00), (0xCD, 0x00, 0x00), (0x00, 0xCD, 0x00), (0xCD, 0xCD, 0x00),
    (0x00, 0x00, 0xEE), (0xCD, 0x00, 0xCD), (0x00, 0xCD, 0xCD), (0xE5, 0xE5, 0xE5),
    (0x7F, 0x7F, 0x7F), (0xFF, 0x00, 0x00), (0x00, 0xFF, 0x00), (0xFF, 0xFF, 0x00),
    (0x5C, 0x5C, 0xFF), (0xFF, 0x00, 0xFF), (0x00, 0xFF, 0xFF), (0xFF, 0xFF, 0xFF),
)  # fmt: skip
_CUBE = (0, 95, 135, 175, 215, 255)
PALETTE: tuple[tuple[int, int, int], ...] = (
    NAMED
    + tuple((_CUBE[i // 36], _CUBE[i // 6 % 6], _CUBE[i % 6]) for i in range(216))
    + tuple((8 + 10 * i, 8 + 10 * i, 8 + 10 * i) for i in range(24))
)


FontChoice = tuple[tuple[str, ...], tuple[str, ...]]
"""The fonts tried for the cells, and the fallbacks for characters they lack (config's screenshot_fonts and
screenshot_fallback_fonts)."""

# DejaVu Sans Mono, regular and bold, shipped in the package (Bitstream Vera licence, fonts/LICENSE): tried after
# the configured fonts, so a screenshot looks the same on every machine and needs no font package. It has
# Latin, Greek, Cyrillic, box drawing and block elements; CJK and emoji come from the system's fallbacks.
BUNDLED_FONT = os.path.join(os.path.dirname(__file__), "fonts", "DejaVuSansMono.ttf")


def rgb(colour: int, default: tuple[int, int, int]) -> tuple[int, int, int]:
    if colour == DEFAULT:
        return default
    if colour & RGB:
        return (colour >> 16 & 0xFF, colour >> 8 & 0xFF, colour & 0xFF)
    return PALETTE[colour & 0xFF]


def pil() -> Any:
    try:
        from PIL import Image, ImageDraw, ImageFont
    except ImportError as exc:
        raise ExtraMissing(
            "screenshots need Pillow: install ptyd with the extra 'screenshot' (pip install 'ptyd[screenshot]')",
            extra="screenshot",
            module="PIL",
        ) from exc
    return Image, ImageDraw, ImageFont


def require() -> None:
    """Raise ``ExtraMissing`` unless Pillow imports here."""
    pil()


class Fonts:
    """The regular and bold faces at one size, the cell box they make, and the fallbacks for characters they
    lack (CJK, emoji): the first fallback that has a character draws it."""

    def __init__(self, paths: Sequence[str], size: int, fallbacks: Sequence[str] = ()) -> None:
        _, _, font = pil()
        path = next((p for p in (*paths, BUNDLED_FONT) if os.path.exists(p)), None)
        if path is None:
            self.regular = self.bold = font.load_default(size)
        else:
            self.regular = font.truetype(path, size)
            bold = path.replace("SansMono.", "SansMono-Bold.").replace("-Regular.", "-Bold.")
            self.bold = font.truetype(bold, size) if bold != path and os.path.exists(bold) else self.regular
        self.path = path
        self.fallbacks = [font.truetype(p, size) for p in fallbacks if os.path.exists(p)]
        self.width = max(1, round(self.regular.getlength("M")))
        ascent, descent = self.regular.getmetrics() if hasattr(self.regular, "getmetrics") else (size, size // 4)
        self.ascent = ascent
        self.height = ascent + descent
        self._notdef: dict[int, bytes] = {}
        self._chosen: dict[tuple[str, bool], Any] = {}

    def _has(self, face: Any, char: str) -> bool:
        """``face`` draws ``char`` as something other than its missing-glyph box (Pillow has no cmap lookup)."""
        key = id(face)
        if key not in self._notdef:
            self._notdef[key] = bytes(face.getmask("\U0010fffd"))
        return bytes(face.getmask(char)) != self._notdef[key]

    def face(self, text: str, bold: bool) -> Any:
        """The face that draws the cell ``text`` (chosen by its first character, once per character)."""
        key = (text[0], bold)
        chosen = self._chosen.get(key)
        if chosen is None:
            main = self.bold if bold else self.regular
            chosen = main
            if not text.isascii() and self.fallbacks and not self._has(main, text[0]):
                chosen = next((f for f in self.fallbacks if self._has(f, text[0])), main)
            self._chosen[key] = chosen
        return chosen


@lru_cache(maxsize=8)
def fonts(paths: tuple[str, ...], size: int, fallbacks: tuple[str, ...] = ()) -> Fonts:
    return Fonts(paths, size, fallbacks)


def draw(screen: StyledScreen, font: Fonts) -> Any:
    """The screen as a Pillow RGB image."""
    image_mod, draw_mod, _ = pil()
    cw, ch = font.width, font.height
    image = image_mod.new("RGB", (screen.cols * cw, screen.rows * ch), BACKGROUND)
    pen = draw_mod.Draw(image)
    cx, cy, hidden = screen.cursor
    cx = min(max(cx, 0), screen.cols - 1)
    cursor_drawn = hidden or not 0 <= cy < screen.rows
    for y, row in enumerate(screen.cells[: screen.rows]):
        top = y * ch
        for cell in row:
            if cell.x >= screen.cols:
                break
            fg, bg = rgb(cell.fg, FOREGROUND), rgb(cell.bg, BACKGROUND)
            if cell.attrs & INVERSE:
                fg, bg = bg, fg
            if cell.attrs & FAINT:
                fg = (
                    (fg[0] + bg[0]) // 2,
                    (fg[1] + bg[1]) // 2,
                    (fg[2] + bg[2]) // 2,
                )
            if cell.attrs & INVISIBLE:
                fg = bg
            at_cursor = not cursor_drawn and y == cy and cell.x <= cx < cell.x + cell.width
            if at_cursor:
                fg, bg, cursor_drawn = bg, FOREGROUND, True
            left, right = cell.x * cw, min(cell.x + cell.width, screen.cols) * cw
            if bg != BACKGROUND:
                pen.rectangle((left, top, right - 1, top + ch - 1), fill=bg)
            if cell.text.strip():
                pen.text((left, top), cell.text, font=font.face(cell.text, bool(cell.attrs & BOLD)), fill=fg)
            if cell.attrs & UNDERLINE:
                pen.line((left, top + font.ascent + 1, right - 1, top + font.ascent + 1), fill=fg)
            if cell.attrs & STRIKE:
                pen.line((left, top + ch // 2, right - 1, top + ch // 2), fill=fg)
    if not cursor_drawn:  # on a blank cell
        pen.rectangle((cx * cw, cy * ch, (cx + 1) * cw - 1, (cy + 1) * ch - 1), fill=FOREGROUND)
    return image


def encode_png(image: Any) -> bytes:
    out = io.BytesIO()
    image.save(out, "PNG")
    return out.getvalue()


def png(screen: StyledScreen, font: Fonts) -> bytes:
    return encode_png(draw(screen, font))
