"""Scenario 8, memory over time (issue 28): do the engine workers and the daemon give back what sessions took?

A fresh daemon of its own (engine workers, the default). First rounds of opening ``OPENS`` shells and closing them
all, then rounds of opening ``FLOODS`` shells that print ``seq inf`` for ``FLOOD_S`` and closing them (the floods
still running). After each round, once the closes are done and ``SETTLE_S`` has passed, the resident size of every
engine worker (their pids from daemon_info's ``engine_workers``) and of the daemon. Reported in MiB per round and as
a ratio to the first round of its kind: what the allocators keep after the first round is a plateau; a leak grows
round over round. A worker recycled for its memory (``engine_worker_rss_mb``) would hide a leak, so the figure says
how many were.
"""

from __future__ import annotations

import math
import time
from typing import Any

from bench.harness import Context, DaemonProcess, register, rss_bytes
from bench.report import Figure, Results, Row
from bench.scale import FLOOD
from bench.shells import PtydShell

MIB = 1024 * 1024
SETTLE_S = 1.0  # after the last close: the workers drop a closed session's engine when the daemon tells them
GOALS = {"open/close": 1.10, "flood": 1.20}  # the last rounds over the first, from issue 28


def _daemon(ctx: Context) -> DaemonProcess:
    directory = ctx.directory / "memory"
    directory.mkdir()
    directory.chmod(0o700)
    profile = ctx.profile_dir / "memory.pstats" if ctx.profile_dir else None
    return DaemonProcess(directory, "max_sessions = 1024\nmax_sessions_per_agent = 1000\n", profile=profile)


def _sizes(daemon: DaemonProcess, info: dict[str, Any]) -> tuple[list[float], float]:
    """Each engine worker's RSS and the daemon's, in MiB."""
    workers = info.get("engine_workers") or {}
    return [rss_bytes(pid) / MIB for pid in workers.get("pids", [])], rss_bytes(daemon.pid) / MIB


def _round(daemon: DaemonProcess, name: str, sessions: int, flood_s: float) -> dict[str, Any]:
    """Open ``sessions`` shells (printing ``FLOOD`` for ``flood_s`` when it is > 0), close them all, settle."""
    caller = daemon.connect()
    try:
        token = register(caller, name)
        shells = [PtydShell(caller, token) for _ in range(sessions)]
        if flood_s:
            for shell in shells:
                shell.send(FLOOD + "\n", wait=False)
            time.sleep(flood_s)
        caller.call("agent_release", token=token)  # closes every session the agent has, floods and all
        time.sleep(SETTLE_S)
        info: dict[str, Any] = caller.call("daemon_info")
        return info
    finally:
        caller.close()


def run(ctx: Context, results: Results) -> None:
    opens, open_rounds, floods, flood_rounds, flood_s = (40, 2, 5, 2, 1.0) if ctx.quick else (500, 4, 50, 3, 2.0)
    figure = Figure(
        "8. Memory: engine workers' and daemon's RSS after rounds of opening and closing sessions",
        "MiB",
        reference="round 1 of its kind",
    )
    daemon = _daemon(ctx)
    daemon.start()
    try:
        caller = daemon.connect()
        try:
            token = register(caller, "bench-memory-warm")
            PtydShell(caller, token).close()  # warm: the first open imports and allocates what all share
            time.sleep(SETTLE_S)
            workers, own = _sizes(daemon, caller.call("daemon_info"))
        finally:
            caller.close()
        figure.rows.append(Row("before, workers", 0, sum(workers), math.nan, note=_each(workers)))
        figure.rows.append(Row("before, daemon", 0, own, math.nan))
        plan = [("open/close", opens, 0.0)] * open_rounds + [("flood", floods, flood_s)] * flood_rounds
        first: dict[str, tuple[float, float]] = {}
        worst: dict[str, tuple[float, float]] = {}
        info: dict[str, Any] = {}
        for i, (kind, sessions, seconds) in enumerate(plan):
            info = _round(daemon, f"bench-memory-{i}", sessions, seconds)
            workers, own = _sizes(daemon, info)
            k = sum(1 for each in plan[: i + 1] if each[0] == kind)
            base = first.setdefault(kind, (sum(workers), own))
            ratios = (sum(workers) / base[0] if base[0] else math.nan, own / base[1])
            seen = worst.get(kind, (0.0, 0.0))
            worst[kind] = (max(seen[0], ratios[0]), max(seen[1], ratios[1]))
            what = f"{sessions} shells" + (f" printing `{FLOOD}` for {seconds:.0f} s" if seconds else "")
            label = f"{kind} {k}"
            figure.rows.append(
                Row(f"{label}, workers", sessions, sum(workers), math.nan, ratios[0], note=f"{what}; {_each(workers)}")
            )
            figure.rows.append(Row(f"{label}, daemon", sessions, own, math.nan, ratios[1]))
        pool = info.get("engine_workers") or {}
        if pool.get("recycled") or pool.get("restarts"):
            figure.rows[0].note += f"; {pool['recycled']} recycled, {pool['restarts']} restarted: a leak may hide"
        for kind, (of_workers, of_daemon) in worst.items():
            goal = GOALS[kind]
            results.target(
                f"RSS after {kind} rounds, over the first round",
                f"<= {goal:.2f}x (workers, daemon)",
                f"{of_workers:.2f}x, {of_daemon:.2f}x",
                of_workers <= goal and of_daemon <= goal,
            )
    finally:
        code = daemon.stop()
        if code != 0:
            results.failures.append(f"memory daemon exited with {code}")
    results.figures.append(figure)


def _each(workers: list[float]) -> str:
    return f"{len(workers)} workers: " + ", ".join(f"{mib:.1f}" for mib in workers) + " MiB"
