"""What ptyctl prints: session tables, status lines, and full-screen frames for ``watch`` and ``attach``.

Pure functions of results, so the drawing is the same whichever command polls the daemon.
"""

from __future__ import annotations

import re
import time
import unicodedata
from collections.abc import Sequence

from ptyd_client.types import AgentInfo, DaemonInfoResult, SessionInfo, SessionStatus, TerminalScreenResult

# Session text is a program's output: it must not drive the viewer's terminal (title, clipboard, keys).
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def safe(text: str) -> str:
    """``text`` with C0/C1 control characters (escape sequences included) shown as ``?``; keeps tab and newline."""
    return _CONTROLS.sub("?", text)


def cells(char: str) -> int:
    if unicodedata.combining(char):
        return 0
    return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1


def clip(text: str, width: int) -> str:
    """The longest prefix of ``text`` that fits ``width`` terminal cells."""
    used = 0
    for i, char in enumerate(text):
        used += cells(char)
        if used > width:
            return text[:i]
    return text


def duration(ms: int) -> str:
    seconds = ms // 1000
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    if seconds < 86400:
        return f"{seconds // 3600}h{seconds // 60 % 60:02d}m"
    return f"{seconds // 86400}d{seconds // 3600 % 24:02d}h"


def status_word(status: SessionStatus) -> str:
    if status["kind"] == "running":
        return "running"
    if status["signal"]:
        return f"killed {status['signal']}"
    return f"exited {status['exit_code']}"


def daemon_status(info: DaemonInfoResult, socket_path: str) -> str:
    backends = ", ".join(info["backend_types"])
    return "\n".join(
        [
            f"ptyd {info['version']} (protocol {info['protocol_version']}) is running: pid {info['pid']}, "
            f"up {duration(info['uptime_ms'])}",
            f"socket:   {socket_path}",
            f"sessions: {info['sessions']}, agents: {info['agents']}",
            f"backends: {backends}; containment: {info['containment']}",
            # Whether the sessions outlive a crash of the daemon right now (absent from daemons before it).
            f"crash continuity: {safe(str(info.get('crash_continuity') or 'unknown'))}",
            # What agents' sessions run in (absent from daemons before protocol 6), and loudly when that is none.
            *([f"agents' sandbox: {safe(str(info['sandbox_default']))}"] if info.get("sandbox_default") else []),
            *([f"WARNING: {safe(str(info['sandbox_warning']))}"] if info.get("sandbox_warning") else []),
            *_network_line(info),
        ]
    )


def _network_line(info: DaemonInfoResult) -> list[str]:
    """Sandboxed sessions' network (protocol 7): their own namespace, or the machine's."""
    network = info.get("sandbox_network")
    if not network:
        return []
    if network["mode"] != "pasta":
        return ["sandbox network: the machine's (its loopback ports reachable from sandboxed sessions)"]
    found = f"{network['made_ahead']} of {network['taken']} opens found one"
    return [f"sandbox network: its own per session (pasta); {network['spares']} made ahead, {found}"]


def sandbox_word(info: SessionInfo) -> str:
    """The session's sandbox profile, and what its limits did (``tight oom``)."""
    flags = [flag for flag, key in (("oom", "oom_killed"), ("pids-max", "pids_limited")) if info.get(key)]
    return " ".join([safe(str(info.get("sandbox", "none"))), *flags])


