"""Issue 29's cuts to a send's round trip, each shown not to change what a result says: the process facts read
while an engine worker renders are read again when the group in front changed or the program exited since, and
output read for a worker goes out before the probe that the same output woke."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from ptyd import protocol as p
from ptyd.backends.os.sandbox.limits import Counters
from ptyd.backends.session.facts import ProcessFacts
from ptyd.backends.session.send_loop import SendLoop
from ptyd.config import Config

from .conftest import local_service, open_exec, run, send_params
from .test_session import local

MARKER = [p.ListeningPort(port=1, address="192.0.2.1", pid=1)]  # no process here listens on TEST-NET-1


def facts(pgid: int | None, *, exited: bool = False) -> ProcessFacts:
    front = p.Foreground(pid=1, pgid=1, name="stale") if pgid is not None else None
    return ProcessFacts(pgid=pgid, exited=exited, foreground=front, listening=MARKER, counters=Counters(0, 0))


def test_facts_hold_only_for_the_same_group_and_exit() -> None:
    assert facts(42).hold(42, False)
    assert not facts(42).hold(43, False)  # another group came to the front
    assert not facts(42).hold(None, False)
    assert not facts(42).hold(42, True)  # the program exited since


def _send_cat(monkeypatch: pytest.MonkeyPatch, same_group: bool) -> p.SendResult:
    """A send to ``cat`` whose driver is handed facts read "during the render": of the group in front or not."""

    async def main() -> p.SendResult:
        async with local_service() as service:
            agent, _ = service.register("t")
            sid = await open_exec(service, agent, "/bin/cat")
            session = local(service, sid)
            send_loop = session.sends.send_loop
            take = send_loop.take_facts

            def handed() -> ProcessFacts | None:
                take()
                return facts(session.foreground.pgid() if same_group else -7)

            monkeypatch.setattr(send_loop, "take_facts", handed)
            return await service.send(agent, send_params(sid, "hello\n", idle_ms=30_000)).result()

    return run(main)


def test_facts_of_the_group_still_in_front_are_the_results(monkeypatch: pytest.MonkeyPatch) -> None:
    result = _send_cat(monkeypatch, same_group=True)
    assert result.wait_reason == "stdin_read"
    assert result.listening == MARKER
    assert result.foreground is not None
    assert result.foreground.name == "stale"


def test_facts_of_a_group_no_longer_in_front_never_reach_the_result(monkeypatch: pytest.MonkeyPatch) -> None:
    result = _send_cat(monkeypatch, same_group=False)
    assert result.wait_reason == "stdin_read"
    assert result.listening == []
    assert result.foreground is not None
    assert result.foreground.name == "cat"


def _loop(remote: bool, rendered: int, received: int) -> SendLoop:
    fakes: Any = SimpleNamespace(remote=remote, rendered_bytes=rendered, received=received)
    return SendLoop(fakes, Config(), fakes, fakes, fakes, fakes, fakes, fakes)


@pytest.mark.parametrize(
    ("remote", "rendered", "expected"),
    [
        (True, 0, ["flushed", "probe"]),  # a worker's output is written to it first
        (True, 10, ["probe", "flushed"]),  # nothing of it unrendered: no turn is spent
        (False, 0, ["probe", "flushed"]),  # the engine in the daemon rendered it when it was read
    ],
)
def test_output_for_a_worker_goes_out_before_the_probe(remote: bool, rendered: int, expected: list[str]) -> None:
    async def main() -> list[str]:
        send_loop = _loop(remote, rendered, 10)
        order: list[str] = []
        asyncio.get_running_loop().call_soon(order.append, "flushed")  # as the worker link's write is queued
        await send_loop._let_engine_start()
        order.append("probe")
        await asyncio.sleep(0)
        return order

    assert run(main) == expected


class _Channel:
    """A PTY channel whose drain reads 10 bytes that an engine worker has not acknowledged yet."""

    def __init__(self, order: list[str]) -> None:
        self.order = order
        self.received = self.rendered_bytes = 0

    def drain(self, *, paused_too: bool = False) -> None:
        if self.received == 0:
            self.received = 10
            asyncio.get_running_loop().call_soon(self.order.append, "sent to worker")  # as the link's write

    async def rendered(self) -> None:
        self.rendered_bytes = self.received
        self.order.append("acknowledged")


def test_facts_are_read_after_the_prompt_went_to_the_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    from ptyd.backends.session import send_loop as module

    async def main() -> tuple[list[str], bool]:
        order: list[str] = []
        session: Any = SimpleNamespace(replies=0, answers=SimpleNamespace(holding=False))
        terminal: Any = SimpleNamespace(remote=True)
        fake: Any = SimpleNamespace()
        loop = SendLoop(session, Config(), terminal, _Channel(order), fake, fake, fake, fake)

        def read_facts(*_: object) -> ProcessFacts:
            order.append("facts read")
            return facts(1)

        monkeypatch.setattr(module, "read_facts", read_facts)
        owed_nothing = await loop._nothing_owed(facts=True)
        assert loop.take_facts() == facts(1)
        assert loop.take_facts() is None  # once
        return order, owed_nothing

    order, owed_nothing = run(main)
    assert owed_nothing
    assert order == ["sent to worker", "facts read", "acknowledged"]
