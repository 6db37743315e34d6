"""Engine workers: the worker protocol and the proxy in-process, and a real daemon surviving its engine's crashes.

The crash is real: libghostty-vt (pyghostty 0.1.3) panics on REP after a hyperlink on a 500-column alternate
screen and its process dies of SIGILL (issue 18). A worker is also killed with SIGKILL in the middle of floods.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import Daemon, Rpc, Shell, wait_until
from ptyd.terminal.engines import native_available, open_terminal
from ptyd.terminal.workers import messages as m
from ptyd.terminal.workers.host import EngineHost
from ptyd.terminal.workers.pool import QUARANTINE_NOTE, EnginePool
from ptyd.terminal.workers.proxy import RemoteTerminal

needs_native = pytest.mark.skipif(not native_available(), reason="the native engine does not import here")
CRASH = b"\x1b[?1049hx\x1b]8;;http://a\x1b\\\x1b[99999b"  # at 500x100: "panic: increaseCapacity OutOfSpace"
ENGINES = ["ghostty", "pyte"] if native_available() else ["pyte"]


# --- the protocol, in-process ----------------------------------------------------------------------------------


def _ack(out: list[m.ToDaemon]) -> m.Ack:
    acks = [a for a in out if isinstance(a, m.Ack)]
    assert len(acks) == 1
    return acks[0]


@pytest.mark.parametrize("engine", ENGINES)
def test_host_acks_rows_scrolled_off_the_changed_rows_and_the_answers(engine: str) -> None:
    host = EngineHost()
    host.handle(m.Open(sid=1, engine=engine, cols=20, rows=4, end=0))
    first = _ack(host.finish())
    assert first.rows == [m.Row(y, "") for y in range(4)]
    assert first.scrolled == []
    data = b"".join(b"line %d\r\n" % i for i in range(10)) + b"\x1b[6n"
    host.handle(m.Feed(sid=1, end=len(data), data=data, more=False))
    ack = _ack(host.finish())
    assert ack.end == len(data)
    assert [row for block in ack.scrolled if not isinstance(block, int) for row in m.scrolled_rows(block)] == [
        f"line {i}" for i in range(7)
    ]
    assert [r.text for r in ack.rows] == ["line 7", "line 8", "line 9", ""][: len(ack.rows)]
    assert ack.replies == [b"\x1b[4;1R"]
    assert (ack.cursor, ack.alt, ack.cols, ack.lines) == ((0, 3, False), False, 20, 4)
    # Only what changed next time; nothing at all when nothing did.
    host.handle(m.Feed(sid=1, end=len(data) + 2, data=b"ok", more=False))
    assert [(r.y, r.text) for r in _ack(host.finish()).rows] == [(3, "ok")]
    assert host.finish() == []


def test_a_worker_where_the_native_engine_does_not_load_renders_on_pyte_and_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ptyd.terminal.workers import host as host_module

    monkeypatch.setattr(host_module, "native_available", lambda: False)
    host = EngineHost()
    host.handle(m.Open(sid=1, engine="ghostty", cols=20, rows=2, end=0))
    host.handle(m.Feed(sid=1, end=4, data=b"ok\r\n", more=False))
    ack = _ack(host.finish())
    assert type(host.sessions[1].engine).__name__ == "PyteTerminal"
    assert ack.error == "the native engine does not load in the engine worker"  # the daemon moves it to pyte
    assert ack.rows[0].text == "ok"


@pytest.mark.parametrize("engine", ENGINES)
def test_host_mutes_a_replay_and_snapshots_what_a_new_engine_restores(engine: str) -> None:
    host = EngineHost()
    host.handle(m.Open(sid=1, engine=engine, cols=20, rows=4, end=0))
    data = b"".join(b"row %d\r\n" % i for i in range(8)) + b"\x1b[c\x1b]2;title\x07$ "
    host.handle(m.Feed(sid=1, end=len(data), data=data, more=False, muted=True))
    ack = _ack(host.finish())
    assert ack.scrolled == []  # delivered the first time
    assert ack.replies == []
    assert [r.text for r in ack.rows] == ["row 5", "row 6", "row 7", "$"]
    assert ack.title == "title"
    (snap,) = host.handle(m.Snap(sid=1))
    assert isinstance(snap, m.Snapshot)
    assert snap.end == len(data)
    other = EngineHost()
    other.handle(m.Open(sid=7, engine=engine, cols=20, rows=4, end=0))
    other.handle(m.Restore(sid=7, end=snap.end, state=snap.state))
    again = _ack(other.finish())
    assert [r.text for r in again.rows] == ["row 5", "row 6", "row 7", "$"]
    assert (again.cursor, again.title, again.end) == (ack.cursor, "title", snap.end)


def test_frames_split_anywhere_decode_whole() -> None:
    wire = m.frame(m.Feed(sid=3, end=5, data=b"hello", more=True)) + m.frame(m.Settle(sid=3))
    buffer = bytearray()
    got: list[m.ToWorker] = []
    for byte in wire:
        buffer.append(byte)
        got.extend(m.to_worker.decode(body) for body in m.frames(buffer))
    assert got == [m.Feed(sid=3, end=5, data=b"hello", more=True), m.Settle(sid=3)]
    assert not buffer


# --- the proxy on a real worker, in-process ----------------------------------------------------------------------


async def _until(predicate: Any) -> None:
    deadline = time.monotonic() + 30.0
    while not predicate():
        assert time.monotonic() < deadline, "condition"
        await asyncio.sleep(0.01)


def _remote(pool: EnginePool, engine: str, replies: list[bytes], cols: int = 80, rows: int = 24) -> RemoteTerminal:
    return RemoteTerminal(
        cols,
        rows,
        scrollback_lines=300_000,
        scrollback_bytes=64 << 20,
        on_reply=replies.append,
        pool=pool,
        engine=engine,
        label="test",
    )


@pytest.mark.parametrize("engine", ENGINES)
def test_the_proxy_reads_like_the_engine_in_process(engine: str) -> None:
    chunks = [
        b"".join(b"\x1b[3%dmline %d\x1b[0m\r\n" % (i % 8, i) for i in range(j, j + 300)) for j in range(0, 3000, 300)
    ]
    chunks += [b"\x1b[?1049h\x1b[Hfull screen\x1b[5n", b"\x1b[?1049l$ "]

    async def run() -> None:
        pool = EnginePool(1, asyncio.get_running_loop(), stall_s=2.5)
        replies: list[bytes] = []
        remote = _remote(pool, engine, replies)
        local_replies: list[bytes] = []
        local = open_terminal(
            80, 24, scrollback_lines=300_000, scrollback_bytes=64 << 20, on_reply=local_replies.append, emulator=engine
        )
        try:
            for chunk in chunks:
                remote.feed(chunk, more=True)
                local.feed(chunk, more=True)
                local.process(float("inf"))
            remote.flush()
            local.flush()
            local.process(float("inf"))
            await _until(lambda: remote.idle)
            assert remote.transcript(0, 10_000) == local.transcript(0, 10_000)
            assert remote.visible_rows() == local.visible_rows()
            assert (remote.cursor_line, remote.total_lines) == (local.cursor_line, local.total_lines)
            assert replies == local_replies == [b"\x1b[0n"]
            remote.resize(60, 10)
            local.resize(60, 10)
            await _until(lambda: remote.idle)
            assert remote.transcript(0, 10_000) == local.transcript(0, 10_000)
            assert (remote.cols, remote.rows, remote.visible_rows()) == (60, 10, local.visible_rows())
        finally:
            pool.close()

    asyncio.run(run())


def _workers(pool: EnginePool) -> list[int]:
    return [link.pid for link in pool.links]


@needs_native
def test_a_killed_worker_loses_no_row_and_a_crashing_session_moves_to_pyte() -> None:
    async def run() -> None:
        pool = EnginePool(1, asyncio.get_running_loop(), stall_s=2.5)
        replies: list[bytes] = []
        flood = _remote(pool, "ghostty", replies)
        victim = _remote(pool, "ghostty", replies, cols=500, rows=100)
        try:
            await _until(lambda: flood.idle and victim.idle and pool.links[0].hello)  # a kill after its start
            for sent, start in enumerate(range(1, 200_001, 5000)):
                flood.feed(b"".join(b"%d\r\n" % i for i in range(start, start + 5000)))
                if sent == 10:
                    os.kill(_workers(pool)[0], signal.SIGKILL)
                await asyncio.sleep(0)
            await _until(lambda: flood.idle)
            assert pool.crashes == 1
            assert flood.engine == "ghostty"
            lines = flood.transcript(0, 300_000)
            assert lines[:200_000] == [str(i) for i in range(1, 200_001)]
            victim.feed(CRASH)
            await _until(lambda: victim.idle)
            assert (victim.engine, victim.engine_note) == ("pyte", QUARANTINE_NOTE)
            assert pool.crashes == 3
            assert pool.quarantined == 1
            assert victim.alt_screen
            victim.feed(b"\x1b[?1049lstill here\r\n")
            flood.feed(b"and here\r\n")
            await _until(lambda: victim.idle and flood.idle)
            assert "still here" in victim.visible_rows()
            assert flood.transcript(199_999, 200_002) == ["200000", "and here", ""]  # the cursor's row last
        finally:
            pool.close()

    asyncio.run(run())


# --- a real daemon --------------------------------------------------------------------------------------------


def _worker_pids(daemon_pid: int) -> list[int]:
    kids = Path(f"/proc/{daemon_pid}/task/{daemon_pid}/children").read_text().split()
    out = []
    for kid in kids:
        try:
            if b"ptyd.terminal.workers.main" in Path(f"/proc/{kid}/cmdline").read_bytes():
                out.append(int(kid))
        except OSError:
            pass
    return out


def _whole_transcript(shell: Shell) -> list[str]:
    lines: list[str] = []
    start = 0
    while True:
        page = shell.call("terminal_read", start_line=start, max_lines=10_000, max_bytes=4 << 20)
        assert page["first_retained_line"] == 0
        lines += page["lines"]
        if page["next_line"] >= page["total_lines"] or not page["lines"]:
            return lines
        start = page["next_line"]


@needs_native
def test_output_that_crashes_the_native_engine_costs_nothing(fresh_daemon: Daemon) -> None:
    fresh_daemon.start()
    with fresh_daemon.rpc() as rpc:
        pid = rpc.call("daemon_info")["pid"]
        token = rpc.call("agent_register", name="crash")["token"]
        other = Shell(rpc, token, env={"PS1": "$ "})
        other.send("X=forty-two; printf '\\e]2;kept\\a'\n")
        before = other.call("terminal_screen")
        victim = Shell(rpc, token, env={"PS1": "$ "}, cols=500, rows=100)
        assert victim.call("terminal_status")["engine"] == "ghostty"
        result = victim.send("printf '\\e[?1049hx\\e]8;;http://a\\e\\\\\\e[99999b'\n")
        assert result["wait_reason"] == "stdin_read"
        assert result["alt_screen"]
        info = victim.call("terminal_status")
        assert (info["engine"], info["engine_note"]) == ("pyte", QUARANTINE_NOTE)
        assert rpc.call("daemon_info")["pid"] == pid
        assert victim.send("printf '\\e[?1049l'; echo alive\n")["viewport"].splitlines()[-2:] == ["alive", "$"]
        assert other.call("terminal_screen") == before
        assert other.send("echo $X\n")["viewport"].splitlines()[-2:] == ["forty-two", "$"]
        assert other.call("terminal_status")["engine"] == "ghostty"
    log = fresh_daemon.log()
    assert f"session {victim.id}: {QUARANTINE_NOTE}; it runs on the pyte engine from now on" in log
    assert "died (SIGILL)" in log
    assert "99999" not in log  # never the bytes


@needs_native
def test_only_the_workers_load_the_native_engine(fresh_daemon: Daemon) -> None:
    """The daemon decides on the engine without loading it (~0.3 s and 4 MB a start and a handover)."""
    fresh_daemon.start()
    with fresh_daemon.rpc() as rpc:
        pid = rpc.call("daemon_info")["pid"]
        token = rpc.call("agent_register", name="maps")["token"]
        shell = Shell(rpc, token, env={"PS1": "$ "})
        assert shell.send("printf '\\e[1mbold\\e[0m\\n'\n")["viewport"].splitlines()[-2:] == ["bold", "$"]
        assert shell.call("terminal_status")["engine"] == "ghostty"
        workers = _worker_pids(pid)
        assert workers
        assert "ghostty" not in Path(f"/proc/{pid}/maps").read_text()
        assert any("ghostty" in Path(f"/proc/{w}/maps").read_text() for w in workers)


def test_sigkill_of_workers_during_floods_loses_no_line_and_no_send(fresh_daemon: Daemon) -> None:
    fresh_daemon.config_path.write_text(
        fresh_daemon.config_path.read_text() + "scrollback_lines = 400000\nscrollback_bytes = 67108864\n"
    )
    fresh_daemon.start()
    count = 150_000
    with fresh_daemon.rpc() as rpc:
        pid = rpc.call("daemon_info")["pid"]
        token = rpc.call("agent_register", name="floods")["token"]
        shells = [Shell(rpc, token, env={"PS1": "$ "}) for _ in range(3)]
    results: dict[str, Any] = {}

    def flood(shell: Shell) -> None:
        with Rpc(fresh_daemon.socket) as own:
            results[shell.id] = own.call(
                "terminal_send", token=token, session_id=shell.id, input=f"seq {count}\n", timeout_ms=120_000
            )

    threads = [threading.Thread(target=flood, args=(s,)) for s in shells]
    for t in threads:
        t.start()
    with fresh_daemon.rpc() as rpc:
        for s in shells:
            s.rpc = rpc
        wait_until(lambda: min(s.call("terminal_status")["total_lines"] for s in shells) > 2000, timeout=60)
        killed = _worker_pids(pid)
        assert killed
        for worker in killed:
            os.kill(worker, signal.SIGKILL)
        for t in threads:
            t.join(timeout=150)
        assert rpc.call("daemon_info")["pid"] == pid
        for s in shells:
            result = results[s.id]
            assert result["wait_reason"] == "stdin_read"
            assert result["viewport"].splitlines()[-2:] == [str(count), "$"]
            lines = _whole_transcript(s)
            start = lines.index("1")
            assert lines[start : start + count] == [str(i) for i in range(1, count + 1)]
            assert lines[start + count :] == ["$"]
            assert s.send("echo next\n")["viewport"].splitlines()[-2:] == ["next", "$"]
        assert not set(killed) & set(_worker_pids(pid))
    assert fresh_daemon.log().count("died (SIGKILL)") == len(killed)


@pytest.mark.parametrize("engine", ENGINES)
def test_the_proxy_keeps_the_soft_wraps_of_the_engine_in_process(engine: str) -> None:
    """Every row's soft-wrap flag crosses: rows scrolled off, the screen, the main screen under the alternate
    one, a resize, and a worker killed in between (its successor restored from a snapshot and the journal)."""
    long_lines = b"".join(b"%d " % i + b"w" * (100 + i % 90) + b"\r\n" for i in range(400))
    steps: list[bytes | tuple[int, int] | bool | None] = [
        long_lines,
        b"x" * 80 + b"\r\n" + b"y" * 80,  # a row exactly full: wrapped only once the next character comes
        b"z\r\n" + b"v" * 150,
        None,  # the worker is killed here, just after a snapshot: its successor redraws the wrapped rows from it
        b"\r\n" + b"u" * 170 + b"\x1b[?1049h\x1b[Hfull screen " + b"a" * 100,  # the main screen under the alternate
        None,  # ...a snapshot of the alternate screen: the main screen's rows and flags are in its state
        b"\x1b[2;1Hmore",
        False,  # ...and here, with no snapshot asked for: the journal since the last one replayed
        b"\x1b[?1049l\r\n" + b"t" * 120,
        (100, 24),
        long_lines,
    ]

    async def run() -> None:
        pool = EnginePool(1, asyncio.get_running_loop(), stall_s=2.5)
        remote = _remote(pool, engine, [])
        local = open_terminal(
            80, 24, scrollback_lines=300_000, scrollback_bytes=64 << 20, on_reply=[].append, emulator=engine
        )
        try:
            for number, step in enumerate(steps):
                if step is None or step is False:
                    await _until(lambda: remote.idle)
                    if step is None:
                        await remote.synced()
                    crashes = pool.crashes
                    os.kill(_workers(pool)[0], signal.SIGKILL)
                    await _until(lambda crashes=crashes: pool.crashes > crashes)
                    continue
                if isinstance(step, tuple):
                    remote.resize(*step)
                    local.resize(*step)
                else:
                    remote.feed(step)
                    local.feed(step)
                local.process(float("inf"))
                await _until(lambda: remote.idle)
                total = local.total_lines
                assert local.wraps(0, total)  # the test has something to compare
                assert remote.transcript(0, total) == local.transcript(0, total), number
                assert remote.wraps(0, total) == local.wraps(0, total), number
                assert remote.alt_screen == local.alt_screen
        finally:
            pool.close()

    asyncio.run(run())
