"""Issue 29's cuts to a send's round trip, each shown not to change what a result says: the process facts read
while an engine worker renders are read again when the group in front changed or the program exited since, and
output read for a worker goes out before the probe that the same output woke."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from types import SimpleNamespace
from typing import Any

import pytest

from ptyd import protocol as p
from ptyd.backends.os.sandbox.limits import Counters
from ptyd.backends.session.facts import ProcessFacts
from ptyd.backends.session.send_loop import SendLoop
from ptyd.config import Config

from .conftest import local_service, open_exec, run, send_params, sent, until
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


class _Flood:
    """A channel's answers to ``_probe_wait``: output read in bulk or not, and bytes still unread in the PTY."""

    def __init__(self, bulk: bool, unread: int) -> None:
        self.bulk, self.waiting = bulk, unread

    def unread(self) -> int:
        return self.waiting


def _probe_loop(channel: _Flood) -> SendLoop:
    fake: Any = SimpleNamespace()
    return SendLoop(fake, Config(), fake, channel, fake, fake, fake, fake)  # type: ignore[arg-type]


def test_a_flood_is_probed_when_its_output_pauses_or_its_cap_passes() -> None:
    from ptyd.backends.session.send_loop import BULK_PROBE_INTERVAL_S, BULK_PROBE_MAX_S

    async def main() -> None:
        cap = Config().probe_max_interval_ms / 1000
        quiet = _probe_loop(_Flood(bulk=False, unread=100))
        assert quiet._probe_wait(10.0) == 0.0  # not a flood: probed at once, whatever waits
        flood = _Flood(bulk=True, unread=100)
        loop = _probe_loop(flood)
        loop._probed_at = 10.0
        assert loop._probe_wait(10.001) == pytest.approx(BULK_PROBE_INTERVAL_S - 0.001)  # every few ms at most
        # Past that, output still unread: the program wrote on, the read that takes it wakes the loop (the cap
        # bounds the wait).
        assert loop._probe_wait(10.0 + BULK_PROBE_INTERVAL_S) == pytest.approx(cap - BULK_PROBE_INTERVAL_S)
        assert loop._probe_wait(10.0 + cap) == 0.0
        loop._probed_at = 20.0
        assert loop._probe_wait(20.0 + cap) == pytest.approx(cap)  # it wrote on through the cap: the cap doubled
        for _ in range(20):
            loop._probe_wait(loop._probed_at + BULK_PROBE_MAX_S)
        assert loop._bulk_cap == BULK_PROBE_MAX_S
        flood.waiting = 0  # the PTY empty: the program may have stopped writing, probed now, the cap reset
        assert loop._probe_wait(loop._probed_at + 2 * BULK_PROBE_INTERVAL_S) == 0.0
        assert loop._bulk_cap == cap

    run(main)


def _probes_while(
    monkeypatch: pytest.MonkeyPatch, command: str, settle: Callable[[Any], Awaitable[None]], **params: Any
) -> tuple[int, str]:
    """A shell sent ``command``: its readiness probes in the 0.5 s after ``settle(session)`` returns, and how the send
    ends once the shell is interrupted."""

    async def main() -> tuple[int, str]:
        async with local_service() as service:
            agent, _ = service.register("t")
            sid = await open_exec(service, agent, "/bin/sh")
            session = local(service, sid)
            tracker = session.sends.send_loop.tracker
            check, probes = tracker.check, [0]

            def counted() -> Any:
                probes[0] += 1
                return check()

            monkeypatch.setattr(tracker, "check", counted)
            op = service.send(agent, send_params(sid, command, **params))
            await settle(session)
            before = probes[0]
            await asyncio.sleep(0.5)  # the window the probes are counted in (proving absence)
            during = probes[0] - before
            session.channel.release()  # a reader the test paused goes on
            service.signal(agent, p.TerminalSignalParams(token="ptyd_unused", session_id=sid, signal="SIGINT"))
            return during, (await op.result()).wait_reason

    return run(main)


