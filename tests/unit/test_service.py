"""PtyService over a fake PtyBackend: limits, ownership, release during open, close idempotence, subscriptions,
and a reload that reaches every bound. No process, no PTY: the service knows nothing of them."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from ptyd import protocol as p
from ptyd.backends.base import SpawnSpec
from ptyd.config import Config
from ptyd.errors import BackendNotFound, LimitExceeded, SessionNotFound
from ptyd.service.service import PtyService

from .conftest import TOKEN, run


class FakeSession:
    motd = ""
    workspace = ""
    open_wait_reason: p.WaitReason = "stdin_read"
    pid = 4242
    cgroup = None

    def __init__(self, spec: SpawnSpec) -> None:
        self.spec = spec
        self.type = "fake"
        self.name = spec.name
        self.closes: list[str] = []
        self.listener: Callable[[p.TerminalEvent], None] | None = None

    def status(self) -> p.SessionStatus:
        return p.Running()

    def info(self, owner: str, owner_name: str | None) -> p.SessionInfo:
        return p.SessionInfo(
            session_id=self.spec.session_id,
            name=self.name,
            type=self.type,
            pid=self.pid,
            status=p.Running(),
            cols=self.spec.cols,
            rows=self.spec.rows,
            alt_screen=False,
            foreground=None,
            busy=False,
            operation_id=None,
            created_at_ms=0,
            total_lines=0,
            owner=owner,
            owner_name=owner_name,
            password_prompt=False,
        )

    def set_listener(self, listener: Callable[[p.TerminalEvent], None] | None, output: bool) -> None:
        self.listener = listener

    async def close(self, reason: str) -> int:
        self.closes.append(reason)
        await asyncio.sleep(0)
        return 1


class FakeBackend:
    type = "fake"

    def __init__(self) -> None:
        self.spawned: list[FakeSession] = []
        self.gate: asyncio.Event | None = None  # set: spawns wait on it (a program that is slow to start)

    async def spawn(self, spec: SpawnSpec) -> FakeSession:
        if self.gate is not None:
            await self.gate.wait()
        session = FakeSession(spec)
        self.spawned.append(session)
        return session


def service(**overrides: Any) -> tuple[PtyService, FakeBackend]:
    backend = FakeBackend()
    return PtyService(Config(**overrides), {"fake": backend}, "none"), backend


def open_params(**params: Any) -> p.TerminalOpenParams:
    return p.TerminalOpenParams(token=TOKEN, type="fake", **params)


def test_open_publishes_a_session_its_owner_alone_sees() -> None:
    async def main() -> None:
        svc, _ = service()
        alice, _ = svc.register("alice")
        bob, _ = svc.register("bob")
        operator, _ = svc.register("operator", operator=True)
        session = await svc.open(alice, open_params(name="build"))
        sid = session.info("", None).session_id
        assert svc.describe(alice, sid).owner == alice.agent_id
        assert svc.describe(operator, sid).owner_name == "alice"  # the operator sees every agent's sessions
        with pytest.raises(SessionNotFound) as err:
            svc.describe(bob, sid)
        unknown = pytest.raises(SessionNotFound)
        with unknown as missing:
            svc.describe(bob, "pty-nonexistent")
        assert err.value.data == {"kind": "session_not_found", "session_id": sid}  # same answer as unknown
        assert missing.value.data["kind"] == err.value.data["kind"]
        assert [s.session_id for s in svc.list(bob)] == []
        assert [s.session_id for s in svc.list(operator)] == [sid]

    run(main)


def test_unknown_type_is_backend_not_found() -> None:
    async def main() -> None:
        svc, _ = service()
        agent, _ = svc.register(None)
        with pytest.raises(BackendNotFound):
            await svc.open(agent, p.TerminalOpenParams(token=TOKEN, type="teleport"))

    run(main)


def test_session_limits_count_sessions_being_opened() -> None:
    async def main() -> None:
        svc, backend = service(max_sessions=3, max_sessions_per_agent=2)
        alice, _ = svc.register("alice")
        bob, _ = svc.register("bob")
        await svc.open(alice, open_params())
        await svc.open(alice, open_params())
        with pytest.raises(LimitExceeded) as per_agent:
            await svc.open(alice, open_params())
        assert per_agent.value.data["limit"] == "max_sessions_per_agent"
        backend.gate = asyncio.Event()
        opening = asyncio.ensure_future(svc.open(bob, open_params()))
        await asyncio.sleep(0)  # bob's open is under way: it holds the last slot
        with pytest.raises(LimitExceeded) as total:
            await svc.open(bob, open_params())
        assert total.value.data == {"kind": "limit_exceeded", "limit": "max_sessions", "value": 3}
        backend.gate.set()
        await opening
        assert svc.session_count == 3

    run(main)


def test_an_agent_released_during_open_gets_no_session() -> None:
    async def main() -> None:
        svc, backend = service()
        agent, _ = svc.register("short-lived")
        backend.gate = asyncio.Event()
        opening = asyncio.ensure_future(svc.open(agent, open_params()))
        await asyncio.sleep(0)
        await svc.release(agent)
        backend.gate.set()
        with pytest.raises(SessionNotFound):
            await opening
        (session,) = backend.spawned
        assert session.closes == ["owner released during open"]  # started, then closed: nobody owns it
        assert svc.session_count == 0

    run(main)


def test_an_agent_whose_open_is_slow_is_not_released_as_idle() -> None:
    """Seen at load 5-8: an agent was released as idle before its own open returned (test_idle_agents_are_released).
    Its time in a call is not idleness; the idle clock starts again when the call ends."""

    async def main() -> None:
        svc, backend = service(agent_idle_timeout_ms=1)
        agent, _ = svc.register("slow-start")
        backend.gate = asyncio.Event()
        opening = asyncio.ensure_future(svc.open(agent, open_params()))
        await asyncio.sleep(0.01)  # ten idle timeouts pass while the program starts
        await svc.release_idle()
        assert agent in svc.agents
        backend.gate.set()
        await opening
        assert agent.idle_for(agent.last_seen) == 0  # its open's end was its last activity
        await asyncio.sleep(0.01)
        await svc.release_idle()
        assert agent not in svc.agents  # idle after the call: released as before

    run(main)


def test_close_is_idempotent_for_its_owner_only() -> None:
    async def main() -> None:
        svc, _ = service()
        alice, _ = svc.register("alice")
        bob, _ = svc.register("bob")
        sid = (await svc.open(alice, open_params())).info("", None).session_id
        with pytest.raises(SessionNotFound):
            await svc.close(bob, sid, None)
        # Two closes at once: both wait for the close, and the session is forgotten once.
        first, second = await asyncio.gather(svc.close(alice, sid, "done"), svc.close(alice, sid, "again"))
        assert (first[0], second[0]) == (True, True)
        assert await svc.close(alice, sid, None) == (False, 0)  # closing a closed id again is a no-op success
        with pytest.raises(SessionNotFound):
            await svc.close(bob, sid, None)  # but not for another agent
        assert svc.session_count == 0
        assert sid not in alice.session_ids

    run(main)


def test_release_closes_the_agents_sessions_and_revokes_it_at_once() -> None:
    async def main() -> None:
        svc, _ = service()
        agent, token = svc.register("a")
        await svc.open(agent, open_params())
        await svc.open(agent, open_params())
        assert await svc.release(agent) == 2
        with pytest.raises(Exception, match="revoked"):
            svc.authenticate(token)
        assert svc.session_count == 0

    run(main)


def test_subscriptions_per_connection_are_bounded() -> None:
    async def main() -> None:
        svc, _ = service(max_subscriptions_per_connection=2)
        agent, _ = svc.register("a")
        first = svc.subscribe(agent, None, False, lambda _: None, connection=1)
        svc.subscribe(agent, None, False, lambda _: None, connection=1)
        with pytest.raises(LimitExceeded) as err:
            svc.subscribe(agent, None, False, lambda _: None, connection=1)
        assert err.value.data == {"kind": "limit_exceeded", "limit": "max_subscriptions_per_connection", "value": 2}
        svc.subscribe(agent, None, False, lambda _: None, connection=2)  # another connection has its own
        assert svc.unsubscribe(agent, first)
        svc.subscribe(agent, None, False, lambda _: None, connection=1)  # an ended one frees its slot
        svc.drop_connection(1)
        assert svc.events.count(1) == 0
        assert svc.events.count(2) == 1

    run(main)


def test_events_reach_the_owner_and_the_operator_only() -> None:
    async def main() -> None:
        svc, backend = service()
        alice, _ = svc.register("alice")
        bob, _ = svc.register("bob")
        operator, _ = svc.register("op", operator=True)
        heard: dict[str, list[str]] = {"alice": [], "bob": [], "op": []}
        for who, agent in (("alice", alice), ("bob", bob), ("op", operator)):
            svc.subscribe(agent, None, False, lambda e, who=who: heard[who].append(e.kind), connection=hash(who))
        session = await svc.open(alice, open_params())
        sid = session.info("", None).session_id
        listener = backend.spawned[0].listener
        assert listener is not None  # someone listens: the session's events go to the hub
        listener(p.TerminalEvent(subscription_id="", session_id=sid, seq=0, kind="input_wait"))
        assert heard == {"alice": ["input_wait"], "bob": [], "op": ["input_wait"]}

    run(main)


def test_a_reload_reaches_the_agent_limit() -> None:
    async def main() -> None:
        svc, backend = service(max_agents=2)
        svc.register("a")
        svc.register("b")
        with pytest.raises(LimitExceeded):
            svc.register("c")
        svc.reconfigure(Config(max_agents=3), {"fake": backend})
        svc.register("c")
        assert svc.config.max_agents == 3

    run(main)
