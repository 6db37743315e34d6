"""``ptyctl watch``: follow a session's screen live, read-only, redrawn in place until Ctrl-C or its end.

It only calls ``terminal_status`` and ``terminal_screen``, so watching never disturbs the agent driving the session.
"""

from __future__ import annotations

import shutil
import time
from typing import TextIO

from ptyd_client import render
from ptyd_client.client import Client
from ptyd_client.errors import SessionNotFound
from ptyd_client.types import SessionInfo

POLL_INTERVAL_S = 0.2  # a redraw rate a person reads comfortably, at two cheap calls per tick


def screen_lines(client: Client, info: SessionInfo) -> list[str]:
    """The session's visible screen, a full-screen program's included."""
    return client.terminal_screen(info["session_id"])["lines"]


def watch(client: Client, session_id: str, out: TextIO, interval: float = POLL_INTERVAL_S) -> str:
    """Redraw the session's screen on ``out`` until it closes or exits; return why the watch ended.

    Ctrl-C (KeyboardInterrupt) ends it too; the viewer's screen is restored on every way out.
    """
    info = client.terminal_status(session_id)  # a bad id fails here, before the screen is taken over
    out.write(render.ENTER_SCREEN)
    last = ""
    try:
        while True:
            size = shutil.get_terminal_size()
            note = " | full-screen program" if info["alt_screen"] else ""
            header = f"ptyctl watch: read-only, Ctrl-C quits{note} | {render.session_line(info)}"
            drawn = render.frame(screen_lines(client, info), size.columns, size.lines, header=header)
            if drawn != last:
                out.write(drawn)
                out.flush()
                last = drawn
            if info["status"]["kind"] == "exited":
                return f"{session_id} {render.status_word(info['status'])}"
            time.sleep(interval)  # the refresh cadence, not a wait for a condition
            info = client.terminal_status(session_id)
    except SessionNotFound:
        return f"{session_id} was closed"
    except KeyboardInterrupt:
        return "stopped watching"
    finally:
        out.write(render.LEAVE_SCREEN)
        out.flush()
