"""Feed terminal output to one engine in a process of its own, so that a native crash costs only this process.

``python tests/hostile/probe.py MODE`` writes ``r`` once started, reads cases from stdin and writes ``k`` after each
case it survived; a case is a count of steps, then per step ``cols rows length`` (u16 u16 u32, little endian) and
that many bytes of output, written after a resize to ``cols`` x ``rows`` (the first step's size is the size the
terminal starts at). MODE is:

- ``raw``: pyghostty's own ``Terminal`` (libghostty-vt as anyone would drive it), its text read after each step;
- ``engine``: ptyd's native engine (``GhosttyTerminal``: REP split, history harvested, rows read back);
- ``pyte``: ptyd's pyte engine. An exception it raises ends the probe with the exception on stderr.

``Runner`` is the parent's side: it restarts the probe after a crash and says which case crashed and how.
"""

from __future__ import annotations

import contextlib
import os
import struct
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
Step = tuple[int, int, bytes]  # cols, rows, output written at that size
_STEP = struct.Struct("<HHI")


def encode(steps: list[Step]) -> bytes:
    return struct.pack("<I", len(steps)) + b"".join(_STEP.pack(c, r, len(d)) + d for c, r, d in steps)


def _read(stream: Any, size: int) -> bytes:
    data = stream.read(size)
    if len(data) != size:
        raise EOFError
    return bytes(data)


def _terminal(mode: str, cols: int, rows: int) -> Any:
    if mode == "raw":
        import pyghostty

        from ptyd.terminal.ghostty_history import HISTORY_LINES

        term = pyghostty.Terminal(cols, rows, scrollback=HISTORY_LINES, fg=(0xE5, 0xE5, 0xE5), bg=(0, 0, 0))
        term.on_reply(lambda _data: None)
        return term
    from ptyd.terminal.emulator import Terminal

    emulator = "ghostty" if mode == "engine" else "pyte"
    return Terminal(
        cols, rows, scrollback_lines=2000, scrollback_bytes=1 << 20, on_reply=lambda _d: None, emulator=emulator
    )


def _run_case(mode: str, steps: list[Step]) -> None:
    cols, rows, _ = steps[0]
    term = _terminal(mode, cols, rows)
    for c, r, data in steps:
        if (c, r) != (cols, rows):
            cols, rows = c, r
            term.resize(cols, rows)
        if mode == "raw":
            term.feed(data)
            term.text()
            term.cursor  # noqa: B018 - read, as a renderer would
        else:
            term.feed(data)
            term.flush()
            term.process(float("inf"))
            screen = term.current_screen()
            screen.visible_rows()
            _ = (screen.cursor.x, screen.cursor.y, screen.title, term.alt_screen)
            term.settle()
    if mode != "raw":
        term.transcript(0, term.total_lines)  # as terminal_read gives it
        term.snapshot()  # as the state saver takes it


def main(mode: str) -> int:
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    _terminal(mode, 80, 24)  # the imports, before the parent's clock for the first case starts
    stdout.write(b"r")
    stdout.flush()
    while True:
        try:
            (count,) = struct.unpack("<I", _read(stdin, 4))
        except EOFError:
            return 0
        steps = []
        for _ in range(count):
            c, r, size = _STEP.unpack(_read(stdin, _STEP.size))
            steps.append((c, r, _read(stdin, size)))
        _run_case(mode, steps)
        stdout.write(b"k")
        stdout.flush()


@dataclass(frozen=True)
class Outcome:
    """How a case ended: ``None`` survived; else what it hit (the panic line, the signal, an exception, a hang)."""

    hit: str | None
    seconds: float


class Runner:
    """Cases through a probe process, restarted after each crash."""

    def __init__(self, mode: str, timeout_s: float = 20.0) -> None:
        self.mode = mode
        self.timeout_s = timeout_s
        self._proc: subprocess.Popen[bytes] | None = None
        self._err: Path | None = None

    def _start(self) -> subprocess.Popen[bytes]:
        if self._proc is None or self._proc.returncode is not None or self._proc.poll() is not None:
            self._err = Path(os.environ.get("TMPDIR", "/tmp")) / f"ptyd-probe-{os.getpid()}-{id(self)}.err"
            with open(self._err, "wb") as err:
                self._proc = subprocess.Popen(
                    [sys.executable, str(Path(__file__).resolve()), self.mode],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=err,
                    cwd=ROOT,
                )
            assert self._proc.stdout is not None
            if self._proc.stdout.read(1) != b"r":
                raise RuntimeError(f"the {self.mode} probe did not start: {self._err.read_text(errors='replace')}")
        return self._proc

    def run(self, steps: list[Step]) -> Outcome:
        import select

        proc = self._start()
        assert proc.stdin is not None
        assert proc.stdout is not None
        started = time.monotonic()
        try:
            proc.stdin.write(encode(steps))
            proc.stdin.flush()
        except BrokenPipeError:
            pass
        ready, _, _ = select.select([proc.stdout], [], [], self.timeout_s)
        if ready and proc.stdout.read(1) == b"k":
            return Outcome(None, time.monotonic() - started)
        seconds = time.monotonic() - started
        if not ready:
            proc.kill()
        code = proc.wait()
        for pipe in (proc.stdin, proc.stdout):
            with contextlib.suppress(OSError):
                pipe.close()
        if not ready:
            return Outcome(f"hang: no answer within {self.timeout_s:.0f} s", seconds)
        return Outcome(self._what_hit(code), seconds)

    def _what_hit(self, code: int) -> str:
        assert self._err is not None
        text = self._err.read_text(errors="replace")
        self._err.unlink(missing_ok=True)
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        for line in lines:
            if "panic:" in line:
                return "panic: " + line.partition("panic:")[2].strip()
        died = f"signal {-code}" if code < 0 else f"exit {code}"
        return f"{died}: {lines[-1]}" if lines else died

    def close(self) -> None:
        if self._proc is not None:
            if self._proc.stdin is not None:
                self._proc.stdin.close()
            try:
                self._proc.wait(5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            if self._proc.stdout is not None:
                self._proc.stdout.close()
        if self._err is not None:
            self._err.unlink(missing_ok=True)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main(sys.argv[1]))
