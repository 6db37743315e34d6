"""A worker that hangs instead of dying: its watchdog kills it, and that is a death (docs/engine-workers.md).

In-process: a worker stopped by SIGSTOP while its sessions' output is outstanding is killed after the stall time
and its sessions lose nothing; the watchdog is disarmed whenever no work is outstanding. On a real daemon: output
that stalls libghostty-vt for seconds (tests/hostile/cases.py "long-hyperlink-stall") moves its session to pyte
with the "hung" note, and a neighbour on the same worker keeps its screen and shell state.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
import time
from typing import Any

import msgspec
import pytest

from conftest import Daemon, Rpc, Shell, latency, wait_until
from ptyd.terminal.engines import native_available
from ptyd.terminal.workers import messages as m
from ptyd.terminal.workers.pool import HUNG_NOTE, EnginePool
from ptyd.terminal.workers.proxy import RemoteTerminal

needs_native = pytest.mark.skipif(not native_available(), reason="the native engine does not import here")


async def _until(predicate: Any) -> None:
    deadline = time.monotonic() + 30.0
    while not predicate():
        assert time.monotonic() < deadline, "condition"
        await asyncio.sleep(0.01)


def _remote(pool: EnginePool) -> RemoteTerminal:
    return RemoteTerminal(
        80,
        24,
        scrollback_lines=100_000,
        scrollback_bytes=16 << 20,
        on_reply=lambda _: None,
        pool=pool,
        engine="pyte",
        label="test",
    )


def _armed(pool: EnginePool) -> list[bool]:
    return [link._watchdog is not None for link in pool.links]


def test_a_stopped_worker_is_killed_and_its_sessions_lose_nothing() -> None:
    async def run() -> None:
        pool = EnginePool(1, asyncio.get_running_loop(), stall_s=0.5)
        quiet, busy = _remote(pool), _remote(pool)
        try:
            quiet.feed(b"X=kept\r\n$ ")
            await _until(lambda: quiet.idle and busy.idle)
            await _until(lambda: _armed(pool) == [False])  # nothing outstanding: no timer at all
            screen = quiet.visible_rows()
            stopped = pool.links[0].pid
            os.kill(stopped, signal.SIGSTOP)
            busy.feed(b"".join(b"%d\r\n" % i for i in range(1, 2001)))
            await _until(lambda: pool.hangs == 1)
            await _until(lambda: busy.idle)
            assert busy.transcript(0, 3000)[:2000] == [str(i) for i in range(1, 2001)]
            assert busy.engine_note is None  # its replay went through: not guilty
            assert quiet.visible_rows() == screen
            assert [link.pid for link in pool.links] != [stopped]
            assert pool.crashes == 1
            await _until(lambda: _armed(pool) == [False])
            quiet.feed(b"echo next\r\n")
            await _until(lambda: quiet.idle)
            assert quiet.visible_rows() == ["X=kept", "$ echo next"]
        finally:
            pool.close()

    asyncio.run(run())


@needs_native
def test_a_starved_worker_is_left_to_work_and_a_spinning_one_is_killed(monkeypatch: pytest.MonkeyPatch) -> None:
    # The worker is stopped, so no frame comes back; what its schedstat says is scripted: first a worker waiting for
    # a core most of the time and running little (a loaded machine: after forty kills under 25 floods, one rebuilding
    # 13 sessions was killed as hung), then one that runs without a frame (the native engine stuck in a write).
    from ptyd.terminal.workers import link as link_module

    async def run() -> None:
        pool = EnginePool(1, asyncio.get_running_loop(), stall_s=0.2)
        busy = RemoteTerminal(
            80, 24, scrollback_lines=10_000, scrollback_bytes=1 << 20, on_reply=lambda _: None, pool=pool,
            engine="ghostty", label="test",
        )  # fmt: skip
        try:
            busy.feed(b"$ ")
            await _until(lambda: busy.idle and _armed(pool) == [False])
            worker = pool.links[0].pid
            share = {"ran": 0.01, "waited": 0.9}  # of the wall time since the last reading
            sched = {"at": time.monotonic(), "ran": 0.0, "waited": 0.0}

            def scripted(pid: int) -> tuple[int, int]:
                now = time.monotonic()
                for what in ("ran", "waited"):
                    sched[what] += share[what] * (now - sched["at"])
                sched["at"] = now
                return int(sched["ran"] * 1e9), int(sched["waited"] * 1e9)

            monkeypatch.setattr(link_module, "_sched_ns", scripted)
            os.kill(worker, signal.SIGSTOP)
            busy.feed(b"".join(b"%d\r\n" % i for i in range(1, 501)))
            await asyncio.sleep(1.0)  # five stall times without a frame (proving absence)
            assert (pool.hangs, pool.links[0].pid) == (0, worker)
            share.update(ran=0.9, waited=0.05)
            await _until(lambda: pool.hangs == 1)
            await _until(lambda: busy.idle)
            assert busy.transcript(0, 1000)[:500] == ["$ 1"] + [str(i) for i in range(2, 501)]
            assert pool.links[0].pid != worker
        finally:
            pool.close()

    asyncio.run(run())


# tests/hostile/cases.py "long-hyperlink-stall", in one write (it reaches the worker as one feed).
STALL = """python3 -c 'import os; os.write(1, b"\\x1b]8;;" + b"u" * 2000 + b"\\x1b\\\\" + b"x" * 65535)'\n"""


@needs_native
def test_output_that_hangs_the_native_engine_moves_to_pyte_and_costs_the_neighbour_nothing(
    fresh_daemon: Daemon,
) -> None:
    # One worker, so the neighbour shares it. The write costs the native engine 1.6-7 s by machine, most of it in
    # one step (0.8 s of one 4 KiB piece here, the rest 0.4 s at most a piece): the hang, and the replay's hang that
    # convicts the session, must not depend on how its output is cut into renders, so the stall time is under it.
    fresh_daemon.config_path.write_text(
        fresh_daemon.config_path.read_text() + "engine_workers = 1\nengine_worker_stall_ms = 300\n"
    )
    fresh_daemon.start()
    with fresh_daemon.rpc() as rpc:
        pid = rpc.call("daemon_info")["pid"]
        token = rpc.call("agent_register", name="stall")["token"]
        other = Shell(rpc, token, env={"PS1": "$ "})
        other.send("X=forty-two; printf '\\e]2;kept\\a'\n")
        before = other.call("terminal_screen")
        victim = Shell(rpc, token, env={"PS1": "$ "}, cols=160, rows=40)
        assert victim.call("terminal_status")["engine"] == "ghostty"
    results: dict[str, Any] = {}

    def stall() -> None:
        with Rpc(fresh_daemon.socket) as own:
            results["stall"] = own.call(
                "terminal_send", token=token, session_id=victim.id, input=STALL, timeout_ms=120_000
            )

    thread = threading.Thread(target=stall)
    thread.start()
    with fresh_daemon.rpc() as rpc:
        other.rpc = victim.rpc = rpc
        wait_until(lambda: "hung (no progress" in fresh_daemon.log(), timeout=60)
        assert other.call("terminal_screen") == before
        # While the stalling session's replay is on probation: the neighbour answers once it is done.
        assert other.send("echo $X\n", timeout_ms=60_000)["viewport"].splitlines()[-2:] == ["forty-two", "$"]
        mid = other.call("terminal_screen")
        thread.join(timeout=120)
        result = results["stall"]
        assert result["wait_reason"] == "stdin_read"
        info = victim.call("terminal_status")
        assert (info["engine"], info["engine_note"]) == ("pyte", HUNG_NOTE)
        assert "x" * 160 in victim.call("terminal_screen")["lines"]
        ok = victim.send("echo ok\n")
        assert ok["wait_reason"] == "stdin_read"
        assert ok["viewport"].splitlines()[-2:] == ["ok", "$"]
        assert rpc.call("daemon_info")["pid"] == pid
        assert other.call("terminal_screen") == mid
        assert mid["title"] == "kept"
        assert other.send("echo $X\n")["viewport"].splitlines()[-2:] == ["forty-two", "$"]
        assert other.call("terminal_status")["engine"] == "ghostty"
    log = fresh_daemon.log()
    assert log.count("hung (no progress") == 2  # the first hang, then its replay alone
    assert f"session {victim.id}: {HUNG_NOTE}; it runs on the pyte engine from now on" in log
    assert "crashed" not in log
    assert "uuuu" not in log  # never the bytes
    assert "xxxx" not in log


def test_the_sessions_of_a_stopped_worker_answer_within_the_documented_bound(fresh_daemon: Daemon) -> None:
    """docs/engine-workers.md: a hung worker's sessions wait the stall time, then their replay on the spare worker
    (no interpreter to start); the session whose own output hangs the engine waits twice. Issue 28 measured 6.7 s
    against the documented ~4 s when the replacement had to start first."""
    fresh_daemon.config_path.write_text(fresh_daemon.config_path.read_text() + "engine_workers = 1\n")
    fresh_daemon.start()
    stall_s = 2.0  # engine_worker_stall_ms's default
    with fresh_daemon.rpc() as rpc:
        token = rpc.call("agent_register", name="stopped")["token"]
        shell = Shell(rpc, token, env={"PS1": "$ "})
        shell.send("X=kept\n")
        wait_until(lambda: rpc.call("daemon_info")["engine_workers"]["workers"] == 1)
        (stopped,) = rpc.call("daemon_info")["engine_workers"]["pids"]
        os.kill(stopped, signal.SIGSTOP)
        try:
            started = time.monotonic()
            result = shell.send("echo $X\n", timeout_ms=30_000)
            elapsed = time.monotonic() - started
        finally:
            with contextlib.suppress(ProcessLookupError):  # killed by its watchdog already, and reaped
                os.kill(stopped, signal.SIGCONT)
        assert result["wait_reason"] == "stdin_read"
        assert result["viewport"].splitlines()[-2:] == ["kept", "$"]
        latency(elapsed, tight=2 * stall_s, fallback=30.0, what="a send on a stopped worker")
        info = rpc.call("daemon_info")["engine_workers"]
        assert (info["hangs"], info["quarantined"]) == (1, 0)
        assert stopped not in info["pids"]
        assert shell.call("terminal_status")["engine_note"] is None
    print(f"a send on a stopped worker answered after {elapsed:.2f} s")


def test_a_rebuilt_sessions_screen_never_goes_back_to_its_snapshot() -> None:
    """A rebuilt session's new worker first answers for its snapshot (older than what the mirror shows), then for
    the journal after it: an answer for an end the mirror already showed must not show that older screen, while
    every byte still reads as rendered (a result built then showed `RRR` without the `TAIL` below it, on CI)."""

    async def run() -> None:
        pool = EnginePool(1, asyncio.get_running_loop(), stall_s=5.0)
        term = _remote(pool)
        try:
            term.feed(b"RRR")
            await _until(lambda: term.idle)
            term.feed(b"\r\n   TAIL")
            await _until(lambda: term.idle)
            shown = term.visible_rows()[:2]
            assert shown == ["RRR", "   TAIL"]
            term.reopen(pool.links[0], term.engine, held=True)  # held: the answers below stand in for the worker's
            snapshot_answer = m.Ack(
                sid=term.sid,
                end=3,  # the snapshot was taken after "RRR"
                scrolled=[],
                rows=[m.Row(0, "RRR"), m.Row(1, "")],
                main=None,
                main_changed=False,
                cols=80,
                lines=24,
                cursor=(3, 0, False),
                main_cursor_y=0,
                title="",
                alt=False,
                app_cursor_keys=False,
                replies=[],
            )
            term.acked(snapshot_answer)
            assert term.idle
            assert term.visible_rows()[:2] == shown
            assert term.cursor_line == 1
            caught_up = msgspec.structs.replace(snapshot_answer, end=term.units_acked, rows=[m.Row(1, "   TAIL")])
            term.acked(msgspec.structs.replace(caught_up, cursor=(7, 1, False), main_cursor_y=1))
            assert term.visible_rows()[:2] == shown
            assert term.cursor_line == 1
        finally:
            pool.close()

    asyncio.run(run())
