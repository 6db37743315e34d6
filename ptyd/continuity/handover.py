"""A planned handover: the daemon execs the currently installed ptyd in its own place and hands it every session.

Exec keeps the pid, so the sessions' programs stay the daemon's children (their exit statuses are still its to
collect) and systemd's MainPID does not change; the listening socket stays open across the exec, so a client
that connects meanwhile waits in its backlog instead of being refused. What is inherited: the listening socket,
the lock, each session's PTY master and slave, and a memfd holding the state document (``continuity.document``).

Before anything is stopped, the new ptyd is run once as a pre-flight (``ptyd --check-handover``, given a
document of the same format): if it cannot import, or cannot read the document, the old daemon keeps serving
and says why.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import sys
import time
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from ptyd.backends.os import spawn
from ptyd.backends.os.containment.reaper import ChildReaper
from ptyd.backends.session_state import SessionState
from ptyd.continuity.document import DaemonState, decode, encode

__all__ = [
    "DaemonState",
    "HandoverRefused",
    "Inherited",
    "SaveCache",
    "Saved",
    "encode",
    "exec_next",
    "next_argv",
    "pause_floods",
    "preflight",
    "release",
    "saved",
    "snapshot",
]
from ptyd.service.service import PtyService

log = logging.getLogger("ptyd.handover")

HANDOVER_ENV = "PTYD_HANDOVER_FD"
PREFLIGHT_TIMEOUT_S = 30.0  # a cold interpreter importing the daemon on a loaded machine takes ~1 s


class HandoverRefused(Exception):
    """The new ptyd cannot take over; the message says why. The running daemon carries on."""


def next_argv() -> list[str]:
    """The command that starts the currently installed ptyd with this daemon's arguments: the console script
    when it was started by one (its shebang names the installed interpreter), else ``python -m ptyd``."""
    script = sys.argv[0]
    if os.path.basename(script) != "__main__.py" and not script.endswith(".py") and os.access(script, os.X_OK):
        return [script, *sys.argv[1:]]
    return [sys.executable, "-m", "ptyd", *sys.argv[1:]]


@dataclass(slots=True)
class Inherited:
    """The daemon's own fds that cross the exec."""

    listen_fd: int
    lock_fd: int
    socket_activated: bool


def pause_floods(service: PtyService) -> None:
    """The pre-flight is about to run: floods wait in their PTYs meanwhile, so a new interpreter importing the
    daemon is not starved by them and their engines (issue 28: 2.4-2.8 s of pre-flight beside four floods)."""
    for _, entry in service.entries():
        entry.session.pause_floods()


def release(service: PtyService) -> None:
    """The handover was refused or failed: every session reads and writes again."""
    for _, entry in service.entries():
        entry.session.release()


SYNC_TIMEOUT_S = 5.0  # an engine worker this slow to render what was read: its session goes with the mirror


async def quiesce(service: PtyService) -> None:
    """Hold every session and wait until its engine has rendered everything read and sent a snapshot of it
    (engine workers), so the "handover" snapshot that follows is exact."""
    waits = [entry.session.quiesce() for _, entry in service.entries()]
    if waits:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.gather(*waits), SYNC_TIMEOUT_S)


def snapshot(
    service: PtyService, inherited: Inherited | None, depth: Literal["handover", "saved", "listing"]
) -> DaemonState:
    """The daemon's state, to the ``depth`` of ``LocalSession.to_state``; "handover" holds every
    session's channel (nothing may be awaited between it and the exec)."""
    sessions: dict[str, SessionState] = {}
    for session_id, entry in service.entries():
        sessions[session_id] = entry.session.to_state(entry.owner.agent_id, depth)
    return DaemonState(**_header(service, inherited), sessions=sessions)


class Saved(NamedTuple):
    """A session's state as last taken, kept once the session was quiet between two saves, and its mark then."""

    mark: tuple[object, ...]
    owner: str
    state: SessionState | None


SaveCache = dict[str, Saved]


async def saved(service: PtyService, cache: SaveCache, slice_s: float = math.inf) -> tuple[DaemonState, SaveCache]:
    """The state file's "saved" depth, taking again only the sessions whose ``save_mark`` (or owner) moved
    since ``cache`` (the last call's): with hundreds of sessions and a few printing, a save costs the loop what
    those few cost, not all of them. A state is kept only for a session that did not move since the last save
    (it is taken once more then): a printing session's kept tail would hold lines its scrollback has already
    let go, while a quiet one's are the scrollback's own strings. Returns the state and the next cache.

    The loop runs whenever taking the states has held it ``slice_s``: beside 50 floods a save held it 9-48 ms
    (each printing session's tail of ``SAVED_LINES``), every send behind it. Each session's state is taken at
    once; a session closed meanwhile is left out."""
    taking = _take_saved(service, cache)
    began = time.perf_counter()
    while True:
        try:
            next(taking)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        if time.perf_counter() - began >= slice_s:
            await asyncio.sleep(0)
            began = time.perf_counter()


def _take_saved(service: PtyService, cache: SaveCache) -> Generator[None, None, tuple[DaemonState, SaveCache]]:
    """``saved``'s work, a session at a time (it yields after each)."""
    fresh: SaveCache = {}
    sessions: dict[str, SessionState] = {}
    for session_id, entry in service.entries():
        if service.current(session_id) is not entry:  # closed while the loop ran between two sessions
            continue
        mark, owner = entry.session.save_mark(), entry.owner.agent_id
        kept = cache.get(session_id)
        quiet = kept is not None and kept.mark == mark and kept.owner == owner
        state = kept.state if quiet and kept is not None else None
        if state is None:
            state = entry.session.to_state(owner, "saved")
            yield
        fresh[session_id] = Saved(mark, owner, state if quiet else None)
        sessions[session_id] = state
    gone = [session_id for session_id in sessions if service.current(session_id) is None]
    for session_id in gone:  # closed after its state was taken
        del sessions[session_id], fresh[session_id]
    return DaemonState(**_header(service, None), sessions=sessions), fresh


