"""``ptyctl watch``: follow a session's screen live, read-only, redrawn in place until Ctrl-C or its end.

It only calls ``terminal_status`` and ``terminal_screen``, so watching never disturbs the agent driving the session.
"""

from __future__ import annotations

import shutil
import signal
import time
from typing import TextIO

from ptyd_client import render
from ptyd_client.client import Client
from ptyd_client.errors import SessionNotFound

POLL_INTERVAL_S = 0.2  # a redraw rate a person reads comfortably, at two cheap calls per tick


def watch(client: Client, session_id: str, out: TextIO, interval: float = POLL_INTERVAL_S) -> str:
    """Redraw the session's screen on ``out`` until it closes or exits; return why the watch ended.

    Ctrl-C (KeyboardInterrupt) ends it too, even when this process was started with SIGINT ignored (a
    background job of a script): Ctrl-C is the documented way out of a full-screen view. The viewer's screen is
    restored on every way out. A session larger than this terminal is cropped to the rows around its cursor,
    and the header says which part is shown.
    """
    info = client.terminal_status(session_id)  # a bad id fails here, before the screen is taken over
    signal.signal(signal.SIGINT, signal.default_int_handler)
    out.write(render.ENTER_SCREEN)
    last = ""
    try:
        while True:
            size = shutil.get_terminal_size()
            screen = client.terminal_screen(session_id)
            lines, crop = render.crop(screen, info["rows"], info["cols"], size.columns, size.lines - 1)
            note = " | full-screen program" if info["alt_screen"] else ""
            header = f"ptyctl watch: read-only, Ctrl-C quits{crop}{note} | {render.session_line(info)}"
            drawn = render.frame(lines, size.columns, size.lines, header=header)
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
