"""Agents' scratch directories as the service keeps them: whose, and the removal of an unnamed agent's (no name
can come back to it) at its release and, for those a restart revoked, at the next start (docs/sandbox.md)."""

from __future__ import annotations

import asyncio
import logging

from ptyd.backends.os.sandbox.workspace import anonymous_scratch, default_scratch_base, remove_scratch, scratch_dir
from ptyd.config import Config
from ptyd.service.agents import Agent
from ptyd.service.sandbox import workspace_owner

log = logging.getLogger("ptyd.service")


def of(config: Config, agent: Agent) -> str:
    """The agent's scratch directory (made at its first sandboxed open): its identity's, or its id's."""
    base = config.sandbox_scratch_dir or default_scratch_base()
    owner = workspace_owner(agent)
    return scratch_dir(base, owner, anonymous=owner == agent.agent_id)


async def remove(owner: str, path: str, used: dict[str, set[str]]) -> None:
    """Remove ``owner``'s scratch directory (off the event loop), and forget it among the workspaces it used."""
    where, removed = await asyncio.to_thread(remove_scratch, path)
    if removed:
        log.info("removed the scratch directory of %s", owner)
    elif removed is False:
        log.warning("could not remove all of %s's scratch directory %s", owner, path)
    used.get(owner, set()).discard(where)


async def sweep(config: Config, live: set[str], used: dict[str, set[str]]) -> None:
    """Remove the scratch directories of unnamed agents not in ``live`` (a restart revoked them; a handover's and
    a crash's live agents keep theirs)."""
    base = config.sandbox_scratch_dir or default_scratch_base()
    for agent_id, path in await asyncio.to_thread(anonymous_scratch, base):
        if agent_id not in live:
            await remove(agent_id, path, used)
