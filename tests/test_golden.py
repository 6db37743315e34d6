"""Golden screens: bytes real programs wrote, rendered by ptyd's Terminal, against what tmux rendered from them.

tests/golden/capture.py (run by hand) recorded each program's output inside tmux 3.3a and saved tmux's screen;
see there for how. Here each ``.input`` is fed to a Terminal of the same size, on each engine, in one chunk (the
fast path takes the long plain runs), in 4 KiB reads, and in small random chunks (sequences and UTF-8 split, the
fast path never taken); the visible rows (trailing blanks removed, as capture-pane does), the cursor and the
alternate-screen flag must be tmux's.
"""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import NamedTuple

import pytest

from ptyd.terminal.emulator import Terminal
from ptyd.terminal.engines import native_available, open_terminal

GOLDEN = Path(__file__).resolve().parent / "golden"
HEADER = re.compile(r"cursor (\d+) (\d+) alt ([01]) size (\d+)x(\d+)")

VS16 = "VS16 makes an emoji 2 columns (Unicode, wcwidth, string-width, modern terminals); tmux 3.3a keeps it at 1"
SKIN_TONE = "an emoji and its skin-tone modifier are one 2-column cluster; tmux 3.3a draws them as 2 + 2"
ENGINES = ["ghostty", "pyte"] if native_available() else ["pyte"]
ZERO_WIDTH = "Ghostty drops invisible format characters that join nothing (ZWSP, WJ); tmux and pyte keep them"
# Rows where ptyd deliberately renders otherwise than tmux 3.3a: tmux's row -> (ptyd's row, why), on both engines...
KNOWN_DIFFERENCES = {
    "[✔️]abc#efgh": ("[✔️]ab#defgh", VS16),
    "[⚠️]abc#efgh": ("[⚠️]ab#defgh", VS16),
    "[❤️]abc#efgh": ("[❤️]ab#defgh", VS16),
    "[👍🏽]#bcdefgh": ("[👍🏽]ab#defgh", SKIN_TONE),
}
# ...and on one engine only.
ENGINE_DIFFERENCES = {
    "ghostty": {
        "zero width: ab\u200bcd ef\u2060gh ij\u200ckl rest of line": (
            "zero width: abcd efgh ij\u200ckl rest of line",
            ZERO_WIDTH,
        ),
        "[a\u200bb]ab#defgh": ("[ab]ab#defgh", ZERO_WIDTH),
    },
    "pyte": {},
}
# With autowrap off, tmux and pyte leave the cursor past the last column once it is written; Ghostty keeps it on
# that column, as xterm does (the daemon reports the last column either way).
CURSOR_ON_LAST_COLUMN = {"ghostty": {"top.80x24", "top.160x40"}, "pyte": set()}


class Golden(NamedTuple):
    name: str
    data: bytes
    rows: list[str]
    cursor: tuple[int, int]
    alt: bool
    cols: int
    lines: int


def load(name: str) -> Golden:
    header, *rows = (GOLDEN / f"{name}.screen").read_text().split("\n")[:-1]
    m = HEADER.fullmatch(header)
    assert m is not None, header
    x, y, alt, cols, lines = (int(g) for g in m.groups())
    assert len(rows) == lines
    return Golden(name, (GOLDEN / f"{name}.input").read_bytes(), rows, (x, y), bool(alt), cols, lines)


NAMES = sorted(p.name.removesuffix(".screen") for p in GOLDEN.glob("*.screen"))


def render(golden: Golden, chunks: list[bytes], engine: str) -> Terminal:
    term = open_terminal(
        golden.cols,
        golden.lines,
        scrollback_lines=10_000,
        scrollback_bytes=1 << 22,
        on_reply=lambda _: None,
        emulator=engine,
    )
    for chunk in chunks:
        term.feed(chunk)
        term.process(float("inf"))
    assert term.idle
    return term


def expected_rows(golden: Golden, engine: str) -> list[str]:
    known = KNOWN_DIFFERENCES | ENGINE_DIFFERENCES[engine]
    return [known.get(row, (row, ""))[0] for row in golden.rows]


def random_chunks(data: bytes, seed: str) -> list[bytes]:
    rng = random.Random(seed)
    chunks = []
    pos = 0
    while pos < len(data):
        size = rng.choice((1, 2, 3, 7, 64, 300, 1500))
        chunks.append(data[pos : pos + size])
        pos += size
    return chunks


def test_every_program_has_goldens_at_both_sizes() -> None:
    programs = {name.split(".")[0] for name in NAMES}
    assert len(programs) >= 10
    assert set(NAMES) == {f"{p}.{size}" for p in programs for size in ("80x24", "160x40")}


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("chunking", ["one_chunk", "pty_reads", "random_chunks"])
@pytest.mark.parametrize("engine", ENGINES)
def test_screen_matches_tmux(name: str, chunking: str, engine: str) -> None:
    golden = load(name)
    if chunking == "one_chunk":
        chunks = [golden.data]
    elif chunking == "pty_reads":  # what one read of the PTY master returns under a steady stream
        chunks = [golden.data[i : i + 4096] for i in range(0, len(golden.data), 4096)]
    else:
        chunks = random_chunks(golden.data, name)
    term = render(golden, chunks, engine)
    screen = term.current_screen()
    assert screen.visible_rows() == expected_rows(golden, engine)
    x, y = golden.cursor
    if name in CURSOR_ON_LAST_COLUMN[engine]:
        x = min(x, golden.cols - 1)
    assert (screen.cursor.x, screen.cursor.y) == (x, y)
    assert term.alt_screen == golden.alt


def test_known_differences_are_each_seen() -> None:
    """A recorded difference that no golden shows any more is stale: remove it rather than keep a blind spot."""
    seen = {row for name in NAMES for row in load(name).rows}
    assert set(KNOWN_DIFFERENCES).union(*ENGINE_DIFFERENCES.values()) <= seen
    cursors = {name for name in NAMES if load(name).cursor[0] == load(name).cols}
    assert set().union(*CURSOR_ON_LAST_COLUMN.values()) <= cursors
