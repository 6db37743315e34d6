"""PtyService: owns agents, session ids, ownership checks, limits and cleanup; knows nothing of PTY internals.

A session is published only after its backend reported it ready. Every lookup checks the exact owning agent,
and an id that is unknown, closed, or another agent's gives the same ``session_not_found`` answer.
"""

from __future__ import annotations

import asyncio
import builtins
import logging
import os
import re
import secrets
import signal as signals
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import final

from ptyd import __version__
from ptyd import protocol as p
from ptyd.backends.base import PtyBackend, PtyBackendSession, SendOperation, SendRequest, SpawnSpec
from ptyd.backends.os.sandbox.workspace import default_scratch_base
from ptyd.backends.recording.recorder import NO_RECORDING, NoRecording, Recording
from ptyd.backends.recording.store import RecordingStore
from ptyd.config import AGENT_PROFILE_ENV, AUTO_PROFILE, Config
from ptyd.errors import BackendNotFound, InvalidArgument, LimitExceeded, SessionNotFound
from ptyd.service import scratch
from ptyd.service.agents import Agent, AgentRegistry, AgentState
from ptyd.service.events import EventHub, Sink
from ptyd.service.sandbox import (
    OPERATOR_PROFILE,
    agent_profile,
    agent_roots,
    configured_profile,
    default_profile,
    workspace_owner,
)
from ptyd.service.sandbox import choose as choose_profile

log = logging.getLogger("ptyd.service")
# Where sessions run when no project is theirs (an unsandboxed session opened without a cwd): no agent's own.
_COMMON = frozenset({"", "/", str(Path.home())})


def _seconds(ms: int | None, default_ms: int) -> float:
    return (ms if ms is not None else default_ms) / 1000


def _title(name: str | None, agent_name: str | None, argv: list[str]) -> str:
    """A recording's title: what the session is and whose."""
    who = f" ({agent_name})" if agent_name else ""
    return f"{name or ' '.join(argv)[:200]}{who}"


def parse_signal(value: str | int) -> int:
    """A signal number from a name (``SIGINT``, ``int``) or a number."""
    if isinstance(value, int):
        return value
    name = value.upper()
    if not name.startswith("SIG"):
        name = "SIG" + name
    try:
        return int(signals.Signals[name])
    except KeyError:
        raise InvalidArgument(f"unknown signal {value!r}", field="signal") from None


def compile_until(pattern: str | None) -> re.Pattern[str] | None:
    """A send's ``until`` pattern, compiled (its length is bounded by the wire type)."""
    if pattern is None:
        return None
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise InvalidArgument(f"until is not a regular expression: {exc}", field="until") from None
    except (RecursionError, OverflowError, ValueError):  # nesting or repeat counts past what re compiles
        raise InvalidArgument("until is too complex to compile", field="until") from None


def env_profile(agent: Agent, params: p.TerminalOpenParams) -> p.EnvProfile:
    """The environment preset of a new session: the caller's, else 'agent' for agents, 'human' for the operator
    (a person at ptyctl, whose pager and editor work)."""
    if params.env_profile is not None:
        return params.env_profile
    if params.profile == "agent":
        return "agent"
    return "human" if agent.operator else "agent"


@dataclass(slots=True, eq=False)
class Entry:
    session: PtyBackendSession
    owner: Agent


