"""``ptyctl replay``: play asciicast v2 recordings in this terminal, at their own pace (or ``speed`` times it).

Only output events are written; input and markers are not shown, and a resize is noted but not forced on this
terminal. Ctrl-C stops; the terminal's modes the recording may have changed (alternate screen, hidden cursor,
attributes, bracketed paste) are put back on every way out.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

# Show the cursor, plain attributes, no bracketed paste, normal cursor keys; and leave the alternate screen
# when the recording ended in it (leaving it otherwise would move this terminal's cursor).
RESTORE = "\x1b[?25h\x1b[0m\x1b[?2004l\x1b[?1l\x1b>"
LEAVE_ALT = "\x1b[?1049l"
ALT_ON, ALT_OFF = ("\x1b[?1049h", "\x1b[?1047h", "\x1b[?47h"), ("\x1b[?1049l", "\x1b[?1047l", "\x1b[?47l")


def in_alt_screen(data: str, was: bool) -> bool:
    """Whether the terminal is on the alternate screen after ``data``."""
    on = max(data.rfind(s) for s in ALT_ON)
    off = max(data.rfind(s) for s in ALT_OFF)
    return was if on == off else on > off


class BadRecording(ValueError):
    """The file is not asciicast v2."""


def read_cast(path: Path) -> tuple[dict[str, Any], Iterator[list[Any]]]:
    """The header and the events of one asciicast v2 file (events are read lazily)."""
    f = path.open(encoding="utf-8", errors="replace")
    try:
        header = json.loads(f.readline())
    except ValueError:
        f.close()
        raise BadRecording(f"{path} is not an asciicast file") from None
    if not isinstance(header, dict) or header.get("version") != 2:
        f.close()
        raise BadRecording(f"{path} is not asciicast v2")

    def events() -> Iterator[list[Any]]:
        with f:
            for line in f:
                try:
                    event = json.loads(line)
                except ValueError:
                    continue  # a line cut by a crash: skip it, as asciinema does
                if isinstance(event, list) and len(event) == 3:
                    yield event

    return header, events()


def play(paths: list[Path], out: TextIO, speed: float = 1.0, idle_limit: float | None = None) -> str:
    """Play ``paths`` one after the other on ``out``; return how it ended."""
    alt = False
    try:
        for path in paths:
            header, events = read_cast(path)
            size = shutil.get_terminal_size()
            if (size.columns, size.lines) < (header["width"], header["height"]) and out.isatty():
                print(
                    f"ptyctl replay: recorded at {header['width']}x{header['height']}, this terminal is "
                    f"{size.columns}x{size.lines}: lines may wrap",
                    file=sys.stderr,
                )
            start = time.monotonic()
            shift = 0.0  # time cut by idle_limit so far
            previous = 0.0
            for t, kind, data in events:
                gap = float(t) - previous
                previous = float(t)
                if idle_limit is not None and gap > idle_limit:
                    shift += gap - idle_limit
                due = start + (float(t) - shift) / speed
                delay = due - time.monotonic()
                if delay > 0:
                    time.sleep(delay)  # the recording's own timing
                if kind == "o":
                    out.write(str(data))
                    out.flush()
                    alt = in_alt_screen(str(data), alt)
        return f"played {len(paths)} part{'s' if len(paths) != 1 else ''}"
    except KeyboardInterrupt:
        return "stopped"
    finally:
        out.write(RESTORE + (LEAVE_ALT if alt else ""))
        out.flush()
