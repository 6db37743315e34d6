"""Scenario 3b, output that is not plain ASCII lines: what the emulator itself costs, on each engine.

Three kinds of output a program prints until the prompt returns (``cat`` of a file generated here):

- ``progress``: a pip/npm-style progress bar, CR redraws of a braille spinner, box drawing and colour;
- ``tree``: a ``tree``-style listing, box drawing and non-ASCII names, one per line;
- ``top``: a ``top``-style full-screen redraw with cursor addressing, every frame.

ptyd on the native engine (the shared daemon, ``emulator = "auto"``) and on pyte (a daemon of its own), against
draining the same PTY raw and tmux. Each file ends in a unique line, which must be the line before the prompt in
every viewport, pane and stream.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from bench.harness import Context, DaemonProcess, cpu_seconds, register, rotated, with_workers
from bench.report import Figure, Results
from bench.shells import BenchShell, Done, PtydShell, RawShell, TmuxShell
from bench.throughput import IN_DAEMON, MB, _check
from ptyd.terminal.engines import engine_name

SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
NAMES = ("naïve", "café", "résumé", "日本語", "données", "Ärger", "straße", "задача", "файл", "emoji😀")


def progress(size: int) -> bytes:
    out: list[str] = []
    total = 0
    i = 0
    while total < size:
        pct = i % 101
        bar = "━" * (pct * 40 // 100) + "╺" + " " * (40 - pct * 40 // 100)
        spin = f"\x1b[32m{SPINNER[i % 10]}\x1b[0m"
        line = f"\r{spin} Downloading pkg-{i // 101}.whl \x1b[35m{bar}\x1b[0m {pct:3d}% │ {i * 0.7:8.1f} kB"
        if pct == 100:
            line += "\r\n"
        out.append(line)
        total += len(line.encode())
        i += 1
    return "".join(out).encode() + b"\r\n"


def tree(size: int) -> bytes:
    out: list[str] = []
    total = 0
    i = 0
    while total < size:
        depth = i % 5
        branch = "└── " if i % 7 == 6 else "├── "
        line = "│   " * depth + branch + f"{NAMES[i % len(NAMES)]}-{i}.txt\r\n"
        out.append(line)
        total += len(line.encode())
        i += 1
    return "".join(out).encode()


def top(size: int, rows: int = 40) -> bytes:
    out: list[str] = []
    total = 0
    frame = 0
    while total < size:
        parts = [f"\x1b[H\x1b[1mtop - 12:{frame % 60:02d}:00 up 3 days, load average: 0.{frame % 100:02d}\x1b[m\x1b[K"]
        for y in range(2, rows):
            pid = 1000 + (y * 37 + frame) % 9000
            parts.append(
                f"\x1b[{y};1H{pid:7d} user  20   0 {pid * 13 % 99999:8d} {pid % 777:6d} S {y % 9}.{frame % 10} "
                f"{(y + frame) % 5}.3   0:{frame % 60:02d}.{y:02d} proc-{(y + frame) % 50}\x1b[K"
            )
        frame_text = "".join(parts)
        out.append(frame_text)
        total += len(frame_text.encode())
        frame += 1
    return ("".join(out) + f"\x1b[{rows};1H\r\n").encode()


CORPORA = {"progress": (progress, 2_800_000), "tree": (tree, 7_400_000), "top": (top, 4_400_000)}


def make_file(directory: Path, kind: str, quick: bool) -> tuple[Path, str]:
    make, size = CORPORA[kind]
    last = f"END-{kind}-{os.urandom(6).hex()}"
    path = directory / f"render-{kind}.txt"
    path.write_bytes(make(size // 10 if quick else size).replace(b"\r\n", b"\n") + last.encode() + b"\n")
    return path, last


def run(ctx: Context, results: Results) -> None:
    pyte_dir = ctx.directory / "pyte-daemon"
    pyte_dir.mkdir(exist_ok=True)
    pyte_dir.chmod(0o700)
    pyte_daemon = DaemonProcess(pyte_dir, 'emulator = "pyte"\n')
    pyte_daemon.start()
    caller = ctx.daemon.connect()
    pyte_caller = pyte_daemon.connect()
    callers = [caller]
    shells: list[BenchShell] = []
    try:
        native = PtydShell(caller, register(caller, "bench-rendering"))
        native.name = f"ptyd ({engine_name()})"  # engine workers; the bench's daemons resolve "auto" as this one
        fallback = PtydShell(pyte_caller, register(pyte_caller, "bench-rendering"))
        fallback.name = "ptyd (pyte)"
        shells += [native, RawShell(), TmuxShell(ctx.directory)]
        daemons = {native.name: ctx.daemon, fallback.name: pyte_daemon}
        in_name = f"{IN_DAEMON} ({engine_name()})"
        if ctx.in_daemon is not None:
            in_caller = ctx.in_daemon.connect()
            callers.append(in_caller)
            in_native = PtydShell(in_caller, register(in_caller, "bench-rendering"))
            in_native.name = in_name
            shells.append(in_native)
            daemons[in_name] = ctx.in_daemon
        if native.name != fallback.name:
            shells.append(fallback)
        reps = 1 if ctx.quick else 3
        for kind in CORPORA:
            path, expected = make_file(ctx.directory, kind, ctx.quick)
            payload = path.stat().st_size
            rates: dict[str, list[float]] = {s.name: [] for s in shells}
            cpu: dict[str, list[float]] = {name: [] for name in daemons}
            exact = True
            for i in range(reps):
                for shell in rotated(shells, i):
                    daemon = daemons.get(shell.name, ctx.daemon)
                    before = with_workers(cpu_seconds, daemon.pid)
                    start = time.perf_counter()
                    out = shell.run(f"cat {path}", timeout=900)
                    elapsed = time.perf_counter() - start
                    if shell.name in cpu:
                        cpu[shell.name].append((with_workers(cpu_seconds, daemon.pid) - before) / (payload / MB))
                    exact &= _check(results, f"rendering {kind} {shell.name}", out, expected)
                    rates[shell.name].append(payload / MB / elapsed)
            figure = Figure(
                f"3b. Rendering: {kind} {payload / MB:.1f} MB (`cat`) until the prompt",
                "MB/s",
                reference="raw",
                higher_is_better=True,
            )
            for name, values in rates.items():
                note = {"raw": "drain the PTY in-process", "tmux": "tmux renders, capture-pane polled"}.get(name, "")
                if cpu.get(name):
                    where = "daemon" if name == in_name else "daemon + workers"
                    note = f"{where} {sum(cpu[name]) / len(cpu[name]) * 1000:.0f} CPU ms/MB" + (
                        "; tails exact" if exact else "; TAIL MISMATCH"
                    )
                figure.add(name, values, note)
            results.figures.append(figure.finish())
            tmux_rate = figure.row("tmux").median
            for name in (native.name, in_name) if ctx.in_daemon is not None else (native.name,):
                ptyd_rate = figure.row(name).median
                ratio = figure.row(name).ratio or 0.0
                results.target(
                    f"{kind}: {name} vs tmux, vs raw",
                    ">= 1x, >= 0.5x",
                    f"{ptyd_rate / tmux_rate:.2f}x, {ratio:.2f}x",
                    ptyd_rate >= tmux_rate and ratio >= 0.5 and exact,
                )
            path.unlink()
    except Done as exc:
        results.failures.append(f"rendering: {exc}")
    finally:
        for shell in shells:
            shell.close()
        for each in callers:
            each.close()
        pyte_caller.close()
        pyte_daemon.stop()
