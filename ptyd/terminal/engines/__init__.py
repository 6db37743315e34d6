"""The terminal engines, and the choice between them: "ghostty" (libghostty-vt, Ghostty's VT core, through
pyghostty: native, ~300 MB/s), "pyte" (pure Python, 1-2 MB/s, with a fast path for plain floods), or "auto", the
native one wherever it imports. ``PTYD_EMULATOR`` overrides "auto" (the tests run the daemon on the fallback with
it)."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable

from ptyd.terminal.emulator import Terminal

ENGINES = ("ghostty", "pyte")


def native_available() -> bool:
    try:
        import ptyd.terminal.engines.ghostty.engine  # noqa: F401
    except (ImportError, OSError):  # no wheel for this platform, or its library does not load
        return False
    return True


def native_installed() -> bool:
    """The native engine's package is installed (found, not loaded: a daemon whose engines run in workers
    never loads it; a worker where it is found but does not load renders on pyte and says so)."""
    return importlib.util.find_spec("pyghostty") is not None


def engine_name(emulator: str = "auto", *, load: bool = True) -> str:
    """The engine ``emulator`` ("auto", "ghostty" or "pyte") resolves to here; ``load=False``: without loading
    the native engine into this process (``native_installed``)."""
    if emulator == "auto":
        emulator = os.environ.get("PTYD_EMULATOR", "auto")
    if emulator not in ("auto", *ENGINES):
        raise ValueError(f"unknown emulator {emulator!r}: expected auto, ghostty or pyte")
    if emulator == "auto":
        return "ghostty" if (native_available() if load else native_installed()) else "pyte"
    return emulator


def open_terminal(
    cols: int,
    rows: int,
    *,
    scrollback_lines: int,
    scrollback_bytes: int,
    on_reply: Callable[[bytes], None],
    emulator: str = "auto",
) -> Terminal:
    """A terminal on the engine ``emulator`` names, rendering in this process."""
    if engine_name(emulator) == "ghostty":
        from ptyd.terminal.engines.ghostty.engine import GhosttyTerminal

        return GhosttyTerminal(
            cols, rows, scrollback_lines=scrollback_lines, scrollback_bytes=scrollback_bytes, on_reply=on_reply
        )
    from ptyd.terminal.engines.pyte.engine import PyteTerminal

    return PyteTerminal(
        cols, rows, scrollback_lines=scrollback_lines, scrollback_bytes=scrollback_bytes, on_reply=on_reply
    )
