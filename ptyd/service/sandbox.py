"""Which sandbox profile a session gets: the agent's own (config), or a stricter one the agent asked for.

"At least as strict" is a partial order, property by property (docs/sandbox.md): profile A is at least as strict
as B when A's filesystem mode is no looser (readonly < workspace < full), every path A makes writable is inside a
path B makes writable, every path B hides is hidden by A too, A has no network where B has none, and every
resource limit of A is no higher than B's (no limit is the highest). Two profiles can be incomparable (one lower
on memory, the other offline): then neither may stand in for the other.
"""

from __future__ import annotations

import os

from ptyd.config import Config, SandboxProfile
from ptyd.errors import SandboxRefused
from ptyd.service.agents import Agent

_FS_RANK = {"readonly": 0, "workspace": 1, "full": 2}
OPERATOR_PROFILE = "none"  # the operator (ptyctl) is the user at a terminal: its sessions may be anything


def _within(path: str, roots: tuple[str, ...]) -> bool:
    path = os.path.normpath(path)
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in map(os.path.normpath, roots))


def looser(a: SandboxProfile, b: SandboxProfile) -> list[str]:
    """The properties in which ``a`` is looser than ``b`` (empty: ``a`` is at least as strict as ``b``)."""
    out = []
    if _FS_RANK[a.filesystem] > _FS_RANK[b.filesystem]:
        out.append("filesystem")
    if b.filesystem != "full" and not all(_within(path, b.writable) for path in a.writable):
        out.append("writable")
    if b.filesystem != "full" and not all(_within(path, a.hidden) for path in b.hidden):
        out.append("hidden")
    if a.network and not b.network:
        out.append("network")
    for limit in ("memory_mib", "pids_max", "cpu_percent"):
        mine, theirs = getattr(a, limit), getattr(b, limit)
        if theirs is not None and (mine is None or mine > theirs):
            out.append(limit)
    return out


def agent_profile(config: Config, agent_name: str | None, *, operator: bool = False) -> str:
    if operator:
        return OPERATOR_PROFILE
    return config.sandbox_agents.get(agent_name or "", config.sandbox_default)


def agent_roots(config: Config, agent_name: str | None) -> tuple[str, ...]:
    """Where the operator lets this agent's sandboxed sessions write (docs/sandbox.md)."""
    return config.sandbox_agent_roots.get(agent_name or "", config.sandbox_roots)


def workspace_owner(agent: Agent) -> str:
    """Whose workspaces and scratch directory: an agent's name (every registration under it shares them), else
    its id."""
    return agent.name or agent.agent_id


def choose(config: Config, agent_name: str | None, requested: str | None, *, operator: bool = False) -> str:
    """The profile name a new session of this agent runs under; a request it may not have is refused."""
    own = agent_profile(config, agent_name, operator=operator)
    if requested is None or requested == own:
        return own
    profiles = config.profiles()
    if requested not in profiles:
        raise SandboxRefused(
            f"unknown sandbox profile {requested!r}", profile=requested, agent_profile=own, known=sorted(profiles)
        )
    worse = looser(profiles[requested], profiles[own])
    if worse:
        raise SandboxRefused(
            f"sandbox profile {requested!r} is looser than this agent's {own!r} in {', '.join(worse)}",
            profile=requested,
            agent_profile=own,
            looser=worse,
        )
    return requested
