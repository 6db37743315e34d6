"""Nothing a session prints can take down the daemon (issue 18): hostile output, on every engine.

A session prints escape-sequence soup (``soup.py``) and the minimal reproducers that crashed an engine
(``cases.py``) with ``cat``, at several sizes with resizes between. After each case the daemon is the same process,
another agent's witness session has its transcript, its size and its shell variable, and the session that
printed the soup answers its next command (``echo ok`` settles ``stdin_read`` with ``ok`` on the screen). A
session may have been moved off the native engine (``SessionInfo.engine`` "pyte", with an ``engine_note``), never
the witness.

The terminal answers the queries in the soup (DA, DSR, DECRQSS...) by writing to the session's input, where bash
would read them as typed text: the printing command ends in ``read -rsd $'\\001'``, which swallows them (the daemon
answers every query before a send settles ``stdin_read``), and the next send's ``\\x01`` ends that read. The last
step also resets the terminal (CAN, ST, RIS), as ``reset`` would after ``cat`` of a binary, so that ``ok`` is
drawn in the default character set.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hardening.probes import LogWatch, Witness, fuzzing, log_problems, running_daemon
from hypothesis import given
from hypothesis import strategies as st

import conftest
from conftest import Daemon, Rpc, Shell
from hostile.cases import CASES, Case, daemon_steps
from hostile.hunt import seeded_case
from hostile.probe import Step
from hostile.soup import PIECES, piece
from ptyd.terminal.engines import native_available

SIZES = ((160, 40), (80, 24), (500, 100), (2, 2), (2, 500))  # a session is at least 2x2
RESET = r"printf '\030\033\\\033c'"
SWALLOW = r"IFS= read -rsd $'\001' _"
# pyte scrolls a 500-row screen at ~2,000 rows a second (each scroll moves every row): a soup's floods of lines are
# cut at a size a test can wait for. The native engine takes the whole soup.
PYTE_TALL_BYTES = 16 * 1024
SOUP_SECONDS = float(os.environ.get("PTYD_SOUP_SECONDS", "10"))  # per engine, in the fast suite
SLOW_SOUP_SECONDS = float(conftest.stress(120, ci=30))  # per engine; --stress=ci: .ci/run's bounded slow tier


def engines() -> list[str]:
    if conftest.EMULATOR in ("ghostty", "pyte"):
        return [conftest.EMULATOR]
    return ["ghostty", "pyte"] if native_available() else ["pyte"]


class Hostile:
    """A daemon on one engine, a witness session of another agent, and the agent whose sessions print soup."""

    def __init__(self, daemon: Daemon, engine: str, files: Path) -> None:
        self.daemon = daemon
        self.engine = engine
        self.files = files
        assert daemon.proc is not None
        self.pid = daemon.proc.pid
        self.witness = Witness(daemon)
        self.witness.shell.send("W=witness-state-kept\n")
        self.witness.lines = self.witness.shell.transcript()
        self.rpc: Rpc = daemon.rpc()
        self.token: str = self.rpc.call("agent_register", name="printer")["token"]

    def close(self) -> None:
        self.witness.close()
        with contextlib.suppress(Exception):
            self.rpc.call("agent_release", token=self.token)
        self.rpc.close()

    def print_steps(self, steps: list[Step], *, cap: bool = False) -> None:
        """A session prints ``steps`` (resized before each step whose size differs), then answers ``echo ok``."""
        try:
            self._print_steps(steps, cap)
        except OSError as exc:  # the connection is gone: say whether the daemon is
            assert self.daemon.proc is not None
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.daemon.proc.wait(5)  # a daemon that crashed is reaped in a moment
            code = self.daemon.proc.poll()
            tail = self.daemon.log()[-3000:]
            raise AssertionError(f"lost the daemon's connection ({exc}); daemon exit status {code}:\n{tail}") from exc

    def _print_steps(self, steps: list[Step], cap: bool) -> None:
        cols, rows, _ = steps[0]
        shell = Shell(self.rpc, self.token, env={"PS1": "$ "}, cols=cols, rows=rows)
        try:
            for i, (c, r, data) in enumerate(steps):
                if (c, r) != (cols, rows):
                    cols, rows = c, r
                    assert shell.call("terminal_resize", cols=c, rows=r) is not None
                if cap and self.engine == "pyte" and rows > 100:
                    data = data[:PYTE_TALL_BYTES]
                path = self.files / f"{shell.id}.{i}.bin"
                path.write_bytes(data)
                reset = f"; {RESET}" if i == len(steps) - 1 else ""
                shell.send(f"{chr(1) if i else ''}cat {path}{reset}; {SWALLOW}\n", timeout_ms=60_000)
            answer = shell.send("\x01echo ok\n", timeout_ms=60_000)
            assert answer["wait_reason"] == "stdin_read", answer
            assert "ok" in [line.rstrip() for line in answer["viewport"].splitlines()], answer["viewport"]
            info = shell.call("terminal_status")
            assert info["status"] == {"kind": "running"}
            assert_engine(info, self.engine, printed=True)
        finally:
            with contextlib.suppress(Exception):
                shell.close()

    def assert_unharmed(self, watch: LogWatch, canary: str | None = None) -> None:
        """Same daemon process, the witness untouched (and on its engine), nothing logged it should not be."""
        assert self.daemon.proc is not None
        assert self.daemon.proc.poll() is None, "the daemon died:\n" + watch.text()[-4000:]
        with self.daemon.rpc() as rpc:
            assert rpc.call("daemon_info")["pid"] == self.pid
        self.witness.assert_untouched()
        assert_engine(self.witness.shell.call("terminal_status"), self.engine, printed=False)
        text = watch.text()
        # A native engine that dies in a worker process may leave its own last words (Zig's "panic: ...") on the
        # stderr it shares with the daemon; anything else above WARNING, or a traceback, is the daemon's failure.
        problems = [line for line in log_problems(text) if "panic" not in line]
        assert problems == [], "the daemon logged:\n" + "\n".join(problems[:40])
        if canary is not None:
            assert canary not in text  # the log names a session, never its bytes

    def assert_witness_state(self) -> None:
        """The witness's shell still holds its variable and answers (this changes its transcript: checks last)."""
        answer = self.witness.shell.send("echo $W\n")
        assert answer["viewport"].splitlines()[-2:] == ["witness-state-kept", "$"], answer
        self.witness.assert_answers()


