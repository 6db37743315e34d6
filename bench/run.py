"""ptyd's benchmark suite (``make bench``): ptyd side by side with a raw PTY, tmux and a fixed idle wait.

Every figure is a ratio against a reference measured in the same run, iterations alternating, because the
machine is shared and absolute numbers drift. ``--quick`` is a smoke run of about a minute. Tables go to stdout,
everything to ``bench/results/latest.json``. Exit status 1 means a failure (a wrong tail, an error), not a
missed target: targets are reported, never asserted.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import (
    client,
    cold_start,
    memory,
    profiling,
    readiness,
    recording,
    rendering,
    roundtrip,
    rpc_overhead,
    scale,
    send_phases,
    throughput,
)
from bench.harness import Context, DaemonProcess, private_dir
from bench.report import Results, commit, format_figure, format_results, machine, write_json

Scenario = Callable[[Context, Results], None]
SCENARIOS: dict[str, Scenario] = {
    "roundtrip": roundtrip.run,
    "readiness": readiness.run,
    "throughput": throughput.run,
    "rendering": rendering.run,
    "scale": scale.run,
    "phases": send_phases.run,
    "rpc": rpc_overhead.run,
    "recording": recording.run,
    "cold_start": cold_start.run,
    "memory": memory.run,
}
DEFAULT_JSON = Path(__file__).resolve().parent / "results" / "latest.json"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="bench/run.py", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: few iterations, small sizes (~1 min)")
    parser.add_argument("--only", action="append", choices=sorted(SCENARIOS), help="run only these (repeatable)")
    parser.add_argument("--client", choices=client.available_kinds(), default=client.available_kinds()[0])
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON, help=f"results file (default {DEFAULT_JSON})")
    parser.add_argument(
        "--profile", type=Path, metavar="DIR", help="run every daemon under cProfile; write .pstats and top lists"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    client.KIND = args.client
    names = args.only or list(SCENARIOS)
    python = shutil.which("python3") or sys.executable
    results = Results()
    started = time.monotonic()
    meta = {
        "machine": machine(),
        "commit": commit(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "client": client.KIND,
        "quick": args.quick,
        "scenarios": names,
    }
    print(f"ptyd bench: {', '.join(names)}; client {client.KIND}; {meta['machine']}", flush=True)
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
    with private_dir() as directory:
        profile = args.profile / "shared-daemon.pstats" if args.profile else None
        shared = directory / "shared"
        shared.mkdir()
        shared.chmod(0o700)
        daemon = DaemonProcess(shared, profile=profile)
        daemon.start()
        in_daemon_dir = directory / "in-daemon"
        in_daemon_dir.mkdir()
        in_daemon_dir.chmod(0o700)
        in_daemon = DaemonProcess(in_daemon_dir, 'engine_process = "daemon"\n')
        in_daemon.start()
        try:
            ctx = Context(directory, daemon, args.quick, python, args.profile, in_daemon)
            for name in names:
                before = len(results.figures)
                began = time.monotonic()
                try:
                    SCENARIOS[name](ctx, results)
                except Exception as exc:
                    results.failures.append(f"{name}: {type(exc).__name__}: {exc}")
                    traceback.print_exc()
                for figure in results.figures[before:]:
                    print("\n" + format_figure(figure), flush=True)
                print(f"({name}: {time.monotonic() - began:.0f} s)", flush=True)
        finally:
            in_daemon.stop()
            code = daemon.stop()
            if code != 0:
                results.failures.append(f"shared daemon exited with {code}:\n{daemon.log()[-2000:]}")
    if args.profile:
        for path in sorted(args.profile.glob("*.pstats")):  # the shared daemon's and each scale daemon's
            text = profiling.top(path)
            if path == profile:
                print(text)
        print(f"profiles and their top lists (.txt) in {args.profile}")
    meta["elapsed_s"] = round(time.monotonic() - started, 1)
    meta["loadavg_at_end"] = os.getloadavg()
    write_json(results, args.json, meta)
    print("\n" + format_results(results))
    print(f"\n{meta['elapsed_s']} s; results in {args.json}")
    return 1 if results.failures else 0


if __name__ == "__main__":
    sys.exit(main())
