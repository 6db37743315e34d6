"""A LocalSession in the test's own loop, over one real cheap program each: how a send ends (the readiness
decision), what a failure inside the send loop leaves, and the bound on input the program does not read."""

from __future__ import annotations

import logging

import pytest

from ptyd import protocol as p
from ptyd.backends.session.session import LocalSession
from ptyd.errors import InternalError, LimitExceeded

from .conftest import TOKEN, local_service, open_exec, run, send_params, sent, until


def local(service: object, session_id: str) -> LocalSession:
    session = service._sessions[session_id].session  # type: ignore[attr-defined]
    assert isinstance(session, LocalSession)
    return session


def test_a_reader_blocked_on_the_tty_is_stdin_read() -> None:
    result = sent("/bin/cat", "hello\n", idle_ms=30_000)
    assert result.wait_reason == "stdin_read"
    assert result.ready_basis is not None
    assert "hello" in result.viewport


def test_a_program_that_neither_reads_nor_prints_is_inferred_idle() -> None:
    async def main() -> p.SendResult:
        async with local_service() as service:
            agent, _ = service.register("t")
            sid = await open_exec(service, agent, "/bin/sleep", "60")
            return await service.send(agent, send_params(sid, "x", idle_ms=100, timeout_ms=10_000)).result()

    result = run(main)
    assert result.wait_reason == "inferred_idle"
    assert result.ready_basis is None


def test_a_program_printing_without_pause_times_out() -> None:
    async def main() -> p.SendResult:
        async with local_service() as service:
            agent, _ = service.register("t")
            sid = await open_exec(service, agent, "/bin/sh", "-c", "read _; while :; do echo y; sleep 0.01; done")
            return await service.send(agent, send_params(sid, "go\n", idle_ms=2_000, timeout_ms=300)).result()

    assert run(main).wait_reason == "timeout"


def test_a_program_that_exits_is_session_exit() -> None:
    async def main() -> p.SendResult:
        async with local_service() as service:
            agent, _ = service.register("t")
            sid = await open_exec(service, agent, "/bin/sh", "-c", "read _; exit 3")
            return await service.send(agent, send_params(sid, "bye\n")).result()

    result = run(main)
    assert result.wait_reason == "session_exit"
    assert result.session_status == p.Exited(exit_code=3, signal=None)


def test_a_failure_in_the_send_loop_settles_the_send_and_frees_the_session(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def main() -> tuple[InternalError, p.SessionInfo, p.SendResult]:
        async with local_service() as service:
            agent, _ = service.register("t")
            sid = await open_exec(service, agent, "/bin/cat")
            session = local(service, sid)
            check = session.tracker.check

            def broken() -> object:
                raise RuntimeError("a bug in the readiness code")

            monkeypatch.setattr(session.tracker, "check", broken)
            op = service.send(agent, send_params(sid, "one\n"))
            with pytest.raises(InternalError) as failed:
                await op.result()
            info = service.describe(agent, sid)
            with pytest.raises(InternalError):  # terminal_wait of it says the same
                await service.wait(agent, p.TerminalWaitParams(token=TOKEN, session_id=sid, timeout_ms=0))
            monkeypatch.setattr(session.tracker, "check", check)
            after = await service.send(agent, send_params(sid, "two\n")).result()
            return failed.value, info, after

    with caplog.at_level(logging.ERROR, logger="ptyd.session"):
        error, info, after = run(main)
    incident = error.data["incident"]
    assert error.data["kind"] == "internal"
    assert any(f"incident {incident} in send" in r.getMessage() and r.exc_info for r in caplog.records)
    assert not info.busy  # not left busy until closed
    assert after.wait_reason == "stdin_read"  # the next send works
    assert "two" in after.viewport


def test_input_the_program_does_not_read_is_bounded() -> None:
    limit = 64 * 1024

    async def main() -> tuple[LimitExceeded, int]:
        async with local_service(max_pending_input_bytes=limit) as service:
            agent, _ = service.register("t")
            sid = await open_exec(service, agent, "/bin/sleep", "60")  # never reads its input
            session = local(service, sid)
            chunk = ("x" * 99 + "\n") * 400  # 40 KB of short lines: a canonical-mode reader takes them
            refused: LimitExceeded | None = None
            for _ in range(20):  # the kernel takes what fits its queues; past that the daemon holds the rest
                try:
                    op = service.send(agent, send_params(sid, chunk, idle_ms=50))
                except LimitExceeded as exc:
                    refused = exc
                    break
                assert (await op.result()).wait_reason == "inferred_idle"
            assert refused is not None, "sends that are never read were all accepted"
            assert not service.describe(agent, sid).busy  # the refused send started nothing
            return refused, session.channel.pending

    error, pending = run(main)
    assert error.data["limit"] == "max_pending_input_bytes"
    assert error.data["reason"] == "input_pending"
    assert pending <= limit


def test_answers_to_queries_a_program_never_reads_are_dropped(caplog: pytest.LogCaptureFixture) -> None:
    limit = 16 * 1024
    doublings = 15
    queries = 2**doublings  # DA1 queries: ~10 bytes of answer each, 320 KB in all, far past the kernel's queue

    async def main() -> int:
        async with local_service(max_pending_input_bytes=limit) as service:
            agent, _ = service.register("t")
            # Raw mode: a canonical-mode tty would discard what does not fit its line instead of filling up.
            # All the queries in one printf (a string doubled): a shell loop of 40,000 printfs took a second.
            many = f"q='\\033[c'; i=0; while [ $i -lt {doublings} ]; do q=$q$q; i=$((i+1)); done; printf \"$q\""
            script = f"stty raw -echo; {many}; echo done; sleep 60"
            sid = await open_exec(service, agent, "/bin/sh", "-c", script)
            session = local(service, sid)
            await until(lambda: session.channel.received >= 3 * queries, within=15, message="the queries")
            await session.channel.rendered()
            await until(lambda: session.answers.dropped > 0, within=15, message="the answers dropped")
            return session.channel.pending

    # The program never waits on the terminal, so its answers are never written (ptyd/backends/session/answers.py); the
    # max_pending_input_bytes bound (a warning) is for answers written to a program that then stops reading.
    with caplog.at_level(logging.WARNING, logger="ptyd.session"):
        pending = run(main)
    assert pending <= limit
