"""Scenario 7, cold start: how long the first program of a fresh daemon waits for its first terminal queries' answers.

Programs probe the terminal as they start (DA1 ``ESC [ c``, a cursor report ``ESC [ 6 n``) and give up after
100-500 ms. Each iteration starts a daemon of its own, opens one session running ``PROBE`` as soon as the daemon
answers, and reads the probe's own timings off the screen (from its write of the query to the answer's last byte).
The reference is the same probe on the bench's shared daemon, warm (its engine workers up long since); tmux is
the same probe as the first window of a fresh tmux server.
"""

from __future__ import annotations

import contextlib
import math
import re
import subprocess
import time
from pathlib import Path

from bench.harness import Context, DaemonProcess, register
from bench.report import Figure, Results

TIMEOUT_S = 0.1  # the probe's wait for each answer: what impatient programs give a terminal
GOAL_MS = 50.0
# Run by the session: asks, times each answer, prints one line per query, then waits on a line of input (ready).
PROBE = r"""
import os, select, termios, time, tty


def ask(query, end):
    os.write(1, query)
    start = time.perf_counter()
    got = b""
    while not got.endswith(end):
        left = start + TIMEOUT - time.perf_counter()
        if left <= 0 or not select.select([0], [], [], left)[0]:
            return None
        got += os.read(0, 64)
    return time.perf_counter() - start


TIMEOUT = TIMEOUT_S
saved = termios.tcgetattr(0)
tty.setraw(0)
try:
    took = [(name, ask(query, end)) for name, query, end in (("DA1", b"\x1b[c", b"c"), ("CPR", b"\x1b[6n", b"R"))]
finally:
    termios.tcsetattr(0, termios.TCSANOW, saved)
for name, seconds in took:
    print(f"probe {name} " + ("timeout" if seconds is None else f"{seconds * 1000:.3f} ms"))
input()
""".replace("TIMEOUT_S", repr(TIMEOUT_S))
_RESULT = re.compile(r"probe (DA1|CPR) (?:timeout|([0-9.]+) ms)")


def probe_results(lines: list[str]) -> dict[str, float | None] | None:
    """The probe's timings (ms; None: no answer within its timeout) once it printed both, else None."""
    found: dict[str, float | None] = {}
    for line in lines:
        if m := _RESULT.fullmatch(line.strip()):
            found[m.group(1)] = float(m.group(2)) if m.group(2) else None
    return found if len(found) == 2 else None


def _ptyd_probe(daemon: DaemonProcess, probe: Path, python: str) -> dict[str, float | None]:
    caller = daemon.connect()
    try:
        token = register(caller, "bench-cold-start")
        opened = caller.call("terminal_open", token=token, type="exec", argv=[python, str(probe)])
        sid = opened["session_id"]
        deadline = time.monotonic() + 30
        try:
            while True:
                lines = caller.call("terminal_screen", token=token, session_id=sid)["lines"]
                results = probe_results(lines)
                if results is not None:
                    return results
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the probe printed nothing: {lines}")
                time.sleep(0.01)
        finally:
            caller.call("terminal_close", token=token, session_id=sid)
    finally:
        caller.close()


def _tmux_probe(directory: Path, probe: Path, python: str) -> dict[str, float | None]:
    socket = directory / "tmux-cold.sock"
    tmux = ["tmux", "-S", str(socket)]
    subprocess.run(
        [*tmux, "-f", "/dev/null", "new-session", "-d", "-x", "80", "-y", "24", python, str(probe)], check=True
    )
    try:
        deadline = time.monotonic() + 30
        while (results := probe_results(_capture(tmux))) is None:
            if time.monotonic() > deadline:
                raise RuntimeError("tmux: the probe printed nothing")
            time.sleep(0.01)
        return results
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True, check=False)
        socket.unlink(missing_ok=True)


def _capture(tmux: list[str]) -> list[str]:
    return subprocess.run([*tmux, "capture-pane", "-p"], capture_output=True, text=True, check=False).stdout.split("\n")


def run(ctx: Context, results: Results) -> None:
    iterations = 3 if ctx.quick else 10
    probe = ctx.directory / "cold_probe.py"
    probe.write_text(PROBE)
    samples: dict[str, dict[str, list[float]]] = {}
    timeouts: dict[str, int] = {}

    def record(subject: str, got: dict[str, float | None]) -> None:
        for query, ms in got.items():
            key = f"{subject}, {query}"
            if ms is None:
                timeouts[key] = timeouts.get(key, 0) + 1
                ms = TIMEOUT_S * 1000  # at least this: shown as the timeout, counted apart
            samples.setdefault(key, {}).setdefault("ms", []).append(ms / 1000)

    for i in range(iterations):
        directory = ctx.directory / f"cold-{i}"
        directory.mkdir(mode=0o700)
        daemon = DaemonProcess(directory)
        daemon.start(settle=False)  # what is measured: its workers are starting
        try:
            record("ptyd, fresh daemon", _ptyd_probe(daemon, probe, ctx.python))
        finally:
            daemon.stop()
        record("ptyd, warm daemon", _ptyd_probe(ctx.daemon, probe, ctx.python))
        with contextlib.suppress(FileNotFoundError, subprocess.CalledProcessError):
            record("tmux, fresh server", _tmux_probe(directory, probe, ctx.python))

    figure = Figure("7. Cold start: the first DA1 and CPR answers of a fresh daemon", "ms", "ptyd, warm daemon, DA1")
    notes = {
        "ptyd, fresh daemon": "a daemon of its own, the session opened once it answers",
        "ptyd, warm daemon": "the shared daemon, engine workers up",
        "tmux, fresh server": "the first window of a new server",
    }
    for key, values in samples.items():
        subject = key.rsplit(", ", 1)[0]
        late = timeouts.get(key, 0)
        note = notes[subject] + (
            f"; {late} of {len(values['ms'])} unanswered in {TIMEOUT_S * 1000:.0f} ms" if late else ""
        )
        figure.add(key, values["ms"], note, scale=1000)
    results.figures.append(figure.finish())
    for query in ("DA1", "CPR"):
        key = f"ptyd, fresh daemon, {query}"
        cold = figure.row(key)
        ok = not math.isnan(cold.median) and cold.p95 <= GOAL_MS and not timeouts.get(key)
        measured = f"{cold.p95:.1f} ms (median {cold.median:.1f})"
        results.target(f"first {query} answer of a fresh daemon (p95)", f"<= {GOAL_MS:.0f} ms", measured, ok)
