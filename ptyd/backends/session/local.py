"""The local backends: ``shell`` (the configured shell, or argv) and ``exec`` (a bare argv, no shell)."""

from __future__ import annotations

import contextlib
import os
import pwd
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import final

from ptyd.backends.base import PtyBackend, SendRequest, SpawnSpec
from ptyd.backends.os.containment import MARKER_VAR, CgroupScope, Containment, Scope
from ptyd.backends.os.containment.reaper import ChildReaper
from ptyd.backends.os.sandbox import NoSandbox, Sandbox, SandboxPlan
from ptyd.backends.os.sandbox.limits import AgentGroup, Limiter, LimitScope
from ptyd.backends.os.sandbox.netpool import Namespace, NetworkPool
from ptyd.backends.os.sandbox.network import connect, pasta_program, read_child_pid
from ptyd.backends.os.sandbox.workspace import WorkspaceRules
from ptyd.backends.os.sandbox.workspace import choose as choose_workspace
from ptyd.backends.os.spawn import Spawned, spawn
from ptyd.backends.session.live_record import LiveRecord
from ptyd.backends.session.session import LocalSession
from ptyd.backends.session_state import SessionState
from ptyd.backends.shell_integration import shell_launch
from ptyd.config import Config, SandboxProfile
from ptyd.errors import InvalidArgument, LimitExceeded, SandboxUnavailable, SpawnFailed

# Inherited from the daemon's own start-up and meaningless (or harmful) to a session's programs.
_NOT_INHERITED = ("NOTIFY_SOCKET", "FDSTORE", "LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES", "PTYD_TOKEN", "PTYD_SOCKET")


def session_environment(config: Config, session_id: str, extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _NOT_INHERITED}
    env["TERM"] = config.term
    if "SHELL" not in env:  # as login(1) sets it: without it script, vim's :shell and less's ! fall back to sh
        env["SHELL"] = _login_shell()
    env.pop("COLUMNS", None)
    env.pop("LINES", None)
    env.update(extra)
    env[MARKER_VAR] = session_id  # last, so a caller cannot hide a process from close
    return env


def _login_shell() -> str:
    with contextlib.suppress(KeyError):
        shell = pwd.getpwuid(os.getuid()).pw_shell
        if shell and os.access(shell, os.X_OK):
            return shell
    return "/bin/sh"