def session_table(sessions: Sequence[SessionInfo], now_ms: int | None = None) -> str:
    """One row per session, columns sized to their contents."""
    now = now_ms if now_ms is not None else int(time.time() * 1000)
    header = ("SESSION", "NAME", "TYPE", "PID", "STATUS", "FOREGROUND", "SIZE", "LINES", "AGE", "SANDBOX", "OWNER")
    rows = [header]
    for s in sessions:
        foreground = s["foreground"]["name"] if s["foreground"] else "-"
        rows.append(
            (
                s["session_id"],
                safe(s["name"] or "-"),
                s["type"],
                str(s["pid"] or "-"),
                status_word(s["status"]) + (" busy" if s["busy"] else "") + (" rec" if s.get("recording") else ""),
                safe(foreground),
                f"{s['cols']}x{s['rows']}" + (" alt" if s["alt_screen"] else ""),
                str(s["total_lines"]),
                duration(max(now - s["created_at_ms"], 0)),
                sandbox_word(s),
                safe(s["owner_name"] or s["owner"]),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows)


def agent_table(agents: Sequence[AgentInfo]) -> str:
    """One row per agent: what ``ptyctl release`` takes, and what it would close."""
    rows = [("AGENT", "NAME", "SESSIONS", "IDLE")]
    rows += [(a["agent_id"], safe(a["name"] or "-"), str(a["sessions"]), duration(a["idle_ms"])) for a in agents]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows)


def session_line(info: SessionInfo) -> str:
    """A one-line summary for the header of ``watch`` and ``attach``."""
    parts = [info["session_id"]]
    if info["name"]:
        parts.append(safe(info["name"]))
    parts.append(status_word(info["status"]))
    if info["foreground"]:
        parts.append(safe(info["foreground"]["name"]))
    parts.append(f"{info['cols']}x{info['rows']}")
    if info["busy"]:
        parts.append("busy")
    return "  ".join(parts)


def crop(screen: TerminalScreenResult, rows: int, cols: int, width: int, height: int) -> tuple[list[str], str]:
    """The rows of a ``rows`` x ``cols`` screen that fit ``height`` rows, and a note saying what is cut off.

    A screen taller than the view shows the rows that end at its cursor (or its top rows, while the cursor is
    among them), so a shell prompt near the top is not traded for blank rows; a wider one is clipped at the
    right. The note is empty when everything fits.
    """
    lines = list(screen["lines"]) + [""] * max(rows - len(screen["lines"]), 0)
    height = max(height, 1)
    top = 0
    if rows > height:
        top = min(max(screen["cursor_y"] + 1 - height, 0), rows - height)
    shown = lines[top : top + height]
    cut: list[str] = []
    if rows > height:
        cut.append(f"rows {top + 1}-{top + len(shown)}/{rows}")
    if cols > width:
        cut.append(f"cols 1-{width}/{cols}")
    note = f" | CROPPED {' '.join(cut)}" if cut else ""
    return shown, note


ENTER_SCREEN = "\x1b[?1049h\x1b[H\x1b[2J"
LEAVE_SCREEN = "\x1b[?25h\x1b[?1049l"


def frame(
    lines: Sequence[str],
    width: int,
    height: int,
    *,
    header: str | None = None,
    footer: str | None = None,
    cursor: tuple[int, int] | None = None,
) -> str:
    """A whole-screen redraw: header and footer in reverse video, ``lines`` clipped to fit, every row
    addressed absolutely (so it works in raw mode, where a newline does not return the carriage). ``cursor``
    is the session's cursor (column, row; zero-based, rows of ``lines``): shown there, else hidden."""
    out = ["\x1b[?25l"]
    top = 1
    if header is not None:
        out.append(f"\x1b[1;1H\x1b[7m{clip(safe(header), width).ljust(width)}\x1b[0m")
        top = 2
    body = height - (top - 1) - (1 if footer is not None else 0)
    skipped = max(len(lines) - body, 0)
    shown = [clip(safe(line), width) for line in lines[skipped:]] if body > 0 else []
    for i in range(max(body, 0)):
        text = shown[i] if i < len(shown) else ""
        out.append(f"\x1b[{top + i};1H{text}\x1b[K")
    if footer is not None:
        out.append(f"\x1b[{height};1H\x1b[7m{clip(safe(footer), width).ljust(width)}\x1b[0m")
    if cursor is not None and 0 <= cursor[1] - skipped < max(body, 0):
        out.append(f"\x1b[{top + cursor[1] - skipped};{min(cursor[0] + 1, width)}H\x1b[?25h")
    return "".join(out)
