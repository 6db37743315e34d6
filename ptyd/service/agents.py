"""Agents and their tokens. Authorization compares the exact owning agent; names are display metadata only."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field

import msgspec

from ptyd.errors import LimitExceeded, Unauthorized

TOKEN_PREFIX = "ptyd_"  # noqa: S105 - a prefix, not a secret


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


class AgentState(msgspec.Struct, kw_only=True):
    """An agent as the state document carries it to the next daemon."""

    agent_id: str
    name: str | None
    digest: bytes  # SHA-256 of the token: the token itself is never kept
    operator: bool
    closed_ids: list[str]
    idle_s: float  # seconds since its last call


@dataclass(slots=True, eq=False)
class Agent:
    agent_id: str
    name: str | None
    digest: bytes
    operator: bool = False  # may see and act on every agent's sessions (ptyctl)
    session_ids: set[str] = field(default_factory=set)
    # Ids this agent closed: closing one again is a no-op success rather than session_not_found.
    closed_ids: OrderedDict[str, None] = field(default_factory=OrderedDict)
    last_seen: float = field(default_factory=time.monotonic)


class AgentRegistry:
    def __init__(self, max_agents: int) -> None:
        self.max_agents = max_agents
        self._by_digest: dict[bytes, Agent] = {}

    def __len__(self) -> int:
        return len(self._by_digest)

    def __iter__(self) -> Iterator[Agent]:
        return iter(list(self._by_digest.values()))  # a copy: releasing while iterating is allowed

    def register(self, name: str | None, *, operator: bool = False) -> tuple[Agent, str]:
        if len(self._by_digest) >= self.max_agents:
            raise LimitExceeded("too many agents are registered", limit="max_agents", value=self.max_agents)
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        agent = Agent(agent_id="agent-" + secrets.token_hex(8), name=name, digest=_digest(token), operator=operator)
        self._by_digest[agent.digest] = agent
        return agent, token

    def adopt(self, agent: Agent) -> None:
        """An agent handed over by the previous daemon: its token (kept as a digest) goes on working."""
        self._by_digest[agent.digest] = agent

    def authenticate(self, token: str | None) -> Agent:
        if not token:
            raise Unauthorized("a token is required")
        digest = _digest(token)
        agent = self._by_digest.get(digest)
        # The dict lookup is keyed by a hash of the token; the final comparison is constant-time.
        if agent is None or not hmac.compare_digest(agent.digest, digest):
            raise Unauthorized("unknown or revoked token")
        agent.last_seen = time.monotonic()
        return agent

    def __contains__(self, agent: Agent) -> bool:
        return self._by_digest.get(agent.digest) is agent

    def revoke(self, agent: Agent) -> None:
        self._by_digest.pop(agent.digest, None)
