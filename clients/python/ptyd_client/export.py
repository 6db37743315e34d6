"""``ptyctl replay ID --gif FILE``: a recording as an animated GIF, rendered on this machine.

The drawing is ptyd's own (an engine replays the output, ``ptyd.terminal.raster`` draws it): this needs the
``ptyd`` distribution with its extra ``screenshot`` here, which a checkout's or a wheel's install has; a client
installed alone says so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ptyd_client.replay import BadRecording, read_cast

NEEDS = (
    "GIF export draws with ptyd's own engine and Pillow: install ptyd with its extra here "
    "(pip install 'ptyd[screenshot]')"
)


def export_gif(
    paths: list[Path], out: str, *, font_size: int | None = None, idle_limit: float | None = None
) -> tuple[dict[str, Any], str]:
    """Write ``paths`` (one session's parts, in order) to ``out`` as one GIF; the result and a line for a person."""
    try:
        from ptyd.backends.recording import animate
        from ptyd.config import Config
        from ptyd.errors import ExtraMissing
        from ptyd.terminal import raster
    except ImportError:
        raise BadRecording(NEEDS) from None
    cfg = Config()  # the documented defaults (ptyd/config.py)
    idle_ms = round(idle_limit * 1000) if idle_limit is not None else cfg.gif_idle_limit_ms
    timing = animate.Timing(cfg.gif_frame_ms, max(idle_ms, 20), cfg.gif_end_hold_ms, cfg.gif_max_frames)
    headers: list[dict[str, Any]] = []
    events: list[tuple[float, str, str]] = []
    offset = 0.0
    for path in paths:
        header, part = read_cast(path)
        headers.append(header)
        last = 0.0
        for t, kind, data in part:
            last = float(t)
            events.append((offset + last, str(kind), str(data)))
        offset += last  # the parts follow each other
    if not headers:
        raise BadRecording("no recording to export")
    try:
        made = animate.frames(headers[0]["width"], headers[0]["height"], events, timing)
        font = raster.fonts(cfg.screenshot_fonts, font_size or cfg.screenshot_font_size, cfg.screenshot_fallback_fonts)
        data = animate.gif(made, font, cfg.gif_end_hold_ms)
    except ExtraMissing as exc:
        raise BadRecording(exc.message) from None
    Path(out).write_bytes(data)
    seconds = sum(made.durations(cfg.gif_end_hold_ms)) / 1000
    cut = f" (cut at {timing.max_frames} frames)" if made.cut else ""
    result = {"path": out, "bytes": len(data), "frames": len(made.screens), "seconds": seconds, "cut": made.cut}
    return result, f"wrote {out}: {len(made.screens)} frames, {seconds:.1f} s, {len(data)} bytes{cut}"
