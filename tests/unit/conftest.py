"""In-process tests: the daemon's parts built in the test's own event loop, without a daemon process or socket.

Each runs in milliseconds; where a part needs a program on a PTY, a real cheap one (``cat``, ``sh``) runs.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import uvloop

from ptyd import protocol as p
from ptyd.backends.os.containment import SubreaperContainment
from ptyd.backends.os.containment.reaper import ChildReaper
from ptyd.backends.session.local import build_registry
from ptyd.config import Config
from ptyd.service.agents import Agent
from ptyd.service.service import PtyService

T = TypeVar("T")
TOKEN = "ptyd_unused"


def run(main: Callable[[], Awaitable[T]], timeout: float = 20.0) -> T:
    """Run ``main()`` on a fresh uvloop loop, as the daemon does, within ``timeout``."""

    async def bounded() -> T:
        return await asyncio.wait_for(main(), timeout)

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(bounded())


@contextlib.asynccontextmanager
async def local_service(**overrides: Any) -> AsyncIterator[PtyService]:
    """A PtyService over the real local backends (subreaper containment: no cgroup is made for the test)."""
    overrides.setdefault("shell_integration", False)
    # The emulator in this process: a worker process costs 0.3-2 s to start per service, which was most of this
    # tier's time; workers have tests of their own (test_engine_workers.py, test_worker_inbox.py).
    overrides.setdefault("engine_process", "daemon")
    # As the suite's daemons (tests/conftest.py): "none" unless a test names a default, so that "auto" does not make
    # the tests depend on the machine (an in-process service has no sandbox to make: "auto" would be "none", said).
    overrides.setdefault("sandbox_default", "none")
    config = Config(containment="subreaper", **overrides)
    reaper = ChildReaper(asyncio.get_running_loop())
    service = PtyService(config, build_registry(config, reaper, SubreaperContainment()), "subreaper")
    try:
        yield service
    finally:
        await service.shutdown()
        reaper.close()


async def open_exec(service: PtyService, agent: Agent, *argv: str, **params: Any) -> str:
    params.setdefault("idle_ms", 100)  # a program that never reads is open after this quiet, not the default
    session = await service.open(
        agent, p.TerminalOpenParams(token=TOKEN, type="exec", argv=list(argv), timeout_ms=5_000, **params)
    )
    return session.info(agent.agent_id, agent.name).session_id


def sent(program: str, text: str, **params: Any) -> p.SendResult:
    """The result of one send of ``text`` to a fresh session of ``program``, in a service of its own."""

    async def main() -> p.SendResult:
        async with local_service() as service:
            agent, _ = service.register("t")
            sid = await open_exec(service, agent, program)
            return await service.send(agent, send_params(sid, text, **params)).result()

    return run(main)


def send_params(session_id: str, text: str, **params: Any) -> p.TerminalSendParams:
    params.setdefault("timeout_ms", 5_000)
    return p.TerminalSendParams(token=TOKEN, session_id=session_id, input=text, **params)


async def until(predicate: Callable[[], bool], within: float = 5.0, message: str = "condition") -> None:
    """Poll a condition about a real process or PTY, yielding to the loop between checks."""
    deadline = asyncio.get_running_loop().time() + within
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {message}")
        await asyncio.sleep(0.005)
