"""Agents and their tokens. Authorization compares the exact owning agent; names are display metadata only, except
that a name with a registration key (config ``agent_keys``) is an identity its key proves: whose sandbox profile,
writable roots, workspaces, session cap and aggregate limits a registration gets (docs/sandbox.md)."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import secrets
import time
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

import msgspec

from ptyd.errors import LimitExceeded, Unauthorized

TOKEN_PREFIX = "ptyd_"  # noqa: S105 - a prefix, not a secret
KEY_PREFIX = "ptydk_"  # a registration key, told from a token at a glance


def new_key() -> tuple[str, str]:
    """A fresh registration key, and the digest the config keeps of it (``agent_keys``)."""
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    return key, "sha256:" + hashlib.sha256(key.encode()).hexdigest()


def proves(digests: Mapping[str, str], name: str | None, key: str | None) -> bool:
    """Whether ``key`` is the registration key of the agent ``name`` (compared in constant time)."""
    expected = digests.get(name or "")
    if expected is None or not key:
        return False
    given = "sha256:" + hashlib.sha256(key.encode()).hexdigest()
    return hmac.compare_digest(given.encode(), expected.encode())


def identity(digests: Mapping[str, str], agent_id: str, name: str | None, proven: bool) -> str:
    """Whose workspaces, session cap and aggregate limits a registration shares: its name, unless the name has a
    key this registration did not give (then, as an agent without a name, its own id)."""
    if name is None or (name in digests and not proven):
        return agent_id
    return name


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
    proven: bool = False  # its registration key proved its name
    identity: str | None = None  # None: from a daemon before identities, its name or else its id


@dataclass(slots=True, eq=False)
class Agent:
    agent_id: str
    name: str | None
    digest: bytes
    operator: bool = False  # may see and act on every agent's sessions (ptyctl)
    proven: bool = False  # its registration key proved its name (agent_keys)
    identity: str = ""  # whose workspaces, caps and aggregate limits it shares (``identity()``); "": its id
    session_ids: set[str] = field(default_factory=set)
    # Ids this agent closed: closing one again is a no-op success rather than session_not_found.
    closed_ids: OrderedDict[str, None] = field(default_factory=OrderedDict)
    last_seen: float = field(default_factory=time.monotonic)
    calls: int = 0  # its calls in flight (an open, a wait): an agent waiting on the daemon is not idle

    @contextlib.contextmanager
    def calling(self) -> Iterator[None]:
        """A call of this agent in flight: never idle during it, and its end counts as activity."""
        self.calls += 1
        try:
            yield
        finally:
            self.calls -= 1
            self.last_seen = time.monotonic()

    def idle_for(self, now: float) -> float:
        """Seconds since its last call ended, or 0 while one is in flight."""
        return 0.0 if self.calls else now - self.last_seen


class AgentRegistry:
    def __init__(self, max_agents: int) -> None:
        self.max_agents = max_agents
        self._by_digest: dict[bytes, Agent] = {}

    def __len__(self) -> int:
        return len(self._by_digest)

    def __iter__(self) -> Iterator[Agent]:
        return iter(list(self._by_digest.values()))  # a copy: releasing while iterating is allowed

    def register(
        self, name: str | None, *, operator: bool = False, keys: Mapping[str, str] | None = None, key: str | None = None
    ) -> tuple[Agent, str]:
        if len(self._by_digest) >= self.max_agents:
            raise LimitExceeded("too many agents are registered", limit="max_agents", value=self.max_agents)
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        agent_id = "agent-" + secrets.token_hex(8)
        keys = keys or {}
        proven = proves(keys, name, key)
        agent = Agent(
            agent_id=agent_id,
            name=name,
            digest=_digest(token),
            operator=operator,
            proven=proven,
            identity=identity(keys, agent_id, name, proven),
        )
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
