"""Ghostty's terminal as VT sequences that draw it again (a handover's screen), by Ghostty's own formatter."""

from __future__ import annotations

from typing import Any

from pyghostty import ffi, lib
from pyghostty.core import init_sized


def vt_dump(handle: Any) -> bytes:
    """Ghostty's own VT formatter over the whole terminal: cells with their styles, modes, scroll region, tab
    stops, charsets and the cursor (the palette is left out: ptyd never changes it)."""
    opts = init_sized("GhosttyFormatterTerminalOptions")
    opts.emit = lib.GHOSTTY_FORMATTER_FORMAT_VT
    opts.unwrap, opts.trim = True, False
    extra = opts.extra
    extra.size = ffi.sizeof("GhosttyFormatterTerminalExtra")
    extra.modes = extra.scrolling_region = extra.tabstops = extra.pwd = extra.keyboard = True
    extra.screen.size = ffi.sizeof("GhosttyFormatterScreenExtra")
    screen = extra.screen
    screen.cursor = screen.style = screen.hyperlink = screen.protection = screen.kitty_keyboard = True
    screen.charsets = True
    formatter = ffi.new("GhosttyFormatter*")
    if lib.ghostty_formatter_terminal_new(ffi.NULL, formatter, handle, opts[0]) != lib.GHOSTTY_SUCCESS:
        raise RuntimeError("libghostty-vt could not create a formatter")
    try:
        size = 64 * 1024
        while True:
            buf = ffi.new("uint8_t[]", size)
            written = ffi.new("size_t*")
            result = lib.ghostty_formatter_format_buf(formatter[0], buf, size, written)
            if result != lib.GHOSTTY_OUT_OF_SPACE:
                break
            size = max(2 * size, int(written[0]))
        if result != lib.GHOSTTY_SUCCESS:
            raise RuntimeError(f"libghostty-vt could not format the screen ({result})")
        return bytes(ffi.buffer(buf, written[0]))
    finally:
        lib.ghostty_formatter_free(formatter[0])