@final
class PtyService:
    def __init__(
        self,
        config: Config,
        backends: dict[str, PtyBackend],
        containment_name: str,
        on_change: Callable[[], None] = lambda: None,
        sandbox_name: Callable[[], str] | None = None,
        limits_name: str | None = None,
    ) -> None:
        self.sandbox_name = sandbox_name  # how sandboxes are made here, or why they cannot be
        # Why no sandbox can be made here (probed again where none was found), or None: one can. The daemon sets
        # it from its sandbox; a service built without one (in-process tests) has none to make.
        self.sandbox_unavailable: Callable[[], str | None] = lambda: "no sandbox was set up"
        # Why sandboxes with network share the machine's (sandbox_network "auto" without pasta), or None.
        self.network_warning: Callable[[], str | None] = lambda: None
        self.sandbox_network: Callable[[], p.SandboxNetworkInfo | None] = lambda: None
        self.limits_name = limits_name
        self.config = config
        self.backends = backends
        self.on_change = on_change  # the set of sessions changed: the daemon rewrites its state file
        self.containment_name = containment_name
        self.handovers = 0  # how many times the sessions were handed to a new daemon (this one included)
        self.handover_error: str | None = None
        # Whether the sessions would outlive a crash of the daemon (its fd store or keeper): the daemon says.
        self.crash_continuity: Callable[[], str | None] = lambda: None
        self.engine_workers: Callable[[], p.EngineWorkersInfo | None] = lambda: None  # the daemon's pool says
        self.closed_since_trim = 0  # sessions closed since the daemon last gave their memory back
        self.last_close = 0.0  # loop time of the last close
        self.agents = AgentRegistry(config.max_agents)
        self._sessions: dict[str, Entry] = {}
        self._opening = 0
        self._started = time.monotonic()
        self._tasks: set[asyncio.Task[int]] = set()
        self.events = EventHub()
        self.recordings = RecordingStore(config)
        self._used: dict[str, set[str]] = {}  # workspaces each agent (by workspace_owner) used since start

    def reconfigure(self, config: Config, backends: dict[str, PtyBackend]) -> None:
        """A reloaded configuration (SIGHUP): every bound the service applies follows it; live sessions keep the
        settings they were opened with."""
        self.config = config
        self.backends = backends
        self.agents.max_agents = config.max_agents

    # --- agents ----------------------------------------------------------------------------------------

    def authenticate(self, token: str | None) -> Agent:
        return self.agents.authenticate(token)

    def register(self, name: str | None, *, operator: bool = False, key: str | None = None) -> tuple[Agent, str]:
        agent, token = self.agents.register(name, operator=operator, keys=self.config.agent_keys, key=key)
        if key is not None and not agent.proven:  # said once, so an operator sees a harness with a stale key
            log.warning("%s registered as %r with a key that does not prove it: anonymous", agent.agent_id, name)
        return agent, token

    async def release(self, agent: Agent) -> int:
        """Revoke the agent's token at once, then close its sessions (awaited)."""
        if agent.operator:
            raise InvalidArgument("the operator token lives as long as the daemon", reason="operator")
        self.agents.revoke(agent)
        self.events.drop_agent(agent)
        ids = [sid for sid, e in self._sessions.items() if e.owner is agent]
        results = await asyncio.gather(*(self._close(sid, "agent released") for sid in ids))
        if workspace_owner(agent) == agent.agent_id:  # no name keeps it: nobody can come back to its scratch
            await self._remove_scratch(agent.agent_id, self._scratch(agent))
        return sum(1 for closed, _ in results if closed)

    def _scratch(self, agent: Agent) -> str:
        return scratch.of(self.config, agent)

    async def _remove_scratch(self, owner: str, path: str) -> None:
        await scratch.remove(owner, path, self._used)

    async def sweep_scratch(self) -> None:
        """At start: the scratch directories of unnamed agents that are gone (scratch.sweep)."""
        await scratch.sweep(self.config, {agent.agent_id for agent in self.agents}, self._used)

    def agent(self, caller: Agent, agent_id: str) -> Agent:
        """The agent ``agent_id`` names, as ``caller`` may see it: any agent for the operator, else only itself."""
        for agent in self.agents:
            if agent.agent_id == agent_id and (agent is caller or caller.operator) and not agent.operator:
                return agent
        raise InvalidArgument(f"no agent {agent_id}", reason="agent_not_found", agent_id=agent_id)

    def list_agents(self, caller: Agent) -> list[p.AgentInfo]:
        now = time.monotonic()
        return [
            p.AgentInfo(
                agent_id=a.agent_id,
                name=a.name,
                sessions=sum(1 for e in self._sessions.values() if e.owner is a),
                idle_ms=int(a.idle_for(now) * 1000),
            )
            for a in self.agents
            if not a.operator and (a is caller or caller.operator)
        ]

    async def release_idle(self) -> None:
        limit = self.config.agent_idle_timeout_ms / 1000
        now = time.monotonic()
        for agent in self.agents:
            if not agent.operator and agent.idle_for(now) > limit:
                log.info("releasing %s after %.0f s without a call", agent.agent_id, agent.idle_for(now))
                await self.release(agent)

    # --- sessions --------------------------------------------------------------------------------------

    def entry(self, agent: Agent, session_id: str) -> Entry:
        entry = self._sessions.get(session_id)
        if entry is None or not (entry.owner is agent or agent.operator):
            raise SessionNotFound(session_id)
        return entry

    def session(self, agent: Agent, session_id: str) -> PtyBackendSession:
        return self.entry(agent, session_id).session

    def describe(self, agent: Agent, session_id: str) -> p.SessionInfo:
        entry = self.entry(agent, session_id)
        return entry.session.info(entry.owner.agent_id, entry.owner.name)

    def list(self, agent: Agent) -> list[p.SessionInfo]:
        return [
            e.session.info(e.owner.agent_id, e.owner.name)
            for e in self._sessions.values()
            if e.owner is agent or agent.operator
        ]

    async def open(self, agent: Agent, params: p.TerminalOpenParams) -> PtyBackendSession:
        backend = self.backends.get(params.type)
        if backend is None:
            raise BackendNotFound(f"no backend for type {params.type!r}", type=params.type)
        cfg = self.config
        if len(self._sessions) + self._opening >= cfg.max_sessions:
            raise LimitExceeded("the daemon's session limit is reached", limit="max_sessions", value=cfg.max_sessions)
        owner = workspace_owner(agent)
        if self._sessions_of(agent, owner) >= cfg.max_sessions_per_agent:
            raise LimitExceeded(
                "this agent's session limit is reached",
                limit="max_sessions_per_agent",
                value=cfg.max_sessions_per_agent,
            )
        # "auto": where no sandbox can be made (looked for again now), this agent's sessions run unsandboxed, said.
        unavailable = self.sandbox_unavailable() if configured_profile(cfg, agent) == AUTO_PROFILE else None
        sandbox = choose_profile(cfg, agent, params.sandbox, unavailable)  # refused before a spawn
        scratch_base = cfg.sandbox_scratch_dir or default_scratch_base()
        profile = cfg.profiles()[sandbox]
        env = dict(AGENT_PROFILE_ENV) if env_profile(agent, params) == "agent" else {}
        env.update(params.env or {})
        session_id = "pty-" + secrets.token_hex(12)
        cols, rows = params.cols or cfg.default_cols, params.rows or cfg.default_rows
        recording: NoRecording = NO_RECORDING
        if self.recordings.wanted(agent.name, params.record):
            title = _title(params.name, agent.name, params.argv or [params.type])
            recording = self._start_recording(session_id, title, cols, rows, asked=params.record is True)
        spec = SpawnSpec(
            session_id=session_id,
            name=params.name,
            argv=params.argv,
            cwd=params.cwd,
            env=env,
            cols=cols,
            rows=rows,
            timeout_s=(params.timeout_ms if params.timeout_ms is not None else cfg.open_timeout_ms) / 1000,
            idle_s=(params.idle_ms or cfg.default_idle_ms) / 1000,
            sandbox=sandbox,
            profile=profile,
            agent=owner,
            agent_profile=cfg.profiles()[agent_profile(cfg, agent, unavailable)],
            others=self._workspaces(agent) if profile.contained else (),
            roots=agent_roots(cfg, agent),
            scratch=self._scratch(agent),
            scratch_base=scratch_base,
            used=self._full(owner),
            recording=recording,
        )
        self._opening += 1
        try:
            with agent.calling():  # a slow start is not the agent's idleness
                session = await backend.spawn(spec)
        except BaseException:
            recording.close()
            raise
        finally:
            self._opening -= 1
        if agent not in self.agents:
            # Released while the program was starting: nobody owns it.
            await session.close("owner released during open")
            raise SessionNotFound(spec.session_id)
        if unavailable is not None and sandbox == OPERATOR_PROFILE:
            session.sandbox_note = f"not sandboxed: sandbox_default is auto, and {unavailable}"
        self._sessions[spec.session_id] = Entry(session, agent)
        workspace = session.workspace
        if not agent.operator and workspace not in _COMMON:  # the operator is the user, not an agent
            self._used.setdefault(owner, set()).add(workspace)
        agent.session_ids.add(spec.session_id)
        self._listen(spec.session_id)
        self.on_change()
        log.info("opened %s (%s) pid %s for %s", spec.session_id, params.type, session.pid, agent.agent_id)
        return session

    def _full(self, owner: str) -> frozenset[str] | None:
        """The workspaces ``owner`` used, if it may use no more (``sandbox_workspaces_per_agent``)."""
        used = self._used.get(owner, set())
        return frozenset(used) if len(used) >= self.config.sandbox_workspaces_per_agent else None

    def _sessions_of(self, agent: Agent, owner: str) -> int:
        """The sessions counted against ``max_sessions_per_agent``: every registration of the agent's identity
        together (a name's own, not reset by registering again), the operator's per registration."""
        if agent.operator:
            return len(agent.session_ids)
        return sum(1 for e in self._sessions.values() if not e.owner.operator and workspace_owner(e.owner) == owner)

    def _workspaces(self, agent: Agent) -> tuple[str, ...]:
        """Other agents' workspaces, which a sandboxed session of ``agent`` must not see nor work in: every one
        used since the daemon started (what they wrote is still there after they closed), and those of the live
        sessions handed over by a previous daemon."""
        owner = workspace_owner(agent)
        dirs = {d for key, used in self._used.items() if key != owner for d in used}
        live = (e for e in self._sessions.values() if not e.owner.operator and workspace_owner(e.owner) != owner)
        dirs.update(e.session.workspace for e in live)
        return tuple(sorted(dirs - _COMMON))

    async def close(self, agent: Agent, session_id: str, reason: str | None) -> tuple[bool, int]:
        if session_id in agent.closed_ids and session_id not in self._sessions:
            return False, 0
        self.entry(agent, session_id)
        return await self._close(session_id, reason or "closed by caller")

    async def _close(self, session_id: str, reason: str) -> tuple[bool, int]:
        entry = self._sessions.get(session_id)
        if entry is None:
            return False, 0
        # Run the close as a service-owned task: a caller that disconnects must not interrupt it.
        task = asyncio.get_running_loop().create_task(entry.session.close(reason))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        killed = await asyncio.shield(task)
        if self._sessions.get(session_id) is entry:
            entry.session.set_listener(None, output=False)
            event = p.TerminalEvent(subscription_id="", session_id=session_id, seq=0, kind="session_closed")
            self.events.publish(session_id, entry.owner, event)
            del self._sessions[session_id]
            self.closed_since_trim += 1
            self.last_close = asyncio.get_running_loop().time()
            owner = entry.owner
            owner.session_ids.discard(session_id)
            owner.closed_ids[session_id] = None
            while len(owner.closed_ids) > self.config.closed_ids_remembered:
                owner.closed_ids.popitem(last=False)
            self.on_change()
            log.info("closed %s (%r); %d processes signalled", session_id, reason, killed)  # %r: no forged lines
        return True, killed

    # --- operations: request building and every default live here, not in the rpc layer ----------------------

    def send(self, agent: Agent, params: p.TerminalSendParams) -> SendOperation:
        cfg = self.config
        entry = self.entry(agent, params.session_id)
        session = entry.session
        until = compile_until(params.until)
        timeout_s = _seconds(params.timeout_ms, cfg.default_timeout_ms)
        named = until is not None or params.until_stable_ms is not None
        # A named wait is for programs that print and never read (servers, watchers): silence does not end it,
        # unless the caller asks for that too.
        idle_s = timeout_s + 1 if named and params.idle_ms is None else _seconds(params.idle_ms, cfg.default_idle_ms)
        # An empty send with a shell command still running waits for that command, not for a pause in its output.
        wait_only = not params.input and not params.keys and params.idle_ms is None
        return session.start_send(
            SendRequest(
                # Keys after text wait for the text to be taken: sent at once, a C-c would flush the line unread.
                input=params.input or (session.key_input(params.keys) if params.keys else ""),
                keys=session.key_input(params.keys) if params.keys and params.input else "",
                timeout_s=timeout_s,
                idle_s=idle_s,
                max_bytes=params.max_bytes or (cfg.default_max_bytes if agent.operator else cfg.agent_max_bytes),
                request_key=params.request_key,
                until=until,
                until_stable_s=None if params.until_stable_ms is None else params.until_stable_ms / 1000,
                compact=params.compact if params.compact is not None else cfg.agent_compact and not agent.operator,
                join_wrapped=params.join_wrapped,
                until_done=params.until_done,
                follow_command=wait_only,
                by_owner=entry.owner is agent,  # a person at ptyctl attach does not read the agent's output away
            )
        )

    def integrate(self, agent: Agent, params: p.TerminalIntegrateParams) -> SendOperation:
        session = self.session(agent, params.session_id)
        cfg = self.config
        return session.start_send(
            SendRequest(
                input=session.integration_input(),
                timeout_s=_seconds(params.timeout_ms, cfg.default_timeout_ms),
                idle_s=cfg.default_idle_ms / 1000,
                max_bytes=params.max_bytes or cfg.default_max_bytes,
                request_key=None,
                installs_integration=True,
            )
        )

    async def wait(self, agent: Agent, params: p.TerminalWaitParams) -> p.TerminalWaitResult:
        """The active send's result, or a wait for what the session does next (see TerminalWaitParams)."""
        cfg = self.config
        timeout = None if params.timeout_ms is None else params.timeout_ms / 1000
        entry = self.entry(agent, params.session_id)
        session = entry.session
        follow = SendRequest(
            input="",
            timeout_s=_seconds(params.timeout_ms, cfg.default_timeout_ms),
            idle_s=cfg.default_idle_ms / 1000,
            max_bytes=cfg.default_max_bytes if agent.operator else cfg.agent_max_bytes,
            request_key=None,
            follow_command=True,
            by_owner=entry.owner is agent,
        )
        with agent.calling():
            return await session.wait(timeout, follow, params.operation_id)

    async def output(self, agent: Agent, params: p.TerminalOutputParams) -> p.TerminalOutputResult:
        return await self.session(agent, params.session_id).output()

    def cancel(self, agent: Agent, params: p.TerminalCancelParams) -> p.TerminalCancelResult:
        return self.session(agent, params.session_id).cancel()

    async def screen(self, agent: Agent, params: p.TerminalScreenParams) -> p.TerminalScreenResult:
        return await self.session(agent, params.session_id).screen()

    async def read(self, agent: Agent, params: p.TerminalReadParams) -> p.TerminalReadResult:
        cfg = self.config
        max_lines = min(params.max_lines or cfg.default_read_lines, cfg.max_read_lines)
        max_bytes = min(params.max_bytes or cfg.default_read_bytes, cfg.max_read_bytes)
        session = self.session(agent, params.session_id)
        return await session.read(params.start_line, max_lines, max_bytes, join_wrapped=params.join_wrapped)

    async def screenshot(self, agent: Agent, params: p.TerminalScreenshotParams) -> p.TerminalScreenshotResult:
        cfg = self.config
        session = self.session(agent, params.session_id)
        fonts = (cfg.screenshot_fonts, cfg.screenshot_fallback_fonts)
        return await session.screenshot(fonts, params.font_size or cfg.screenshot_font_size)

    def signal(self, agent: Agent, params: p.TerminalSignalParams) -> p.TerminalSignalResult:
        return self.session(agent, params.session_id).signal(parse_signal(params.signal))

    def resize(self, agent: Agent, params: p.TerminalResizeParams) -> p.SessionInfo:
        self.session(agent, params.session_id).resize(params.cols, params.rows)
        return self.describe(agent, params.session_id)

    # --- recordings ----------------------------------------------------------------------------------------

    async def record(self, agent: Agent, params: p.TerminalRecordParams) -> p.TerminalRecordResult:
        """Start or stop; a stop returns once the file is complete on disk."""
        entry = self.entry(agent, params.session_id)
        session = entry.session
        if params.record and not session.recording.active:
            info = session.info(entry.owner.agent_id, entry.owner.name)
            title = _title(info.name, entry.owner.name, [info.foreground.name if info.foreground else info.type])
            session.set_recording(self._start_recording(params.session_id, title, info.cols, info.rows, asked=True))
        elif not params.record and session.recording.active:
            if not agent.operator and self.recordings.required(entry.owner.name):
                raise InvalidArgument(
                    "the daemon's config records this agent's sessions (record_agents); only the operator can stop it",
                    field="record",
                    reason="recording_required",
                )
            stopped = session.recording
            session.set_recording(NO_RECORDING)
            await stopped.finished()
        path = session.recording.path
        return p.TerminalRecordResult(
            session_id=params.session_id, recording=session.recording.active, path=str(path) if path else None
        )

    def _start_recording(self, session_id: str, title: str, cols: int, rows: int, *, asked: bool) -> NoRecording:
        """A recording, or (when only the config wanted one) none if its directory cannot be made: the session
        opens anyway, and says it is not recorded."""
        try:
            return self.recordings.start(session_id, title, cols, rows)
        except OSError as exc:
            where = self.recordings.directory
            if asked:
                raise InvalidArgument(
                    f"cannot record into {where}: {exc.strerror}", field="record", reason="recording_dir"
                ) from None
            log.warning("not recording %s: %s: %s", session_id, where, exc.strerror)
            return NO_RECORDING

    def list_recordings(self, agent: Agent) -> p.TerminalRecordingsResult:
        """Parts on disk of the sessions this agent owns or closed (every session's for the operator), and the
        parts being written (whose file the writer thread may not have made yet)."""
        live = {
            str(part): rec
            for e in self._sessions.values()
            if (rec := e.session.recording).active and (part := rec.path) is not None
        }
        found = {
            str(f.path): p.RecordingInfo(
                session_id=f.session_id,
                part=f.part,
                path=str(f.path),
                bytes=f.size,
                started_at_ms=f.started_at_ms,
                cols=f.cols,
                rows=f.rows,
                title=f.title,
                active=str(f.path) in live,
            )
            for f in self.recordings.files()
        }
        for written, rec in live.items():
            if written not in found and isinstance(rec, Recording):
                found[written] = rec.describe()
        mine = [
            r
            for r in found.values()
            if agent.operator or r.session_id in agent.session_ids or r.session_id in agent.closed_ids
        ]
        mine.sort(key=lambda r: (r.started_at_ms, r.session_id, r.part))
        return p.TerminalRecordingsResult(directory=str(self.recordings.directory), recordings=mine)

    # --- events --------------------------------------------------------------------------------------------

    def subscribe(
        self,
        agent: Agent,
        session_id: str | None,
        output: bool,
        sink: Sink,
        connection: int = 0,
        *,
        screen: bool = False,
    ) -> str:
        if session_id is not None:
            self.entry(agent, session_id)
        limit = self.config.max_subscriptions_per_connection
        sub = self.events.add(agent, session_id, output, sink, connection=connection, limit=limit, screen=screen)
        self._listen_all()
        return sub.subscription_id

    def drop_connection(self, connection: int) -> None:
        """The client connection closed: its subscriptions end."""
        if self.events.drop_connection(connection):
            self._listen_all()

    def unsubscribe(self, agent: Agent, subscription_id: str) -> bool:
        removed = self.events.remove(agent, subscription_id) is not None
        if removed:
            self._listen_all()
        return removed

    def _listen(self, session_id: str) -> None:
        """Point the session's events at the hub while anyone listens, and at nothing otherwise."""
        entry = self._sessions[session_id]
        heard, output = self.events.listeners(session_id, entry.owner)
        if not heard:
            entry.session.set_listener(None, output=False)
            return

        def publish(event: p.TerminalEvent, owner: Agent = entry.owner) -> None:
            self.events.publish(session_id, owner, event)

        if self.events.screen_listeners(session_id, entry.owner):
            entry.session.set_listener(publish, output, screen=True)
        else:
            entry.session.set_listener(publish, output)

    def _listen_all(self) -> None:
        for session_id in self._sessions:
            self._listen(session_id)

    # --- handover ------------------------------------------------------------------------------------------

    def entries(self) -> Iterator[tuple[str, Entry]]:
        return iter(list(self._sessions.items()))

    def current(self, session_id: str) -> Entry | None:
        """The session's entry while it is open (a save taken in slices asks again after each)."""
        return self._sessions.get(session_id)

    def agent_states(self) -> builtins.list[AgentState]:
        now = time.monotonic()
        return [
            AgentState(
                agent_id=a.agent_id,
                name=a.name,
                digest=a.digest,
                operator=a.operator,
                closed_ids=list(a.closed_ids),
                idle_s=a.idle_for(now),
                proven=a.proven,
                identity=a.identity,
            )
            for a in self.agents
        ]

    def adopt(self, agents: Iterable[AgentState], sessions: Iterable[tuple[str, str, PtyBackendSession]]) -> None:
        """Take over the agents and the (session id, owner id, session) a previous daemon handed over."""
        now = time.monotonic()
        by_id: dict[str, Agent] = {}
        for state in agents:
            agent = Agent(
                agent_id=state.agent_id,
                name=state.name,
                digest=state.digest,
                operator=state.operator,
                closed_ids=OrderedDict.fromkeys(state.closed_ids),
                last_seen=now - state.idle_s,
                proven=state.proven,
                identity=state.identity if state.identity is not None else state.name or state.agent_id,
            )
            self.agents.adopt(agent)
            by_id[agent.agent_id] = agent
        for session_id, owner_id, session in sessions:
            owner = by_id.get(owner_id)
            if owner is None:
                log.warning("session %s has no owner after the handover; closing it", session_id)
                task = asyncio.get_running_loop().create_task(session.close("no owner after a handover"))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
                continue
            self._sessions[session_id] = Entry(session, owner)
            owner.session_ids.add(session_id)
        self.on_change()

    async def shutdown(self) -> None:
        ids = list(self._sessions)
        if ids:
            log.info("closing %d sessions", len(ids))
        await asyncio.gather(*(self._close(sid, "daemon shutdown") for sid in ids))
        await asyncio.to_thread(self.recordings.close)  # what is queued reaches the files

    def default_sandbox(self) -> tuple[str, str | None]:
        """The profile of an agent the config names none for, and the warning if "auto" found no sandbox."""
        return default_profile(self.config, self.sandbox_unavailable)

    def info(self) -> p.DaemonInfoResult:
        default, warning = self.default_sandbox()
        warning = "; ".join(w for w in (warning, self.network_warning()) if w) or None
        return p.DaemonInfoResult(
            version=__version__,
            protocol_version=p.PROTOCOL_VERSION,
            pid=os.getpid(),
            uptime_ms=int((time.monotonic() - self._started) * 1000),
            sessions=len(self._sessions),
            agents=sum(not agent.operator for agent in self.agents),  # ptyctl's operator is not an agent
            backend_types=sorted(self.backends),
            containment=self.containment_name,
            handovers=self.handovers,
            handover_error=self.handover_error,
            sandbox=self.sandbox_name() if self.sandbox_name is not None else None,
            limits=self.limits_name,
            crash_continuity=self.crash_continuity(),
            sandbox_default=default,
            sandbox_warning=warning,
            engine_workers=self.engine_workers(),
            sandbox_network=self.sandbox_network(),
        )

    @property
    def session_count(self) -> int:
        return len(self._sessions)
