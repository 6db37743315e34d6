"""Freeing native terminals, and the tracked references (marks) into them, outside the garbage collector.

A dropped terminal's finalizer runs wherever the collector happens to run: possibly inside cffi while it holds
its (non-reentrant) lock to parse a type, where looking up a library function would deadlock the daemon, or
inside a Ghostty call on another terminal (a reply callback). So it only queues the terminal, which is freed
at the next entry into the engine. The functions are looked up once, here.
"""

from __future__ import annotations

from typing import Any

from pyghostty import ffi, lib

_GRID_REF_FREE = lib.ghostty_tracked_grid_ref_free
_TERMINAL_FREE = lib.ghostty_terminal_free
dropped: list[tuple[Any, Any]] = []  # (mark, terminal) of each terminal dropped and not yet freed


def unmark(mark: Any) -> None:
    """Free the tracked reference ``mark`` holds, if any."""
    if mark[0]:
        _GRID_REF_FREE(mark[0])
        mark[0] = ffi.NULL


def drop(mark: Any, terminal: Any) -> None:
    """The finalizer of a terminal: queue it to be freed."""
    dropped.append((mark, terminal))


def free_dropped() -> None:
    """Free the terminals dropped since the last call (their marks first: they point into them)."""
    while dropped:
        mark, terminal = dropped.pop()
        unmark(mark)
        _TERMINAL_FREE(terminal)