def assert_engine(info: dict[str, Any], configured: str, *, printed: bool) -> None:
    """The session's engine as SessionInfo tells it (fields of issue 18; a daemon before them has none)."""
    if "engine" not in info:
        return
    engine, note = info["engine"], info.get("engine_note")
    if printed and configured == "ghostty" and engine == "pyte":  # moved off the native engine for good
        assert isinstance(note, str)
        assert note
        return
    assert engine == configured, info
    if not printed:
        assert note is None, info


@pytest.fixture(scope="module", params=engines())
def hostile(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hostile]:
    engine: str = request.param
    with running_daemon(tmp_path_factory, f"hostile-{engine}", f'emulator = "{engine}"\n') as daemon:
        assert f"emulator {engine}" in daemon.log()
        h = Hostile(daemon, engine, tmp_path_factory.mktemp(f"soup-{engine}"))
        yield h
        h.close()


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_crashing_output_leaves_the_daemon_and_every_session(hostile: Hostile, case: Case) -> None:
    watch = LogWatch(hostile.daemon)
    hostile.print_steps(daemon_steps(case))
    hostile.assert_unharmed(watch)
    hostile.assert_witness_state()


def soup_steps(seed: int) -> tuple[list[Step], str]:
    """A seeded case at the sessions' sizes, with a canary the log must never show."""
    canary = f"canary-{seed}-{secrets.token_hex(4)}"
    steps = [(c, r, b"".join(parts)) for c, r, parts in seeded_case(seed, 30, SIZES)]
    c, r, data = steps[0]
    steps[0] = (c, r, f"\x1b]2;{canary}\x07".encode() + data)
    return steps, canary


def run_soups(hostile: Hostile, seconds: float, first_seed: int) -> int:
    deadline = time.monotonic() + seconds
    seed = first_seed
    while time.monotonic() < deadline:
        watch = LogWatch(hostile.daemon)
        steps, canary = soup_steps(seed)
        try:
            hostile.print_steps(steps, cap=True)
            hostile.assert_unharmed(watch, canary)
        except AssertionError as exc:
            raise AssertionError(f"soup seed {seed} (tests/hostile/hunt.py finds and minimises it): {exc}") from exc
        seed += 1
    return seed - first_seed


def test_seeded_soup_for_a_bounded_time(hostile: Hostile) -> None:
    # A different run of seeds each day, so the suite covers more ground over time; the seed is in any failure.
    first = int(time.time() // 86_400) * 1000
    assert run_soups(hostile, SOUP_SECONDS, first) >= 1
    hostile.assert_witness_state()


@pytest.mark.slow
@pytest.mark.timeout(SLOW_SOUP_SECONDS + 120)
def test_seeded_soup_for_longer(hostile: Hostile) -> None:
    assert run_soups(hostile, SLOW_SOUP_SECONDS, secrets.randbelow(10**9)) >= 1
    hostile.assert_witness_state()


_piece = st.tuples(st.integers(0, len(PIECES) - 1), st.integers(0, 2**32 - 1))
_step = st.tuples(st.sampled_from(SIZES), st.lists(_piece, min_size=1, max_size=8))


@fuzzing(examples=6)
@given(st.lists(_step, min_size=1, max_size=3))
def test_hypothesis_soup(hostile: Hostile, plan: list[tuple[tuple[int, int], list[tuple[int, int]]]]) -> None:
    watch = LogWatch(hostile.daemon)
    steps = [(c, r, b"".join(piece(i, seed) for i, seed in pieces)) for (c, r), pieces in plan]
    hostile.print_steps(steps, cap=True)
    hostile.assert_unharmed(watch)
