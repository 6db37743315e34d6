"""Faults cost nothing, the hundredth time too (issue 28): on a real daemon, engine workers keep no memory of the
sessions they closed, a worker past its memory ceiling is replaced under floods without a line lost, workers
killed every half second under floods leave no session wrongly on pyte and the pool on workers, and rounds of
floods closed leave the daemon's memory where the first round left it.
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from test_engine_workers import _whole_transcript, _worker_pids

from conftest import Daemon, Rpc, Shell, stress, wait_until
from ptyd.terminal.engines import native_available

needs_native = pytest.mark.skipif(not native_available(), reason="the native engine does not import here")


KILLS = 12
FLOOD_S = 240  # a flood's send may take this long


def _rss(pid: int) -> int:
    return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _all_workers(rpc: Rpc, token: str, pid: int) -> list[int]:
    """The daemon's workers once all are up: two serving (configured) and the spare, started after them."""
    # A call with the token first: a connection without one is closed after unauthenticated_connection_ms (10 s),
    # and on a loaded machine the workers can take longer than that to start.
    rpc.call("terminal_list", token=token)
    wait_until(lambda: rpc.call("daemon_info")["engine_workers"]["workers"] == 2 and len(_worker_pids(pid)) == 3)
    return sorted(_worker_pids(pid))


