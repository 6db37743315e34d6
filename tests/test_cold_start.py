"""A fresh daemon answers a program's first terminal queries at once, not after its engine workers start.

A worker takes ~1 s to start (3 s under load), and programs that probe the terminal as they start (DA1, a cursor
report) give up after 100-500 ms. Until a session's worker says hello, the daemon answers its queries itself
(``workers.early``) and the worker drops its own answers to that output: each query is answered once.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from bench.cold_start import PROBE, probe_results
from conftest import Daemon, Shell, wait_until
from ptyd.terminal.engines import native_available, open_terminal
from ptyd.terminal.workers.early import EARLY_BYTES, EarlyAnswers
from ptyd.terminal.workers.pool import EnginePool
from ptyd.terminal.workers.proxy import RemoteTerminal

ENGINES = ["ghostty", "pyte"] if native_available() else ["pyte"]


async def _until(predicate: Any) -> None:
    deadline = time.monotonic() + 30.0
    while not predicate():
        assert time.monotonic() < deadline, "condition"
        await asyncio.sleep(0.001)


@pytest.mark.parametrize("engine", ENGINES)
def test_queries_before_the_worker_is_up_are_answered_once_and_at_once(engine: str) -> None:
    before = b"".join(b"line %d\r\n" % i for i in range(100)) + b"ab\x1b[6n\x1b[c"
    after = b"\x1b[?1049h\x1b[3;4Hfull\x1b[6n\x1b[?1049l$ \x1b[6n"

    async def run() -> None:
        pool = EnginePool(1, asyncio.get_running_loop(), stall_s=2.5, early_answers=True)
        pool.warm()
        replies: list[bytes] = []
        term = RemoteTerminal(
            80, 24, scrollback_lines=1000, scrollback_bytes=1 << 20, on_reply=replies.append, pool=pool, engine=engine,
            label="test",
        )  # fmt: skip
        quiet = RemoteTerminal(
            80, 24, scrollback_lines=1000, scrollback_bytes=1 << 20, on_reply=replies.append, pool=pool, engine=engine,
            label="quiet",
        )  # fmt: skip
        local_replies: list[bytes] = []
        local = open_terminal(
            80, 24, scrollback_lines=1000, scrollback_bytes=1 << 20, on_reply=local_replies.append, emulator=engine
        )
        try:
            assert term._early is not None
            assert quiet._early is not None
            started = time.monotonic()
            term.feed(before)
            await _until(lambda: len(replies) == 2)
            answered_s = time.monotonic() - started
            assert not term.link.ready, "the worker was up already: nothing was shown"
            assert answered_s < 0.05
            assert replies[0] == b"\x1b[24;3R"
            await _until(lambda: term.idle and term.link.ready)
            assert quiet._early is None  # dropped at the hello, though it never printed: no idle session keeps it
            term.feed(after)
            await _until(lambda: term.idle)
            for chunk in (before, after):
                local.feed(chunk)
                local.process(float("inf"))
            # The worker rendered everything (the screen and transcript are its own) and answered only what came
            # after its hello: no query was answered twice.
            assert term.transcript(0, 1000) == local.transcript(0, 1000)
            assert term.visible_rows() == local.visible_rows()
            # The same answers as the engine's own, the early ones included: one terminal before the hello and after.
            assert replies == local_replies
            assert replies[2:] == [b"\x1b[3;8R", b"\x1b[24;5R"]
        finally:
            term.close()
            quiet.close()
            pool.close()

    asyncio.run(run())


@pytest.mark.parametrize("engine", ENGINES)
def test_early_answers_identify_as_the_sessions_engine(engine: str) -> None:
    queries = b"\x1b[c\x1b[0c\x1b[>c\x1b[>0c\x1b[>q"
    own: list[bytes] = []
    term = open_terminal(80, 24, scrollback_lines=1, scrollback_bytes=1, on_reply=own.append, emulator=engine)
    term.feed(queries)
    term.process(float("inf"))
    early: list[bytes] = []
    answers = EarlyAnswers(80, 24, early.append, engine)
    assert answers.answer(queries, more=False)
    answers.close()
    assert early == own
    assert len(own) == 5


def test_past_its_bound_the_daemon_leaves_the_answers_to_the_worker() -> None:
    """A flood before the worker is up is not rendered in the daemon (pyte on its loop): a query after it is the
    worker's to answer, late, but once."""
    flood = b"".join(b"%d\r\n" % i for i in range(EARLY_BYTES // 4))
    assert len(flood) > EARLY_BYTES

    async def run() -> None:
        pool = EnginePool(1, asyncio.get_running_loop(), stall_s=2.5, early_answers=True)
        replies: list[bytes] = []
        term = RemoteTerminal(
            80, 24, scrollback_lines=100_000, scrollback_bytes=16 << 20, on_reply=replies.append, pool=pool,
            engine="pyte", label="test",
        )  # fmt: skip
        try:
            term.feed(b"\x1b[5n")
            assert replies == [b"\x1b[0n"]  # at once, before the worker is up
            term.feed(flood + b"\x1b[5n")
            assert replies == [b"\x1b[0n"]
            assert not term.link.ready
            await _until(lambda: term.idle)
            assert replies == [b"\x1b[0n", b"\x1b[0n"]
            assert term.transcript(0, 100_000)[-2:] == [str(EARLY_BYTES // 4 - 1), ""]
        finally:
            term.close()
            pool.close()

    asyncio.run(run())


def test_the_first_program_of_a_fresh_daemon_gets_its_answers_within_its_timeout(
    fresh_daemon: Daemon, tmp_path: Path
) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE)
    fresh_daemon.start()
    with fresh_daemon.rpc() as rpc:
        token = rpc.call("agent_register", name="cold")["token"]
        shell = Shell(rpc, token, type="exec", argv=["python3", str(probe)])
        printed: list[dict[str, float | None]] = []

        def probed() -> bool:
            results = probe_results(shell.call("terminal_screen")["lines"])
            printed.extend([results] if results is not None else [])
            return results is not None

        wait_until(probed, timeout=30, message="the probe's results")
        results = printed[0]
        assert all(ms is not None for ms in results.values()), results  # None: no answer within 100 ms
