"""bench/loop_stalls.py against a loop held on purpose: the hold is seen, charged to the callback that held it."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from bench.loop_stalls import report, watch

from .conftest import run


def _hold() -> None:
    until = time.perf_counter() + 0.2
    while time.perf_counter() < until:  # pure Python: the watcher gets the GIL only at the interpreter's switches
        pass


def test_a_held_loop_is_reported_where_it_was_held(tmp_path: Path) -> None:
    out = tmp_path / "stalls"

    async def main() -> None:
        stop = watch(asyncio.get_running_loop(), sink)
        try:
            await asyncio.sleep(0.01)
            asyncio.get_running_loop().call_soon(_hold)
            await asyncio.sleep(0.05)
        finally:
            stop()

    with open(out, "w") as sink:
        run(main)
    text = report(out)
    first = text.splitlines()[0]
    assert int(first.split(" holds")[0]) >= 1, text
    longest = float(first.rsplit("longest ", 1)[1].removesuffix(" ms"))
    assert longest >= 150, text
    assert "_hold" in text, text
