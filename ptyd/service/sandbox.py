"""Which sandbox profile a session gets: the agent's own (config), or a stricter one the agent asked for.

"At least as strict" is a partial order, property by property (docs/sandbox.md): profile A is at least as strict
as B when A's filesystem mode is no looser (readonly < workspace < full), every path A makes writable is inside a
path B makes writable, every path B hides is hidden by A too, A has no network where B has none, and every
resource limit of A is no higher than B's (no limit is the highest). Two profiles can be incomparable (one lower
on memory, the other offline): then neither may stand in for the other. The built-in profiles' default limits
are no bound here (see ``looser``).
"""

from __future__ import annotations

import os
from collections.abc import Callable

from ptyd.config import AUTO_PROFILE, AUTO_SANDBOXED, Config, SandboxProfile
from ptyd.errors import SandboxRefused
from ptyd.service.agents import Agent

_FS_RANK = {"readonly": 0, "workspace": 1, "full": 2}
OPERATOR_PROFILE = "none"  # no sandbox: "auto"'s where none can be made (the operator's: sandbox_operator)


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
    # The built-in profiles' default limits (limits_required false) bound no other profile: an operator's own
    # profile without limits is no looser than "workspace" for them, so existing mappings need no key.
    for limit in ("memory_mib", "pids_max", "cpu_percent") if b.limits_required else ():
        mine, theirs = getattr(a, limit), getattr(b, limit)
        if theirs is not None and (mine is None or mine > theirs):
            out.append(limit)
    return out


def configured_profile(config: Config, agent: Agent) -> str:
    """The agent's own profile as configured, "auto" unresolved: its name's (sandbox_agents) where that is no
    looser than sandbox_default or the agent proved its name (agent_keys), else the default; the operator's is
    sandbox_operator (``none`` unless configured). "auto" weighs as the profile it stands for, so a key is needed
    for the same names with or without a bubblewrap."""
    if agent.operator:
        return config.sandbox_operator
    default = config.sandbox_default
    mapped = config.sandbox_agents.get(agent.name or "")
    if mapped is None or agent.identity != agent.name:  # no mapping, or a keyed name it did not prove
        return default
    profiles = config.profiles()
    nominal = profiles[_nominal(mapped)], profiles[_nominal(default)]
    return mapped if agent.proven or not looser(*nominal) else default


def _nominal(name: str) -> str:
    return AUTO_SANDBOXED if name == AUTO_PROFILE else name


def agent_profile(config: Config, agent: Agent, unavailable: str | None = None) -> str:
    """The agent's own profile: "auto" is "workspace", or "none" where no sandbox can be made (``unavailable``
    says why; None: one can)."""
    name = configured_profile(config, agent)
    if name != AUTO_PROFILE:
        return name
    return AUTO_SANDBOXED if unavailable is None else OPERATOR_PROFILE


def agent_roots(config: Config, agent: Agent) -> tuple[str, ...]:
    """Where the operator lets this agent's sandboxed sessions write: its name's roots (sandbox_agent_roots) where
    they lie within sandbox_roots or the agent proved its name, else sandbox_roots."""
    default = config.sandbox_roots
    mine = config.sandbox_agent_roots.get(agent.name or "")
    if mine is None or agent.identity != agent.name:
        return default
    granted = tuple(os.path.expanduser(root) for root in default)
    return mine if agent.proven or all(_within(os.path.expanduser(r), granted) for r in mine) else default


def workspace_owner(agent: Agent) -> str:
    """Whose workspaces, scratch directory, session cap and aggregate limits: its identity (a name every
    registration under it shares, unless the name has a key this one did not give), else its id."""
    return agent.identity or agent.agent_id


def choose(config: Config, agent: Agent, requested: str | None, unavailable: str | None = None) -> str:
    """The profile name a new session of this agent runs under; a request it may not have is refused."""
    own = agent_profile(config, agent, unavailable)
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


def default_profile(config: Config, unavailable: Callable[[], str | None]) -> tuple[str, str | None]:
    """The profile of an agent the config names none for, and the warning when "auto" found no sandbox to make
    (``unavailable`` probes, so it is asked only for "auto")."""
    if config.sandbox_default != AUTO_PROFILE:
        return config.sandbox_default, None
    why = unavailable()
    if why is None:
        return AUTO_SANDBOXED, None
    return OPERATOR_PROFILE, (
        f"agents' sessions are NOT sandboxed: {why} (sandbox_default is auto); install bubblewrap "
        "(Debian, Ubuntu: apt install bubblewrap) and send the daemon SIGHUP, or set sandbox_default"
    )
