"""Scenario 1, round trip: ``true`` in bash until the shell is ready again, every way, iterations alternating."""

from __future__ import annotations

import time

from bench import client
from bench.harness import Context, register, rotated
from bench.report import Figure, Results
from bench.shells import IDLE_S, TMUX_POLL_S, BenchShell, FixedWaitShell, PtydShell, RawShell, TmuxShell

WARMUP = 5


def run(ctx: Context, results: Results) -> None:
    iterations = 20 if ctx.quick else 200
    fixed_iterations = 2 if ctx.quick else 20  # each costs 500 ms by construction
    caller = ctx.daemon.connect()
    shells: list[BenchShell] = []
    fixed = FixedWaitShell()
    try:
        shells.append(PtydShell(caller, register(caller, "bench-roundtrip")))
        if client.KIND != "minimal":
            bare = client.MinimalClient(ctx.daemon.socket)
            minimal = PtydShell(bare, register(bare, "bench-roundtrip-minimal"))
            minimal.name = "ptyd, minimal client"
            shells.append(minimal)
        shells += [RawShell(), TmuxShell(ctx.directory)]
        samples: dict[str, list[float]] = {s.name: [] for s in [*shells, fixed]}
        for shell in shells:
            for _ in range(WARMUP):
                shell.run("true")
        every = max(1, iterations // fixed_iterations)
        for i in range(iterations):
            for shell in rotated(shells, i):
                start = time.perf_counter()
                shell.run("true")
                samples[shell.name].append(time.perf_counter() - start)
            if i % every == 0 and len(samples[fixed.name]) < fixed_iterations:
                start = time.perf_counter()
                fixed.run("true")
                samples[fixed.name].append(time.perf_counter() - start)
    finally:
        for shell in [*shells, fixed]:
            shell.close()
        caller.close()

    figure = Figure("1. Round trip: `true` in bash until ready again", "ms", reference="raw")
    notes = {
        "ptyd": f"client: {client.KIND}",
        "ptyd, minimal client": "bare blocking NDJSON client",
        "raw": "in-process PTY, read until the prompt: the floor",
        "tmux": f"send-keys + capture-pane every {1000 * TMUX_POLL_S:.0f} ms",
        "fixed_wait": f"raw PTY, return after {1000 * IDLE_S:.0f} ms of silence",
    }
    for name, values in samples.items():
        figure.add(name, values, notes.get(name, ""), scale=1000)
    results.figures.append(figure.finish())
    ptyd, raw, tmux = figure.row("ptyd"), figure.row("raw"), figure.row("tmux")
    results.target(
        "round trip p50 within 3x raw",
        "<= 3x",
        f"{ptyd.median:.3f} ms = {ptyd.median / raw.median:.1f}x raw ({raw.median:.3f} ms)",
        ptyd.median <= 3 * raw.median,
    )
    results.target(
        "round trip p50 faster than tmux",
        "< 1x tmux",
        f"{ptyd.median / tmux.median:.2f}x tmux ({tmux.median:.2f} ms)",
        ptyd.median < tmux.median,
    )
