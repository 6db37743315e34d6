"""Scenario 3, output throughput: ``seq`` and ``cat`` of 10, 50 and 200 MB through a send that waits for the prompt.

ptyd against draining the same PTY raw (the physical limit) and tmux. Every run's tail is checked: the line
before the new prompt must be the last line of the output, in ptyd's viewport and in its scrollback (via
``terminal_read``), in the raw stream and in tmux's pane; a mismatch is a failure. The daemon's CPU seconds
(utime + stime) per MB come from /proc.
"""

from __future__ import annotations

import base64
import os
import re
import time
from pathlib import Path

from bench.harness import Context, cpu_seconds, register, rotated, with_workers
from bench.report import Figure, Results
from bench.shells import BenchShell, Done, PtydShell, RawShell, TmuxShell

MB = 1_000_000
LINE = 100  # bytes per line of the cat files, newline included (shorter than the 160 columns: no wrapping)
IN_DAEMON = "ptyd in-daemon"  # engine_process = "daemon": the engine in the daemon's process, the reference
_PROMPT_LINE = re.compile(r"^(\x1b\[\?2004h)?\[\d+\]bench\$ ?$")


def seq_count(size: int) -> int:
    """The k for which ``seq 1 k`` prints about ``size`` bytes."""
    k, total, digits = 0, 0, 1
    while True:
        block = 9 * 10 ** (digits - 1)
        if total + block * (digits + 1) >= size:
            return k + (size - total) // (digits + 1)
        k, total, digits = k + block, total + block * (digits + 1), digits + 1


def seq_bytes(k: int) -> int:
    total, digits, start = 0, 1, 1
    while start <= k:
        end = min(k, 10**digits - 1)
        total += (end - start + 1) * (digits + 1)
        start, digits = end + 1, digits + 1
    return total


def make_cat_file(directory: Path, size: int) -> tuple[Path, str]:
    """``size`` bytes of base64 lines ending in a unique last line; returns the path and that line."""
    path = directory / f"cat-{size // MB}MB.txt"
    width = LINE - 1
    last = f"END-{size}-" + base64.b32encode(os.urandom(10)).decode()
    remaining = size - len(last) - 1
    body_lines, filler = divmod(remaining, LINE)
    with open(path, "wb") as f:
        written = 0
        while written < body_lines:
            n = min(100_000, body_lines - written)
            raw = base64.b64encode(os.urandom(n * width * 3 // 4 + 3))
            f.write(b"".join(raw[i * width : (i + 1) * width] + b"\n" for i in range(n)))
            written += n
        if filler:
            f.write(b"x" * (filler - 1) + b"\n")
        f.write(last.encode() + b"\n")
    return path, last


def line_before_prompt(text: str) -> str | None:
    """The line just above the last prompt line of a screen or stream (CRLF or LF), or None without a prompt."""
    lines = [line.rstrip("\r") for line in text.split("\n")]
    while lines and not lines[-1].strip():
        lines.pop()
    if len(lines) < 2 or not _PROMPT_LINE.match(lines[-1]):
        return None
    return lines[-2].rstrip()


def _check(results: Results, where: str, text: str, expected: str) -> bool:
    got = line_before_prompt(text)
    if got != expected:
        results.failures.append(f"throughput {where}: tail is {got!r}, expected {expected!r}")
        return False
    return True


def run(ctx: Context, results: Results) -> None:
    plan = {10 * MB: 1} if ctx.quick else {10 * MB: 3, 50 * MB: 2, 200 * MB: 1}
    caller = ctx.daemon.connect()
    callers = [caller]
    shells: list[BenchShell] = []
    try:
        ptyd = PtydShell(caller, register(caller, "bench-throughput"))
        shells += [ptyd, RawShell(), TmuxShell(ctx.directory)]
        daemons = {ptyd.name: ctx.daemon}
        if ctx.in_daemon is not None:
            in_caller = ctx.in_daemon.connect()
            callers.append(in_caller)
            in_ptyd = PtydShell(in_caller, register(in_caller, "bench-throughput"))
            in_ptyd.name = IN_DAEMON
            shells.append(in_ptyd)
            daemons[IN_DAEMON] = ctx.in_daemon
        for kind in ("seq", "cat"):
            for size, reps in plan.items():
                if kind == "seq":
                    k = seq_count(size)
                    command, expected, payload = f"seq 1 {k}", str(k), seq_bytes(k)
                else:
                    path, expected = make_cat_file(ctx.directory, size)
                    command, payload = f"cat {path}", size
                rates: dict[str, list[float]] = {s.name: [] for s in shells}
                cpu_per_mb: dict[str, list[float]] = {name: [] for name in daemons}
                exact = True
                for i in range(reps):
                    for shell in rotated(shells, i):
                        daemon = daemons.get(shell.name, ctx.daemon)
                        cpu = with_workers(cpu_seconds, daemon.pid)
                        start = time.perf_counter()
                        out = shell.run(command, timeout=900)
                        elapsed = time.perf_counter() - start
                        where = f"{kind} {size // MB} MB {shell.name}"
                        if isinstance(shell, PtydShell):
                            spent = with_workers(cpu_seconds, daemon.pid) - cpu
                            cpu_per_mb[shell.name].append(spent / (payload / MB))
                            tail = shell.call("terminal_read", start_line=-50, max_lines=50)["lines"]
                            exact &= _check(results, where + " viewport", out, expected)
                            exact &= _check(results, where + " scrollback", "\n".join(tail), expected)
                        elif isinstance(shell, TmuxShell):
                            exact &= _check(results, where + " pane", out, expected)
                        else:
                            exact &= _check(results, where + " stream", out, expected)
                        rates[shell.name].append(payload / MB / elapsed)
                figure = Figure(
                    f"3. Throughput: {kind} {payload / MB:.0f} MB (`{command.rsplit('/', 1)[-1]}`) until the prompt",
                    "MB/s",
                    reference="raw",
                    higher_is_better=True,
                )
                exactness = "; tails exact" if exact else "; TAIL MISMATCH"
                notes = {
                    name: f"daemon{' + workers' if name == 'ptyd' else ''} "
                    f"{sum(values) / len(values) * 1000:.1f} CPU ms/MB" + exactness
                    for name, values in cpu_per_mb.items()
                }
                notes["ptyd"] = "engine workers; " + notes["ptyd"]
                notes["raw"] = "drain the PTY in-process: the physical limit"
                notes["tmux"] = "tmux renders, capture-pane polled"
                for name, values in rates.items():
                    figure.add(name, values, notes[name])
                figure.unavailable("fixed_wait", "not run: the raw drain plus 500 ms, by construction")
                results.figures.append(figure.finish())
                for name in daemons:
                    ratio = figure.row(name).ratio or 0.0
                    label = f"{kind} {size // MB} MB vs raw ({name})"
                    if kind == "seq":
                        results.target(label, ">= 0.8x", f"{ratio:.2f}x", ratio >= 0.8 and exact)
                    elif size == max(plan):
                        results.target(label, ">= 0.5x", f"{ratio:.2f}x", ratio >= 0.5 and exact)
                if kind == "cat":
                    path.unlink()
    except Done as exc:
        results.failures.append(f"throughput: {exc}")
    finally:
        for shell in shells:
            shell.close()
        for each in callers:
            each.close()
