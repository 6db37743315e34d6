"""Where the daemon's event loop holds: ``python bench/loop_stalls.py OUT ARGS...`` runs ``ptyd ARGS...`` with a
watcher thread that records the main thread's stack while the loop is late; ``python bench/loop_stalls.py
--report OUT`` sums those holds by where they were.

The loop runs a beat every millisecond; the watcher looks every 2 ms, and while the beat is more than 6 ms late
(a callback, or the poll, holds the loop) it samples the main thread's stack: each sample stands for 2 ms of a
hold. Sampling favours system calls (the watcher gets the GIL where the main thread lets go of it), so a hold
inside a read is seen more surely than one in pure Python: compare holds, not samples. cProfile
(``profile_daemon.py``) says what costs CPU; this says what makes a send wait.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import threading
import time
import traceback
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

BEAT_S = 0.001
LOOK_S = 0.002  # each sample stands for this long
LATE_S = 0.006
BUCKETS_MS = (10, 20, 40)


def watch(loop: asyncio.AbstractEventLoop, out: TextIO, late_s: float = LATE_S) -> Callable[[], None]:
    """Start beating on ``loop`` (call from its thread) and watching it; returns how to stop. A hold is a line
    ``H <beat before it> <ms>``, written by the beat after it; each sample is a line ``S <beat> <late ms> <stack,
    outermost first>``: the samples of one hold share its beat."""
    main = threading.get_ident()
    last = [time.perf_counter()]
    stopped = threading.Event()
    lock = threading.Lock()

    def beat() -> None:
        now = time.perf_counter()
        if now - last[0] > late_s + BEAT_S:
            with lock:
                out.write(f"H {last[0]:.6f} {(now - last[0] - BEAT_S) * 1000:.1f}\n")
        last[0] = now
        if not stopped.is_set():
            loop.call_later(BEAT_S, beat)

    def watcher() -> None:
        while not stopped.wait(LOOK_S):
            beaten = last[0]
            late = time.perf_counter() - beaten
            if late <= late_s:
                continue
            frame = sys._current_frames().get(main)
            stack = ";".join(
                f"{f.name} ({_short(f.filename)}:{f.lineno})" for f in traceback.extract_stack(frame)[-16:]
            )
            with lock:
                out.write(f"S {beaten:.6f} {late * 1000:.1f} {stack}\n")

    beat()
    thread = threading.Thread(target=watcher, name="loop-stalls", daemon=True)
    thread.start()

    def stop() -> None:
        stopped.set()
        thread.join()
        out.flush()

    return stop


def _short(filename: str) -> str:
    """A path from the package down (``ptyd/backends/os/channel.py``), or the file's name."""
    parts = Path(filename).parts
    for root in ("ptyd", "asyncio", "bench"):
        if root in parts:
            return "/".join(parts[parts.index(root) :])
    return Path(filename).name


def _site(stack: str) -> str:
    """Where a sample is charged: the innermost ptyd frame, with the two around it."""
    frames = stack.split(";")
    inner = [i for i, f in enumerate(frames) if "(ptyd/" in f]
    at = inner[-1] if inner else len(frames) - 1
    return " <- ".join(f.split(" (")[0] for f in reversed(frames[max(0, at - 2) : at + 1]))


def report(path: Path, top: int = 15) -> str:
    holds: dict[str, float] = {}  # a hold's beat before it -> how long it held the loop
    sites: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])  # site -> [sampled ms, holds]
    seen: set[tuple[str, str]] = set()
    for line in path.read_text().splitlines():
        if line.startswith("H "):
            _, beaten, held = line.split(" ")
            holds[beaten] = float(held)
            continue
        if not line.startswith("S "):
            continue
        _, beaten, _late, stack = line.split(" ", 3)
        site = _site(stack)
        sites[site][0] += LOOK_S * 1000
        if (beaten, site) not in seen:
            seen.add((beaten, site))
            sites[site][1] += 1
    lengths = list(holds.values())
    counts = ", ".join(f"{sum(1 for h in lengths if h > b)} over {b} ms" for b in BUCKETS_MS)
    longest = max(lengths, default=0.0)
    lines = [f"{len(lengths)} holds of the loop over {LATE_S * 1000:.0f} ms ({counts}); longest {longest:.1f} ms"]
    for site, (sampled, count) in sorted(sites.items(), key=lambda item: -item[1][0])[:top]:
        lines.append(f"{sampled:8.0f} ms sampled in {count:4.0f} holds  {site}")
    return "\n".join(lines)


def run(out: Path, args: list[str]) -> None:
    """ptyd ``args`` under the watcher, its samples appended to ``out``."""
    from ptyd.cli import main as ptyd_main

    original = asyncio.Runner.run
    sink = open(out, "a", buffering=1)  # noqa: SIM115 (open for the daemon's whole life)

    def watched(self: asyncio.Runner, coro: Any, **kw: Any) -> Any:
        async def main() -> Any:
            stop = watch(asyncio.get_running_loop(), sink)
            try:
                return await coro
            finally:
                stop()

        return original(self, main(), **kw)

    asyncio.Runner.run = watched  # type: ignore[method-assign]
    with sink, contextlib.suppress(SystemExit, KeyboardInterrupt):
        ptyd_main(args)


if __name__ == "__main__":
    if sys.argv[1] == "--report":
        print(report(Path(sys.argv[2])))
    else:
        sys.path.insert(0, os.getcwd())
        run(Path(sys.argv[1]), sys.argv[2:])
