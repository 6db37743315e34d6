"""A recording rendered into frames for the page's player: the screen's rows at moments of the recording,
rendered by the daemon's own terminal engine, so a replay shows what the live view showed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ptyd.terminal.engines import open_terminal

FRAME_INTERVAL_S = 1 / 30  # frames closer than this are merged: the player draws at most 30 a second
MAX_FRAMES = 20_000  # about 11 minutes of continuous change at that rate; later changes coarsen the steps
MAX_FILE_BYTES = 64 * 1024 * 1024  # a part bigger than this (recording_max_file_bytes raised) is cut


class NotARecording(ValueError):
    pass


def render_frames(path: Path, emulator: str = "auto") -> dict[str, Any]:
    """``{"width", "height", "title", "duration", "frames": [{"t", "lines", "cursor": [x, y] | null}]}``."""
    with path.open("rb") as f:
        header = _header(f.readline())
        data = f.read(MAX_FILE_BYTES)
    cols, rows = int(header["width"]), int(header["height"])
    term = open_terminal(
        cols, rows, scrollback_lines=1, scrollback_bytes=65536, on_reply=lambda _: None, emulator=emulator
    )
    frames: list[dict[str, Any]] = []
    interval = FRAME_INTERVAL_S
    last_t = -1.0  # time of the last frame
    t = 0.0  # time of the last event applied: a frame at t shows every event up to it
    dirty = True

    def frame(at: float) -> None:
        while term.process(1.0):
            pass
        screen = term.current_screen()
        cursor = None if screen.cursor.hidden else [min(int(screen.cursor.x), term.cols - 1), int(screen.cursor.y)]
        frames.append({"t": round(at, 3), "lines": screen.visible_rows(), "cursor": cursor})

    for line in data.splitlines():
        try:
            t_raw, kind, payload = json.loads(line)
            at = float(t_raw)
        except (ValueError, TypeError):
            continue  # a line cut by the size bound or a crash
        if dirty and at - last_t >= interval:
            frame(t)
            last_t = t
            dirty = False
            if len(frames) >= MAX_FRAMES:
                interval *= 2
                frames[:] = frames[::2]
        t = at
        if kind == "o":
            term.feed(str(payload).encode())
            term.flush()
            dirty = True
        elif kind == "r":
            c, _, r = str(payload).partition("x")
            if c.isdigit() and r.isdigit():
                term.resize(int(c), int(r))
                dirty = True
    frame(t)
    return {
        "width": cols,
        "height": rows,
        "title": str(header.get("title", "")),
        "duration": round(t, 3),
        "frames": frames,
    }


def _header(line: bytes) -> dict[str, Any]:
    try:
        header = json.loads(line)
    except ValueError:
        raise NotARecording("not an asciicast file") from None
    if not isinstance(header, dict) or header.get("version") != 2:
        raise NotARecording("not asciicast v2")
    return header