def _header(service: PtyService, inherited: Inherited | None) -> dict[str, Any]:
    return {
        "daemon_pid": os.getpid(),
        "handovers": service.handovers,
        "listen_fd": inherited.listen_fd if inherited is not None else -1,
        "lock_fd": inherited.lock_fd if inherited is not None else -1,
        "socket_activated": inherited.socket_activated if inherited is not None else False,
        "child_nofile": spawn.child_nofile(),
        "agents": service.agent_states(),
    }


def _memfd(data: bytes, name: str) -> int:
    fd = os.memfd_create(name, 0)  # no MFD_CLOEXEC: the next program reads it
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd


async def preflight(argv: list[str], document: bytes, reaper: ChildReaper) -> None:
    """Run the new ptyd with ``--check-handover`` on ``document``; raise HandoverRefused with its reason."""
    stdin = _memfd(document, "ptyd-preflight")
    read_end, write_end = os.pipe()
    loop = asyncio.get_running_loop()
    exited: asyncio.Future[tuple[int | None, str | None]] = loop.create_future()
    try:
        try:
            pid = os.posix_spawn(  # noqa: ASYNC221 - returns at once; the exit is awaited through the reaper
                argv[0],
                [*argv, "--check-handover"],
                {k: v for k, v in os.environ.items() if k != HANDOVER_ENV},
                file_actions=[
                    (os.POSIX_SPAWN_DUP2, stdin, 0),
                    (os.POSIX_SPAWN_DUP2, write_end, 1),
                    (os.POSIX_SPAWN_DUP2, write_end, 2),
                ],
            )
        except OSError as exc:
            raise HandoverRefused(f"cannot start {argv[0]}: {exc.strerror}") from None
        os.close(write_end)
        write_end = -1

        def done(code: int | None, sig: str | None) -> None:
            if not exited.done():
                exited.set_result((code, sig))

        reaper.watch(pid, done)
        try:
            code, sig = await asyncio.wait_for(exited, PREFLIGHT_TIMEOUT_S)
        except asyncio.CancelledError:  # the daemon is shutting down: the check is moot
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 9)
            raise
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 9)
            raise HandoverRefused(f"the new ptyd did not answer within {PREFLIGHT_TIMEOUT_S:.0f} s") from None
        os.set_blocking(read_end, False)
        with contextlib.suppress(BlockingIOError):
            said = os.read(read_end, 4096).decode(errors="replace").strip()
        if code != 0:
            reason = said.splitlines()[-1] if said else f"exit {code if sig is None else sig}"
            raise HandoverRefused(f"the new ptyd refused: {reason}")
        log.info("pre-flight: %s", said)
    finally:
        for fd in (stdin, read_end, write_end):
            if fd >= 0:
                os.close(fd)


def exec_next(argv: list[str], state: DaemonState, fds: list[int]) -> None:
    """Replace this process with the new ptyd; returns only if the exec failed (the caller carries on)."""
    document = _memfd(encode(state), "ptyd-handover")
    for fd in fds:
        os.set_inheritable(fd, True)
    os.environ[HANDOVER_ENV] = str(document)
    try:
        os.execv(argv[0], argv)  # noqa: S606 - the installed ptyd, with this daemon's own arguments
    except OSError:
        os.environ.pop(HANDOVER_ENV, None)
        for fd in fds:
            with contextlib.suppress(OSError):
                os.set_inheritable(fd, False)
        os.close(document)
        raise


def kept_fds(state: DaemonState) -> list[int]:
    fds = [state.listen_fd, state.lock_fd]
    for session in state.sessions.values():
        fds += [session.master_fd, session.slave_fd]
    return [fd for fd in fds if fd >= 0]


def received() -> DaemonState | None:
    """The document the previous daemon handed over, if this process is its successor."""
    value = os.environ.pop(HANDOVER_ENV, None)
    if value is None:
        return None
    fd = int(value)
    with os.fdopen(fd, "rb") as f:
        state = decode(f.read())
    for fd in kept_fds(state):
        os.set_inheritable(fd, False)  # not into the sessions started from now on
    if state.child_nofile is not None:
        spawn.set_child_nofile(state.child_nofile)
    return state


def take_over(
    state: DaemonState,
    service: PtyService,
    *,
    child: bool,
    fds: dict[str, tuple[int, int]] | None = None,
) -> int:
    """Adopt every session in ``state`` into ``service``; returns how many. ``fds``: master and slave by session
    id, where they do not come from the document (systemd's store)."""
    adopted = []
    for session_id, session in state.sessions.items():
        master, slave = fds.get(session_id, (-1, -1)) if fds is not None else (session.master_fd, session.slave_fd)
        if master < 0 or slave < 0:
            log.warning("no PTY for session %s; it is not adopted", session_id)
            continue
        backend = service.backends.get(session.type)
        if backend is None:
            log.warning(
                "session %s is of type %r, which this ptyd does not have; it is not adopted", session_id, session.type
            )
            continue
        live = backend.adopt(session, master, slave, child=child)
        adopted.append((session_id, session.owner, live))
    service.adopt(state.agents, adopted)
    service.handovers = state.handovers + (1 if child else 0)
    return len(adopted)
