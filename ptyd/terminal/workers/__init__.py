"""Engine workers: terminal emulation in processes of its own, so that no output can take the daemon down.

A panic in the native engine (a Zig panic kills its process with SIGILL) costs a worker, which the daemon
replaces, replaying each of its sessions there; the session whose output does it twice moves to pyte. The
daemon keeps every PTY, the reading, the readiness decisions and each session's transcript; a worker holds only
engines (``host``), fed over a socketpair (``messages``) by each session's proxy (``proxy``), spread and
recovered by the pool (``pool``). See docs/engine-workers.md.
"""

from __future__ import annotations

from collections.abc import Callable

from ptyd.terminal.emulator import Terminal
from ptyd.terminal.engines import engine_name, open_terminal


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
    from ptyd.terminal.workers.pool import shared_pool
    from ptyd.terminal.workers.proxy import RemoteTerminal

    return RemoteTerminal(
        cols,
        rows,
        scrollback_lines=scrollback_lines,
        scrollback_bytes=scrollback_bytes,
        on_reply=on_reply,
        pool=shared_pool(engine_workers),
        engine=engine_name(emulator),
        label=label,
    )
