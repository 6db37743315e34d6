"""Handovers while sessions flood (issue 28): 50 sessions, four of them printing ``seq`` as fast as they can.

The time (SIGUSR2 until the new daemon answers; issue 28 asks 2 s) is measured and printed, not asserted: on
2 cores shared with other work it is the two interpreters' start (1.0-1.45 s of CPU) waiting for the CPU, and
timed assertions belong to benchmarks (the house rule); docs/reliability.md has the figures. What is asserted is
what a handover must never do under floods: lose or double a line, or leave a session unanswered. Before the fix
this test measured 7.6 and 12.5 s for the first handover (2 shared cores): the pre-flight interpreter competed for
the CPU with the floods and their engines (and loaded the native engine the daemon never loads), a flood's send
that settled folded its 300,000 lines on the loop (3.3 s each, nothing served meanwhile), the new daemon built the
OpenRPC document before it served. A flood's transcript
must come through every handover exactly, line by line, and its send settle as any other.

An installed ptyd has its bytecode (pip compiles it): the daemon here may write it, as an installed one has it,
whatever PYTHONDONTWRITEBYTECODE the test runner has (without it each of a handover's two interpreters compiles
~300 modules again, +0.3 s each).
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from test_engine_workers import _whole_transcript

import conftest
from conftest import Daemon, Rpc, Shell, wait_until
from ptyd.terminal.engines import native_available

SESSIONS = 50
FLOODS = 4  # per round, each on a session of its own: one seq in each transcript
COUNT = 300_000  # lines a flood prints (2 MB): still printing when the signal comes
ROUNDS = 4


def _ask(daemon: Daemon) -> tuple[Any, float]:
    """daemon_info on a new connection, and when it was answered; a connection the exec dropped is tried again
    (a connection made while the new daemon starts waits in the listening socket's backlog)."""
    while True:
        try:
            with Rpc(daemon.socket, timeout=60) as rpc:
                info = rpc.call("daemon_info")
            return info, time.monotonic()
        except ConnectionError:
            continue


def _hand_over(daemon: Daemon, number: int) -> dict[str, float]:
    """SIGUSR2, then ask until the new daemon answers: the figures of handover ``number``."""
    assert daemon.proc is not None
    cpu = _cpu_s(daemon.proc.pid)
    signalled = time.monotonic()
    daemon.proc.send_signal(signal.SIGUSR2)
    last_old = signalled  # the old daemon's last answer: the sessions are unserved from then on
    while True:
        info, answered = _ask(daemon)
        if info["handovers"] >= number:
            break
        assert info["handover_error"] is None, info["handover_error"]
        last_old = answered
        time.sleep(0.02)  # a poll's interval: asking flat out took a core from the pre-flight on 2
    # Evidence beside the times: the CPU the handover took (both interpreters: exec keeps the pid, the pre-flight
    # is a reaped child), and the machine's load, whose other work the rest of the time waited for.
    return {
        "serving": round(answered - signalled, 2),
        "unserved": round(answered - last_old, 2),
        "cpu": round(_cpu_s(daemon.proc.pid) - cpu, 2),
        "load": float(Path("/proc/loadavg").read_text().split()[0]),
    }


def _cpu_s(pid: int) -> float:
    """CPU seconds of ``pid`` and of its children it reaped."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def _flood(shells: list[Shell]) -> dict[str, str]:
    """Start a flood on each of ``shells``; returns once every one is printing and none is done."""
    started = {s.id: s.send(f"seq 1 {COUNT}\n", wait=False)["operation_id"] for s in shells}
    statuses: list[Any] = []

    def printing() -> bool:
        statuses[:] = [s.call("terminal_status") for s in shells]
        return all(status["total_lines"] > 1_000 for status in statuses)

    wait_until(printing, timeout=30, message="every flood to print")
    # Else the handover would not come amid the floods (a machine that fast needs a bigger COUNT).
    assert all(status["busy"] for status in statuses), [(s["total_lines"], s["busy"]) for s in statuses]
    return started


def _exact(shell: Shell) -> None:
    lines = _whole_transcript(shell)
    start = lines.index("1")
    numbers = lines[start : start + COUNT]
    if numbers != [str(i) for i in range(1, COUNT + 1)]:
        wrong = next(i for i, line in enumerate(numbers) if line != str(i + 1)) if numbers else 0
        raise AssertionError(
            f"{shell.id}: {len(numbers)} lines after '1', line {wrong + 1} is {numbers[wrong : wrong + 3]!r}"
        )
    assert lines[start + COUNT :] == ["$"], lines[start + COUNT : start + COUNT + 5]


@pytest.mark.skipif(not native_available(), reason="the native engine does not import here")
def test_handovers_under_floods_lose_nothing_and_every_session_answers(
    fresh_daemon: Daemon, monkeypatch: pytest.MonkeyPatch
) -> None:
    if conftest.EMULATOR == "pyte":  # its workers render 1-2 MB/s: four floods' backlogs outlast the test's budget
        conftest.skip_expected("floods this size are the native engine's")
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    fresh_daemon.config_path.write_text(
        fresh_daemon.config_path.read_text() + "scrollback_lines = 400000\nscrollback_bytes = 67108864\n"
    )
    fresh_daemon.start()
    with fresh_daemon.rpc() as rpc:
        pid = rpc.call("daemon_info")["pid"]
        token = rpc.call("agent_register", name="floods")["token"]
        shells = [Shell(rpc, token, env={"PS1": "$ "}) for _ in range(SESSIONS)]
    figures = []
    for number in range(1, ROUNDS + 1):
        flooding, quiet = shells[:FLOODS], shells[FLOODS:]
        with fresh_daemon.rpc() as rpc:
            for s in shells:
                s.rpc = rpc
            operations = _flood(flooding)
        figure = _hand_over(fresh_daemon, number)
        figures.append(figure)
        print(f"handover {number}: {figure}")
        with fresh_daemon.rpc() as rpc:
            for s in shells:
                s.rpc = rpc
            # Every session answers its next command, the floods' neighbours at once.
            assert [s.call("terminal_status")["pid"] for s in shells] == [s.opened["pid"] for s in shells]
            for s in quiet[number::5]:
                assert s.send("echo ok-$((40 + 2))\n")["viewport"].splitlines()[-2:] == ["ok-42", "$"]
            # The floods went on in the new daemon, to the last line, none lost or doubled.
            for s in flooding:
                waited = s.call("terminal_wait", timeout_ms=120_000, operation_id=operations[s.id])
                assert waited["done"], s.id
                assert waited["result"]["wait_reason"] == "stdin_read", waited["result"]
                _exact(s)
                s.close()
            # The next round's floods in fresh sessions: each handover carries four floods' transcripts, not more.
            shells = quiet + [Shell(rpc, token, env={"PS1": "$ "}) for _ in range(FLOODS)]
    assert _ask(fresh_daemon)[0]["pid"] == pid  # exec keeps the pid: the programs stay its children
    print(f"{ROUNDS} handovers under {FLOODS} floods of {SESSIONS} sessions: {figures}")