def test_a_flood_whose_reader_is_paused_is_seldom_probed(monkeypatch: pytest.MonkeyPatch) -> None:
    # 50 floods with sends in flight were probed at every wake-up while their readers waited on the pacer: 40% of
    # the daemon went to /proc reads whose verdict could only be "writing", and a send beside them waited.
    async def paused(session: Any) -> None:
        await until(lambda: session.channel.bulk, message="the flood read in bulk")
        session.channel.pause_floods()  # as the pacer or a send elsewhere would: its output stays in the PTY
        await until(lambda: session.channel.unread() > 0, message="output waiting in the PTY")

    during, reason = _probes_while(monkeypatch, "yes\n", paused, timeout_ms=30_000)
    assert during <= 5  # 50 ms, then 100, 200: the cap doubles while it writes on (about 14 at 50 ms each)
    assert reason == "stdin_read"  # and once it stops, the shell's prompt ends the send


def test_a_named_wait_looks_at_a_flood_every_few_ms_at_most() -> None:
    # Each look searches the changed screen again, and a flood wakes the send's loop at each read: at most every
    # BULK_PROBE_INTERVAL_S then, as until.py counts on; at every wake-up otherwise.
    from ptyd.backends.session.send_loop import BULK_PROBE_INTERVAL_S

    async def main() -> list[bool]:
        flood = _Flood(bulk=True, unread=0)
        loop = _probe_loop(flood)
        looks = [loop._named_due(), loop._named_due()]
        loop._named_at -= BULK_PROBE_INTERVAL_S
        looks.append(loop._named_due())
        flood.bulk = False
        looks += [loop._named_due(), loop._named_due()]
        return looks

    assert run(main) == [True, False, True, True, True]


def test_a_flood_being_sent_does_not_wake_its_loop_at_each_read() -> None:
    # A flood's send loop woke at each of its reads (~4 KiB) only to sleep again until the probe was due: 700
    # wake-ups for a `seq` of 10 MB, each a future, a timer and a few reads of the clock and the PTY.
    from ptyd.backends.session.send_loop import BULK_PROBE_INTERVAL_S

    async def main() -> list[bool]:
        flood = _Flood(bulk=True, unread=100)
        loop = _probe_loop(flood)
        ended = []
        for bulk, unread, probed_ago, output in [
            (True, 100, 0.0, True),  # a flood's read while its probe is not due: noted, the sleep goes on
            (True, 0, 0.0, True),  # ...within its few ms, even with nothing left unread
            (True, 100, 1.0, True),  # ...or while more of it waits unread (its read will come)
            (True, 0, 1.0, True),  # the probe is due: woken
            (False, 100, 0.0, True),  # output not in bulk (the prompt after a flood): woken at once
            (True, 100, 0.0, False),  # an exit or a cancel: woken at once
        ]:
            flood.bulk, flood.waiting = bulk, unread
            loop._probed_at = time.monotonic() - probed_ago
            sleep = asyncio.ensure_future(loop._sleep_or_activity(10.0, flood=True))
            await asyncio.sleep(0)
            loop.wake(output)
            await asyncio.sleep(0)
            ended.append(sleep.done())
            if not sleep.done():
                loop.wake(False)  # ends it
                assert await sleep  # and it says output came meanwhile
        assert BULK_PROBE_INTERVAL_S < 1.0
        return ended

    assert run(main) == [False, False, False, True, True, True]


def test_a_flood_being_sent_still_ends_at_its_prompt() -> None:
    # Its reads no longer wake the send's loop: the prompt after it (or its last bulk read) still does.
    result = sent("/bin/sh", "seq 1 300000\n", timeout_ms=60_000)
    assert result.wait_reason == "stdin_read"
    assert "300000" in result.viewport


def test_a_flood_gone_silent_is_probed_at_the_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    # A burst whose last read was in bulk, then a minute of compiling: probed as any silent program (the interval
    # doubles to probe_max_interval_ms), not every few ms as while it printed.
    async def silent(session: Any) -> None:
        # Its last line, not the echoed command line (which holds "20000" before the burst has begun).
        await until(lambda: "20000" in (r.strip() for r in session.terminal.visible_rows()), message="the burst shown")
        session.channel._bulk = True  # its last read in bulk, whatever the reads' sizes were here

    during, reason = _probes_while(monkeypatch, "seq 1 20000; sleep 30\n", silent, timeout_ms=60_000, idle_ms=60_000)
    assert during <= 20  # 100 at one every 5 ms
    assert reason == "stdin_read"
