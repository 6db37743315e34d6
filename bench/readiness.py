"""Scenario 2, readiness latency: from a program's prompt to the moment the caller knows it may type.

Each program records a wall-clock timestamp just before it prints its prompt (bash ``$EPOCHREALTIME``, Python
``time.time_ns()``) into a file; the latency is the time the caller's wait returned minus that timestamp. The
raw PTY and tmux are told the prompt's text (a harness that knows what to expect); ptyd is told nothing.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench.harness import Context, register, rotated
from bench.report import Figure, Results
from bench.shells import BenchShell, Done, FixedWaitShell, PtydShell, RawShell, TmuxShell


@dataclass(frozen=True)
class Program:
    label: str
    command: Callable[[str, Path, Path], str]  # (python, stamp file, startup file) -> what is typed
    expect: str  # the program's prompt
    answer: str  # what is typed to get back to the shell's prompt


def _bash_read(python: str, stamp: Path, startup: Path) -> str:
    return f"sleep 0.2; echo $EPOCHREALTIME > {shlex.quote(str(stamp))}; read -p 'x> ' x"


def _python_input(python: str, stamp: Path, startup: Path) -> str:
    code = f"import time; time.sleep(0.1); open({str(stamp)!r}, 'w').write(str(time.time_ns())); input('x> ')"
    return f"{shlex.quote(python)} -c {shlex.quote(code)}"


def _python_repl(python: str, stamp: Path, startup: Path) -> str:
    return f"PYTHONSTARTUP={shlex.quote(str(startup))} {shlex.quote(python)} -q"


PROGRAMS = (
    Program("bash: sleep 0.2; read -p", _bash_read, "x> ", ""),
    Program("python: input() after 100 ms", _python_input, "x> ", ""),
    Program("python REPL start", _python_repl, ">>> ", "exit()"),
)

# The REPL imports readline in sys.__interactivehook__, after PYTHONSTARTUP: stamp after that hook, right before
# the first prompt is printed.
_STARTUP = """\
import sys, time
_hook = getattr(sys, "__interactivehook__", None)
def _stamp():
    if _hook is not None:
        _hook()
    with open({stamp!r}, "w") as f:
        f.write(str(time.time_ns()))
sys.__interactivehook__ = _stamp
"""


def _read_stamp(path: Path) -> int:
    text = path.read_text().strip()
    if "." in text:  # bash: seconds with microseconds
        seconds, _, micros = text.partition(".")
        return int(seconds) * 1_000_000_000 + int(micros.ljust(6, "0")[:6]) * 1000
    return int(text)


def run(ctx: Context, results: Results) -> None:
    iterations = 3 if ctx.quick else 30
    fixed_iterations = 1 if ctx.quick else 5
    stamp = ctx.directory / "prompt.stamp"
    startup = ctx.directory / "startup.py"
    startup.write_text(_STARTUP.format(stamp=str(stamp)))
    caller = ctx.daemon.connect()
    shells: list[BenchShell] = []
    fixed = FixedWaitShell()
    try:
        shells += [PtydShell(caller, register(caller, "bench-readiness")), RawShell(), TmuxShell(ctx.directory)]
        for program in PROGRAMS:
            samples: dict[str, list[float]] = {s.name: [] for s in [*shells, fixed]}
            early: dict[str, int] = {}  # returns before the program stamped its prompt (a wait that is too short)
            command = program.command(ctx.python, stamp, startup)
            for i in range(iterations):
                subjects = rotated(shells, i) + ([fixed] if i < fixed_iterations else [])
                for shell in subjects:
                    stamp.unlink(missing_ok=True)
                    try:
                        viewport = shell.run(command, expect=program.expect, timeout=30)
                        returned = time.time_ns()
                        if isinstance(shell, PtydShell) and not viewport.rstrip().endswith(program.expect.rstrip()):
                            results.failures.append(f"readiness {program.label}: ptyd viewport ends {viewport[-60:]!r}")
                        if stamp.exists():
                            samples[shell.name].append((returned - _read_stamp(stamp)) / 1e9)
                        elif isinstance(shell, FixedWaitShell):  # 500 ms of silence before a slow start's prompt
                            early[shell.name] = early.get(shell.name, 0) + 1
                        else:
                            results.failures.append(f"readiness {program.label}: {shell.name} returned early")
                    finally:
                        if isinstance(shell, FixedWaitShell):
                            RawShell.run(shell, program.answer, timeout=30)
                        else:
                            shell.run(program.answer, timeout=30)
            figure = Figure(f"2. Readiness: {program.label}, prompt to send's return", "ms", reference="raw")
            notes = {
                "ptyd": "told nothing; the kernel says stdin read",
                "raw": "told the prompt text; reads the PTY",
                "tmux": "told the prompt text; polls capture-pane",
                "fixed_wait": "500 ms of silence",
            }
            for name, values in samples.items():
                note = notes.get(name, "") + (f"; {early[name]} returned before the prompt" if name in early else "")
                figure.add(name, values, note, scale=1000)
            results.figures.append(figure.finish())
            p95 = figure.row("ptyd").p95
            results.target(f"readiness p95, {program.label}", "< 10 ms", f"{p95:.2f} ms", p95 < 10)
    except Done as exc:
        results.failures.append(f"readiness: {exc}")
    finally:
        for shell in [*shells, fixed]:
            shell.close()
        caller.close()