def _round(rpc: Rpc, token: str, sessions: int, batch: int = 10) -> None:
    """Open ``sessions`` sessions, ``batch`` at a time (so they spread over the workers), each printing 2,000
    lines (its native terminal's history page in use), and close them."""
    for _ in range(sessions // batch):
        shells = [Shell(rpc, token, env={"PS1": "$ "}) for _ in range(batch)]
        for s in shells:
            assert s.send("seq 2000\n")["viewport"].splitlines()[-2:] == ["2000", "$"]
        for s in shells:
            s.close()


def _fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _rounds_leave_worker_memory_flat(daemon: Daemon, rounds: int, sessions: int) -> None:
    daemon.config_path.write_text(daemon.config_path.read_text() + "engine_workers = 2\n")
    daemon.start()
    with daemon.rpc() as rpc:
        pid = rpc.call("daemon_info")["pid"]
        token = rpc.call("agent_register", name="rounds")["token"]
        workers = _all_workers(rpc, token, pid)
        # A worker's socket to the daemon and its own: no fd per session. The spare may still be starting (seen
        # with one descriptor more: [4, 4, 5]): after the first round each holds at most what it held then, and
        # that is what the later rounds come back to.
        start = [_fds(w) for w in workers]
        _round(rpc, token, sessions)
        assert rpc.call("daemon_info")["sessions"] == 0
        wait_until(lambda: all(_fds(w) <= n for w, n in zip(workers, start, strict=True)), message=f"fds {start}")
        fds = [_fds(w) for w in workers]
        first = sum(_rss(w) for w in workers)
        print(f"round 1 of {sessions} sessions: workers {first >> 10} KiB")
        for index in range(1, rounds):
            _round(rpc, token, sessions)
            assert rpc.call("daemon_info")["sessions"] == 0
            wait_until(lambda: [_fds(w) for w in workers] == fds, message=f"round {index + 1}: workers' fds {fds}")
            # A worker gives back what the closed sessions held once it has nothing left to render: moments
            # after the last close reached it.
            wait_until(
                lambda: sum(_rss(w) for w in workers) <= first * 1.10,
                timeout=10,
                message=f"round {index + 1}: workers within 10% of {first >> 10} KiB",
            )
            print(f"round {index + 1} of {sessions} sessions: workers {sum(_rss(w) for w in workers) >> 10} KiB")
        assert sorted(_worker_pids(pid)) == workers  # no worker died or was replaced meanwhile
        info = rpc.call("daemon_info")["engine_workers"]
        assert (info["crashes"], info["recycled"]) == (0, 0)


@needs_native
def test_rounds_of_sessions_leave_the_workers_memory_flat(fresh_daemon: Daemon) -> None:
    _rounds_leave_worker_memory_flat(fresh_daemon, rounds=4, sessions=50)


@needs_native
@pytest.mark.slow
@pytest.mark.timeout(900)  # ~2,000 sessions, each printing 2,000 lines: 2-4 min on 2 cores, more under load
def test_two_thousand_sessions_leave_the_workers_memory_flat(fresh_daemon: Daemon) -> None:
    """Measured at load 6 (106 s): the workers' RSS 87,980 -> 88,020 -> 88,040 -> 88,024 KiB after each round of
    500, their fds back to where they started each time."""
    # --stress=ci (.ci/run's bounded slow tier): 4 x 100 sessions, the same assertions.
    _rounds_leave_worker_memory_flat(fresh_daemon, rounds=4, sessions=stress(500, ci=100))


def _flood(
    daemon: Daemon, token: str, shells: list[Shell], count: int, pulses: int = 1
) -> tuple[list[threading.Thread], dict]:
    """Each shell prints ``seq count``, or in ``pulses`` bursts 0.5 s apart (a flood that lasts, however fast the
    machine: the same lines, ``pulses`` x 0.5 s at least)."""
    results: dict[str, Any] = {}
    step = count // pulses
    assert step * pulses == count
    command = (
        f"seq {count}\n"
        if pulses == 1
        else f"for i in $(seq 0 {pulses - 1}); do seq $((i*{step}+1)) $(((i+1)*{step})); sleep 0.5; done\n"
    )

    def run(shell: Shell) -> None:
        # The client waits as long as the send may: a flood under kills outlasts Rpc's default 60 s.
        with Rpc(daemon.socket, timeout=FLOOD_S + 10) as own:
            results[shell.id] = own.call(
                "terminal_send", token=token, session_id=shell.id, input=command, timeout_ms=FLOOD_S * 1000
            )

    threads = [threading.Thread(target=run, args=(s,)) for s in shells]
    for t in threads:
        t.start()
    return threads, results


def _exact(shells: list[Shell], results: dict[str, Any], count: int) -> None:
    for s in shells:
        result = results[s.id]
        assert result["wait_reason"] == "stdin_read"
        assert result["viewport"].splitlines()[-2:] == [str(count), "$"]
        lines = _whole_transcript(s)
        start = lines.index("1")
        assert lines[start : start + count] == [str(i) for i in range(1, count + 1)]
        assert lines[start + count :] == ["$"]


@needs_native
def test_a_worker_past_its_memory_ceiling_is_replaced_under_floods(fresh_daemon: Daemon) -> None:
    # A 1 MiB ceiling: every worker is past it at the first look; its replacement, past it at once with the same
    # sessions, gets a ceiling of its own instead of being replaced again and again.
    fresh_daemon.config_path.write_text(
        fresh_daemon.config_path.read_text()
        + "engine_workers = 2\nengine_worker_rss_mb = 1\nscrollback_lines = 400000\nscrollback_bytes = 67108864\n"
    )
    fresh_daemon.start()
    count = 100_000
    with fresh_daemon.rpc() as rpc:
        pid = rpc.call("daemon_info")["pid"]
        token = rpc.call("agent_register", name="ceiling")["token"]
        shells = [Shell(rpc, token, env={"PS1": "$ "}) for _ in range(3)]
        wait_until(lambda: rpc.call("daemon_info")["engine_workers"]["workers"] == 2)
        # The serving ones, not the spare. On a busy machine one may be a replacement already (the first look
        # came before the second worker said hello): that one keeps its sessions under a ceiling of its own.
        before = set(rpc.call("daemon_info")["engine_workers"]["pids"])
    threads, results = _flood(fresh_daemon, token, shells, count)
    with fresh_daemon.rpc() as rpc:
        for s in shells:
            s.rpc = rpc
        shells[0].call("terminal_status")  # authenticated: kept however long the floods take
        wait_until(lambda: rpc.call("daemon_info")["engine_workers"]["recycled"] >= 1, timeout=60)
        for t in threads:
            t.join(timeout=240)
        _exact(shells, results, count)
        wait_until(lambda: "past the ceiling of 1 MiB as soon as it took them" in fresh_daemon.log(), timeout=30)
        info = rpc.call("daemon_info")["engine_workers"]
        assert (info["crashes"], info["quarantined"], info["paused"]) == (0, 0, None)
        replaced = dict(map(int, found) for found in REPLACED.findall(fresh_daemon.log()))  # old pid -> new
        assert before - set(replaced.values()) <= set(replaced)  # every worker of the start was replaced...
        wait_until(lambda: not set(replaced) & set(_worker_pids(pid)))  # ...and every one replaced ended
        for s in shells:
            assert s.call("terminal_status")["engine"] == "ghostty"
            assert s.send("echo next\n")["viewport"].splitlines()[-2:] == ["next", "$"]
    assert "died" not in fresh_daemon.log()


REPLACED = re.compile(r"engine worker pid (\d+) holds \d+ MiB, past its ceiling of \d+ MiB: replacing it \(pid (\d+)\)")


def _kill_every_half_second(pid: int, ticks: int, most: int, floods: list[threading.Thread]) -> tuple[list[int], int]:
    """SIGKILL a worker of the daemon (one that is starting, too) at each of ``ticks`` ticks 0.5 s apart, ``most``
    times at most. The workers killed, and how many floods still ran at the last tick."""
    killed: list[int] = []
    chooser = random.Random(28)
    start = time.monotonic()
    for tick in range(ticks):
        if len(killed) == most:
            break
        time.sleep(max(0.0, start + tick * 0.5 - time.monotonic()))
        workers = [w for w in _worker_pids(pid) if w not in killed]
        if workers:
            victim = chooser.choice(workers)
            with contextlib.suppress(ProcessLookupError):
                os.kill(victim, signal.SIGKILL)
                killed.append(victim)
    return killed, sum(t.is_alive() for t in floods)


def _kills_under_floods_cost_no_session(
    daemon: Daemon, floods: int, count: int, ticks: int, most: int, pulses: int = 1
) -> list[int]:
    """``floods`` sessions each print ``seq count`` (``_flood``) while workers are killed
    (``_kill_every_half_second``); every transcript ends exact, no session is quarantined, each is back on the
    native engine, the pool on workers. With ``pulses`` the floods outlast the ticks, and must have."""
    daemon.config_path.write_text(
        daemon.config_path.read_text() + f"scrollback_lines = {count + 100_000}\nscrollback_bytes = 67108864\n"
    )
    daemon.start()
    with daemon.rpc() as rpc:
        pid = rpc.call("daemon_info")["pid"]
        token = rpc.call("agent_register", name="kills")["token"]
        shells = [Shell(rpc, token, env={"PS1": "$ "}) for _ in range(floods)]
    threads, results = _flood(daemon, token, shells, count, pulses)
    started = time.monotonic()
    killed, running = _kill_every_half_second(pid, ticks, most, threads)
    print(f"{len(killed)} workers killed in {time.monotonic() - started:.1f} s; {running} of {floods} floods ran on")
    if pulses > 1:  # built to outlast the ticks; a plain `seq` may end first on a fast machine
        assert running, "every flood ended before the kills did: the kills were not under floods"
    for t in threads:
        t.join(timeout=FLOOD_S)
    print(f"{floods} floods of {count:,} lines done {time.monotonic() - started:.1f} s after the first kill")
    with daemon.rpc() as rpc:
        for s in shells:
            s.rpc = rpc
        assert rpc.call("daemon_info")["pid"] == pid
        _exact(shells, results, count)
        # Paused or not meanwhile, the pool ends on workers, every session on the native engine.
        wait_until(lambda: rpc.call("daemon_info")["engine_workers"]["paused"] is None, timeout=60)
        wait_until(lambda: rpc.call("daemon_info")["engine_workers"]["workers"] >= 1, timeout=60)
        for s in shells:
            status = s.call("terminal_status")
            assert (status["engine"], status["engine_note"]) == ("ghostty", None)
            assert s.send("echo next\n")["viewport"].splitlines()[-2:] == ["next", "$"]
        info = rpc.call("daemon_info")["engine_workers"]
        assert info["quarantined"] == 0
        # Every death is one of ours: no worker died by itself, and none was taken for hung (once in a quiet CI run
        # the watchdog killed a worker rebuilding a dozen flooding sessions, starved of CPU: no frame for 2.4 s).
        assert info["hangs"] == 0
        assert info["crashes"] + info["start_failures"] == len(killed)
        assert info["kills"] == info["crashes"]  # every death after a start was a kill from outside
    assert "it runs on the pyte engine from now on" not in daemon.log()
    return killed


@needs_native
def test_workers_killed_every_half_second_under_floods_cost_no_session(fresh_daemon: Daemon) -> None:
    # A dozen kills under six floods; the 40 under 25 floods are the slow test below.
    killed = _kills_under_floods_cost_no_session(fresh_daemon, floods=6, count=60_000, ticks=240, most=KILLS)
    assert len(killed) == KILLS


@needs_native
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_workers_killed_every_half_second_for_20_s_under_25_floods_cost_no_session(fresh_daemon: Daemon) -> None:
    """Issue 28's scenario: a SIGKILL every 0.5 s for 20 s under 25 floods."""
    # A tick finds no worker to kill while the pool backs off after workers died while starting (0.1 s, doubled
    # for each such death in a row): 14-18 of the 40 ticks killed one in three runs at load 6-7, every flood still
    # ran at the last tick, and they took 34-77 s.
    # 50 bursts of 6,000 lines 0.5 s apart: 25 s of floods at least, whatever the machine (a plain `seq 300000`
    # ended within the 20 s on a quiet one).
    killed = _kills_under_floods_cost_no_session(fresh_daemon, floods=25, count=300_000, ticks=40, most=40, pulses=50)
    assert killed


def _rounds_of_floods_leave_memory_flat(daemon: Daemon, floods: int, count: int) -> None:
    daemon.config_path.write_text(daemon.config_path.read_text() + "engine_workers = 2\n")
    daemon.start()
    with daemon.rpc() as rpc:
        pid = rpc.call("daemon_info")["pid"]
        token = rpc.call("agent_register", name="floods")["token"]
        workers = _all_workers(rpc, token, pid)
        first: tuple[int, int] | None = None
        for index in range(3):
            shells = [Shell(rpc, token, env={"PS1": "$ "}) for _ in range(floods)]
            threads, results = _flood(daemon, token, shells, count)
            for t in threads:
                t.join(timeout=600)
            assert all(results[s.id]["viewport"].splitlines()[-2:] == [str(count), "$"] for s in shells)
            gave = daemon.log().count("gave back what")
            for s in shells:
                s.close()
            # The daemon gives back what they held once closes pause (its log says so); a worker once it has
            # nothing left to render.
            wait_until(lambda gave=gave: daemon.log().count("gave back what") > gave, timeout=30)
            if first is None:
                first = (_rss(pid), sum(_rss(w) for w in workers))
                continue
            bound = (first[0] * 1.2, first[1] * 1.2)
            wait_until(
                lambda bound=bound: _rss(pid) <= bound[0] and sum(_rss(w) for w in workers) <= bound[1],
                timeout=10,
                message=f"round {index + 1}: daemon and workers within 20% of {first[0] >> 20}, {first[1] >> 20} MiB",
            )
        assert sorted(_worker_pids(pid)) == workers


@needs_native
def test_rounds_of_floods_leave_the_daemon_and_workers_memory_flat(fresh_daemon: Daemon) -> None:
    _rounds_of_floods_leave_memory_flat(fresh_daemon, floods=50, count=10_000)


@needs_native
@pytest.mark.slow
@pytest.mark.timeout(900)  # 150 floods of 200,000 lines: ~3 min on 2 cores, more under load
def test_rounds_of_long_floods_leave_the_daemon_and_workers_memory_flat(fresh_daemon: Daemon) -> None:
    """Issue 28: three rounds of 50 floods of 200,000 lines closed left the daemon 82 -> 121 -> 119 MiB."""
    # --stress=ci (.ci/run's bounded slow tier): floods of 50,000 lines, the same assertions.
    _rounds_of_floods_leave_memory_flat(fresh_daemon, floods=50, count=stress(200_000, ci=50_000))
