"""Where a session's terminal renders: in an engine worker (the default), or in the daemon's own process."""

from __future__ import annotations

from collections.abc import Callable

from ptyd.terminal.emulator import Terminal
from ptyd.terminal.engines import engine_name, open_terminal
from ptyd.terminal.workers.pool import shared_pool
from ptyd.terminal.workers.proxy import RemoteTerminal


def open_session_terminal(
    cols: int,
    rows: int,
    *,
    scrollback_lines: int,
    scrollback_bytes: int,
    on_reply: Callable[[bytes], None],
    emulator: str,
    engine_process: str,
    engine_workers: int,
    engine_worker_stall_ms: int,
    engine_worker_rss_mb: int,
    label: str,
) -> Terminal:
    """A session's terminal: rendered by a worker (``engine_process = "worker"``) or in this process."""
    if engine_process == "daemon":
        return open_terminal(
            cols,
            rows,
            scrollback_lines=scrollback_lines,
            scrollback_bytes=scrollback_bytes,
            on_reply=on_reply,
            emulator=emulator,
        )
    return RemoteTerminal(
        cols,
        rows,
        scrollback_lines=scrollback_lines,
        scrollback_bytes=scrollback_bytes,
        on_reply=on_reply,
        pool=shared_pool(engine_workers, engine_worker_stall_ms, engine_worker_rss_mb),
        engine=engine_name(emulator, load=False),  # the workers load it; the daemon never does
        label=label,
    )
