"""terminal_screenshot: a session's screen as its engine has it, drawn as a PNG off the event loop."""

from __future__ import annotations

import asyncio
import base64

from ptyd import protocol as p
from ptyd.terminal import raster
from ptyd.terminal.engine import TerminalEngine
from ptyd.terminal.styled import StyledScreen


def _draw(screen: StyledScreen, fonts: raster.FontChoice, size: int) -> tuple[bytes, int, int]:
    font = raster.fonts(fonts[0], size, fonts[1])
    image = raster.draw(screen, font)
    return raster.encode_png(image), image.width, image.height


async def screenshot(terminal: TerminalEngine, fonts: raster.FontChoice, size: int) -> p.TerminalScreenshotResult:
    """The styled cells are read where the engine renders (a worker: one round trip), then drawn in a thread
    (~0.1 s for 80x24): the loop keeps serving the other sessions meanwhile."""
    raster.require()  # a missing extra is said before any work
    screen = await terminal.styled_screen()
    data, width, height = await asyncio.to_thread(_draw, screen, fonts, size)
    x, y, hidden = screen.cursor
    return p.TerminalScreenshotResult(
        png=base64.b64encode(data).decode("ascii"),
        width=width,
        height=height,
        cols=screen.cols,
        rows=screen.rows,
        cursor_x=min(max(x, 0), screen.cols - 1),
        cursor_y=y,
        cursor_visible=not hidden,
        alt_screen=terminal.alt_screen,
        engine=screen.engine or terminal.engine,
    )