@final
class LocalBackend:
    def __init__(
        self,
        type: str,
        config: Config,
        reaper: ChildReaper,
        containment: Containment,
        default_argv: tuple[str, ...] | None,
        confinement: Confinement | None = None,
        records: Path | None = None,
    ) -> None:
        self.type = type
        self._records = records  # where each session's live record is kept (live_record), if anywhere
        self._config = config
        self._reaper = reaper
        self._containment = containment
        self._default_argv = default_argv
        self._confinement = confinement or Confinement(NoSandbox("no sandbox was set up"), Limiter(set(), {}), ())

    async def spawn(self, spec: SpawnSpec) -> LocalSession:
        try:
            return await self._spawn(spec)
        finally:  # once the program has started: spares made meanwhile would take its CPU
            if self._confinement.networks is not None:
                self._confinement.networks.fill(self._network_env(os.environ))

    async def _spawn(self, spec: SpawnSpec) -> LocalSession:
        argv = spec.argv or (list(self._default_argv) if self._default_argv else None)
        if not argv:
            raise InvalidArgument(f"type {self.type!r} needs argv", field="argv")
        cwd = spec.cwd or str(Path.home())
        shell_key = secrets.token_hex(16)
        extra = dict(spec.env)
        launch = shell_launch(argv, shell_key, extra) if self._config.shell_integration else None
        if launch is not None:
            argv = launch.argv
            extra.update(launch.env)  # after the caller's: the secret cannot be chosen by the caller
        env = session_environment(self._config, spec.session_id, extra)
        profile = spec.profile or SandboxProfile()
        confinement = self._confinement
        prefix: tuple[str, ...] = ()
        workspace = cwd
        own_network, netns, network_note = False, None, None
        companions: frozenset[int] = frozenset()
        if profile.contained:  # refused here, before anything exists, if it cannot be had
            rules = WorkspaceRules(spec.roots, spec.scratch, spec.others, confinement.private, confinement.protected)
            chosen = choose_workspace(spec.cwd, profile.filesystem == "workspace", rules)
            # Its workspace is what it may write: a cwd it only reads is no agent's own, to hide or refuse.
            cwd, workspace = chosen.cwd, chosen.writable or ""
            if spec.used is not None and workspace and workspace not in spec.used:
                limit = self._config.sandbox_workspaces_per_agent
                raise LimitExceeded(
                    f"this agent has used {limit} workspaces since the daemon started; {workspace} would be one more",
                    limit="sandbox_workspaces_per_agent",
                    value=limit,
                )
            if profile.network and self._config.sandbox_network != "host":  # last: nothing after it refuses
                own_network, netns, network_note = await self._network(env, spec.timeout_s)
            plan = SandboxPlan(
                profile,
                cwd,
                confinement.private,
                spec.others,
                chosen.writable,
                spec.scratch_base,
                self._config.sandbox_tmp_mib,
                own_network=own_network,
                enter_network=netns.prefix if netns is not None else (),
            )
            try:
                prefix = confinement.sandbox.wrap(plan)
            except BaseException:
                if netns is not None:
                    netns.discard()
                raise
        limiter = confinement.limiter
        cgroups = self._containment.leaf_parent is not None  # a v2 leaf for each session
        profile = limiter.enforceable(profile, v2_leaf=cgroups)
        group: AgentGroup | None = None
        try:  # before the session's cgroup: in v2 that is made in the group
            group = limiter.group(spec.agent, spec.agent_profile, v2_leaf=cgroups)
            scope = self._containment.scope(spec.session_id, group.v2_name if group is not None else None)
            if netns is not None:  # the session's now: its close ends the namespace's holder and pasta
                companions = frozenset(netns.move_to(scope))
                netns = None
        except OSError as exc:
            if netns is not None:
                netns.discard()
            if group is not None:
                group.remove()
            raise SpawnFailed(f"cannot set the session's limits or cgroup: {exc.strerror}", reason="cgroup") from None
        limits: LimitScope | None = None
        try:
            leaf = Path(scope.cgroup) if scope.cgroup is not None else None
            limits = limiter.scope(spec.session_id, profile, leaf, group)
            key = launch.key if launch is not None else None
            spawned = spawn(argv, cwd, env, spec.cols, spec.rows, sandbox=prefix, network_gate=own_network, key=key)
        except BaseException as exc:
            _unmake(scope, limits, group)
            if isinstance(exc, OSError):
                raise SpawnFailed(f"cannot set the session's limits: {exc.strerror}", reason="cgroup") from None
            raise
        try:
            with contextlib.suppress(OSError):  # not fatal: the marker and the session still find the process
                scope.attach(spawned.pid)
            if limits is not None:
                limits.attach(spawned.pid)  # fatal: a session without the limits it was promised must not run
        except OSError as exc:
            # The gate's EOF ends the held program (status 125) before it ran anything; the reaper's sweep reaps it.
            os.close(spawned.gate)
            spawned.gate = -1
            for fd in (spawned.master, spawned.slave):
                os.close(fd)
            _unmake(scope, limits, group)
            raise SpawnFailed(f"cannot put the session in its limit cgroups: {exc.strerror}", reason="cgroup") from None
        finally:
            spawned.release_gate()
        session = LocalSession(
            session_id=spec.session_id,
            type=self.type,
            name=spec.name,
            spawned=spawned,
            scope=scope,
            config=self._config,
            reaper=self._reaper,
            cols=spec.cols,
            rows=spec.rows,
            shell_key=shell_key,
            recording=spec.recording,
            record=self._record(spec.session_id),
        )
        session.sandbox, session.profile, session.limits = spec.sandbox, profile, limits
        session.workspace = workspace  # what it writes: hidden from other agents' sandboxes
        session.sandbox_note = network_note
        session.companions = companions
        session.watch_exit()
        if own_network:
            try:
                await self._connect(spawned, scope, pasta_program(self._config.pasta_program), env, spec.timeout_s)
            except BaseException:
                await session.close("its network could not be set up")
                raise
        try:
            op = session.start_send(
                SendRequest(
                    input="",
                    timeout_s=spec.timeout_s,
                    idle_s=spec.idle_s,
                    max_bytes=self._config.default_max_bytes,
                    request_key=None,
                )
            )
            result = await op.result()
        except BaseException:
            await session.close("open failed")
            raise
        session.motd = result.viewport
        session.open_wait_reason = result.wait_reason
        return session

    @staticmethod
    def _network_env(env: Mapping[str, str]) -> dict[str, str]:
        return {"PATH": env.get("PATH", os.defpath)}  # a holder's or pasta's: no session's marker or secrets

    async def _network(self, env: dict[str, str], timeout_s: float) -> tuple[bool, Namespace | None, str | None]:
        """How a sandbox with network gets a namespace of its own: (pasta connects one at the open, one made
        ahead, the note of an "auto" that fell back to the machine's network)."""
        pool = self._confinement.networks
        try:
            if pool is None or not pool.usable:  # no cgroup leaf to keep spares in: one connected at the open
                pasta_program(self._config.pasta_program)
                return True, None, None
            return False, await pool.take(self._reaper, self._network_env(env), timeout_s), None
        except (SandboxUnavailable, SpawnFailed) as exc:
            if self._config.sandbox_network != "auto":
                raise
            return False, None, f"the machine's network: sandbox_network is auto, and {exc}"

    async def _connect(self, spawned: Spawned, scope: Scope, pasta: str, env: dict[str, str], timeout_s: float) -> None:
        """Give a sandbox held at its network gate its network (pasta), then let its program start. pasta joins the
        session's cgroup (or carries its marker), so the session's close ends it."""
        try:
            child = await read_child_pid(spawned.info, timeout_s)
            pid = await connect(pasta, child, env, self._reaper, timeout_s)
        except BaseException:
            spawned.release_net_gate(start=False)
            raise
        if scope.cgroup is not None:
            with contextlib.suppress(OSError):
                scope.attach(pid)
        spawned.release_net_gate(start=True)

    def adopt(self, state: SessionState, master: int, slave: int, *, child: bool) -> LocalSession:
        """The live session ``state`` describes, on the PTY ``master``/``slave`` (after a handover or a crash)."""
        scope: Scope
        if state.cgroup is not None:
            scope = CgroupScope(Path(state.cgroup))
        else:
            scope = self._containment.scope(state.session_id)
            scope.attach(state.pid)
        terminal = state.terminal
        record, before = LiveRecord.disabled(), None
        if self._records is not None:
            with contextlib.suppress(OSError):  # a full runtime directory: adopted all the same, without one
                record, before = LiveRecord.reopen(self._records / state.session_id)
        session = LocalSession(
            session_id=state.session_id,
            type=state.type,
            name=state.name,
            spawned=Spawned(
                pid=state.pid,
                master=master,
                slave=slave,
                tty_rdev=state.tty_rdev,
                gate=-1,
                sandboxed=state.profile is not None and state.profile.contained,
            ),
            scope=scope,
            config=self._config,
            reaper=self._reaper,
            cols=terminal.cols if terminal is not None else self._config.default_cols,
            rows=terminal.rows if terminal is not None else self._config.default_rows,
            shell_key=state.shell_key,
            record=record,
        )
        session.restore(state, child=child, record=before)
        return session

    def _record(self, session_id: str) -> LiveRecord:
        if self._records is None:
            return LiveRecord.disabled()
        try:
            return LiveRecord(self._records / session_id)
        except OSError:  # a full runtime directory: the session runs, a crash may cost more
            return LiveRecord.disabled()


def _unmake(scope: Scope, limits: LimitScope | None, group: AgentGroup | None) -> None:
    """Undo a failed open's cgroups: the v2 leaf first, which may be in the agent group that goes last."""
    scope.remove()
    if limits is not None:
        limits.remove()
    elif group is not None:
        group.remove()


@dataclass(frozen=True, slots=True)
class Confinement:
    """How sessions are sandboxed and limited, and the directories no sandboxed session may see."""

    sandbox: Sandbox
    limiter: Limiter
    private: tuple[str, ...]  # hidden: ptyd's runtime and state directories, $XDG_RUNTIME_DIR
    protected: tuple[str, ...] = ()  # readable, never a writable root: ptyd's config and package directories
    networks: NetworkPool | None = None  # network namespaces made ahead (None: each connected at its open)


def build_registry(
    config: Config,
    reaper: ChildReaper,
    containment: Containment,
    confinement: Confinement | None = None,
    records: Path | None = None,
) -> dict[str, PtyBackend]:
    return {
        "shell": LocalBackend("shell", config, reaper, containment, config.shell_argv, confinement, records),
        "exec": LocalBackend("exec", config, reaper, containment, None, confinement, records),
    }
