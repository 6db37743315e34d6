"""A recording as an animated GIF: its output replayed through an engine, the screen drawn at most every
``frame_ms``, pauses cut to ``idle_limit_ms`` (config's gif_* settings), through ``raster``."""

from __future__ import annotations

import io
import itertools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ptyd.terminal import raster
from ptyd.terminal.emulator import Terminal
from ptyd.terminal.engines import open_terminal
from ptyd.terminal.styled import StyledScreen


@dataclass(frozen=True)
class Timing:
    frame_ms: int
    idle_limit_ms: int
    end_hold_ms: int
    max_frames: int


@dataclass
class Frames:
    """The screens to show and when each starts, in ms of the (pause-cut) recording; ``cut``: the recording went
    on past ``max_frames``."""

    screens: list[tuple[StyledScreen, int]]
    cut: bool = False

    def durations(self, end_hold_ms: int) -> list[int]:
        starts = [start for _, start in self.screens]
        return [b - a for a, b in itertools.pairwise(starts)] + [end_hold_ms]


def _size(data: str) -> tuple[int, int] | None:
    cols, _, rows = data.partition("x")
    return (int(cols), int(rows)) if cols.isdigit() and rows.isdigit() else None


def frames(
    cols: int, rows: int, events: Iterable[tuple[float, str, str]], timing: Timing, emulator: str = "auto"
) -> Frames:
    """Replay ``events`` (asciicast v2: seconds, kind, data; output "o" and resizes "r") on a terminal of
    ``cols`` x ``rows``. A frame is the screen as the output left it, starting when that output came; the next
    one is taken once output comes ``frame_ms`` or more after it started, so a flood is a few frames a second."""
    term: Terminal = open_terminal(
        cols, rows, scrollback_lines=16, scrollback_bytes=65536, on_reply=lambda _: None, emulator=emulator
    )
    out = Frames([])

    def show(start: int) -> None:
        if out.screens and out.screens[-1][1] >= start:  # the same moment: the newer screen replaces it
            out.screens.pop()
        out.screens.append((_styled(term), start))

    try:
        clock = 0  # ms into the recording, pauses cut
        previous_s: float | None = None
        state_at: int | None = None  # when the output not shown yet came (None: all of it is shown)
        for seconds, kind, data in events:
            if kind not in ("o", "r"):
                continue
            if previous_s is not None:
                clock += min(max(round((float(seconds) - previous_s) * 1000), 0), timing.idle_limit_ms)
            previous_s = float(seconds)
            if state_at is not None and (not out.screens or state_at - out.screens[-1][1] >= timing.frame_ms):
                if len(out.screens) >= timing.max_frames - 1:
                    out.cut = True
                    break
                show(state_at)
                state_at = None
            if kind == "o":
                term.feed(data.encode("utf-8", errors="replace"))
            elif (size := _size(data)) is not None:
                term.resize(*size)
            state_at = clock
        if state_at is not None or not out.screens:
            show(state_at or 0)
    finally:
        term.close()
    return out


def _styled(term: Terminal) -> StyledScreen:
    term.flush()
    term.process(float("inf"))
    return term.styled()


def gif(made: Frames, font: raster.Fonts, end_hold_ms: int) -> bytes:
    """The frames as a looping GIF; every frame the first one's size (a resize crops or pads)."""
    image_mod, _, _ = raster.pil()
    durations = made.durations(end_hold_ms)
    first = raster.draw(made.screens[0][0], font)
    size = first.size
    images: list[Any] = []
    for (screen, _), _ms in zip(made.screens, durations, strict=True):
        image = raster.draw(screen, font)
        if image.size != size:
            canvas = image_mod.new("RGB", size, raster.BACKGROUND)
            canvas.paste(image, (0, 0))
            image = canvas
        images.append(image.quantize(colors=256, method=image_mod.Quantize.FASTOCTREE))  # 1 byte a pixel kept
    out = io.BytesIO()
    images[0].save(
        out, "GIF", save_all=True, append_images=images[1:], duration=[max(ms, 20) for ms in durations], loop=0
    )
    return out.getvalue()
