"""Subscriptions to session events: who hears what. A subscription belongs to one agent and one connection; it
hears that agent's sessions (every session for the operator), one of them or all, current and future ones."""

from __future__ import annotations

import secrets
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import msgspec

from ptyd import protocol as p
from ptyd.errors import LimitExceeded
from ptyd.service.agents import Agent

Sink = Callable[[p.TerminalEvent], None]


@dataclass(slots=True, eq=False)
class Subscription:
    subscription_id: str
    agent: Agent
    session_id: str | None  # None: every session of the agent
    output: bool
    sink: Sink
    connection: int = 0  # the client connection it ends with (its events go there)
    seq: int = 0
    screen: bool = False

    def hears(self, session_id: str, owner: Agent) -> bool:
        return (self.agent is owner or self.agent.operator) and self.session_id in (None, session_id)


class EventHub:
    def __init__(self) -> None:
        self._subs: dict[str, Subscription] = {}
        self._per_connection: Counter[int] = Counter()

    def __iter__(self) -> Iterator[Subscription]:
        return iter(list(self._subs.values()))

    def add(
        self,
        agent: Agent,
        session_id: str | None,
        output: bool,
        sink: Sink,
        *,
        connection: int = 0,
        limit: int = 0,
        screen: bool = False,
    ) -> Subscription:
        """A new subscription; past ``limit`` on one connection (0: none) it is refused: publishing costs every
        subscription, so one client cannot make every event cost thousands."""
        if limit and self._per_connection[connection] >= limit:
            raise LimitExceeded(
                "this connection's subscription limit is reached",
                limit="max_subscriptions_per_connection",
                value=limit,
            )
        sub = Subscription("sub-" + secrets.token_hex(8), agent, session_id, output, sink, connection, screen=screen)
        self._subs[sub.subscription_id] = sub
        self._per_connection[connection] += 1
        return sub

    def _drop(self, sub: Subscription) -> None:
        del self._subs[sub.subscription_id]
        self._per_connection[sub.connection] -= 1
        if self._per_connection[sub.connection] <= 0:
            del self._per_connection[sub.connection]

    def remove(self, agent: Agent, subscription_id: str) -> Subscription | None:
        sub = self._subs.get(subscription_id)
        if sub is None or sub.agent is not agent:
            return None
        self._drop(sub)
        return sub

    def drop_agent(self, agent: Agent) -> None:
        for sub in self:
            if sub.agent is agent:
                self._drop(sub)

    def drop_connection(self, connection: int) -> bool:
        """End every subscription of a connection that closed; whether there were any."""
        subs = [sub for sub in self if sub.connection == connection]
        for sub in subs:
            self._drop(sub)
        return bool(subs)

    def count(self, connection: int) -> int:
        return self._per_connection[connection]

    def listeners(self, session_id: str, owner: Agent) -> tuple[bool, bool]:
        """(anyone hears this session, anyone wants its output)."""
        subs = [s for s in self._subs.values() if s.hears(session_id, owner)]
        return bool(subs), any(s.output for s in subs)

    def screen_listeners(self, session_id: str, owner: Agent) -> bool:
        """Anyone wants this session's screen events."""
        return any(s.screen and s.hears(session_id, owner) for s in self._subs.values())

    def publish(self, session_id: str, owner: Agent, event: p.TerminalEvent) -> None:
        for sub in self:
            if not sub.hears(session_id, owner) or (event.kind == "output" and not sub.output):
                continue
            if event.kind == "screen" and not sub.screen:
                continue
            sub.seq += 1
            sub.sink(msgspec.structs.replace(event, subscription_id=sub.subscription_id, seq=sub.seq))
