"""A local session written into the state document, and a session built back from it by the next daemon.

The next daemon gets the PTY's master and slave (inherited across exec, or from systemd's fd store), the
program's pid (still the daemon's child after an exec, since exec keeps the pid), its scope, the terminal's
transcript and screen, the shell integration's secret and its command/prompt state, and the sends: an in-flight
one is driven again (its input is written already; what the program printed meanwhile waits in the PTY), settled
ones keep their results for ``terminal_wait`` and for a client repeating a ``request_key``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal, cast

import msgspec

from ptyd import protocol as p
from ptyd.backends import procfs
from ptyd.backends.base import SendRequest
from ptyd.backends.containment import CgroupScope, Containment, Scope
from ptyd.backends.reaper import ChildReaper
from ptyd.backends.sandbox.limits import LimitScope
from ptyd.backends.send import SendOp
from ptyd.backends.session import LocalSession
from ptyd.backends.spawn import Spawned
from ptyd.backends.state import OpState, SessionState
from ptyd.config import Config

_result_decoder = msgspec.json.Decoder(p.SendResult)


def op_state(op: SendOp, *, taken: bool = True) -> OpState:
    req = op.request
    return OpState(
        id=op.id,
        input_len=len(req.input),
        timeout_s=req.timeout_s,
        idle_s=req.idle_s,
        max_bytes=req.max_bytes,
        request_key=req.request_key,
        started=op.started,
        deadline=op.deadline,
        anchor=op.anchor,
        output_line=op.output_line,
        capture_lines=list(op.capture.lines),
        capture_room=op.capture.room,
        capture_end=op.capture.end_line,
        exit_code=op.exit_code,
        taken=taken,
        result=msgspec.json.encode(op.future.result()) if op.done else None,
    )


SAVED_LINES = 2000  # transcript lines kept in the state file under systemd (it lives in memory, in tmpfs)


def session_state(
    session: LocalSession, owner: str, depth: Literal["handover", "saved", "listing"] = "handover"
) -> SessionState:
    """The session as the next daemon needs it. "handover": the channel is held, so nothing changes after this,
    and every operation and the whole transcript go along. "saved" (the state file under systemd, for adoption
    after a crash): the screen and the transcript's tail as rendered now. "listing" (the state file elsewhere):
    the process tree only, so no secret and nothing typed or printed reaches the disk."""
    full = depth == "handover"
    listing = depth == "listing"
    pid = session.pid or 0
    stat = procfs.read_stat(pid)
    status = session.status()
    spawned = session._proc
    active = session.active
    keyed = [op_state(op) for op in session._keys.values() if op.done and op is not session.last_op]
    return SessionState(
        session_id=session.session_id,
        type=session.type,
        name=session.name,
        pid=pid,
        starttime=stat.starttime if stat is not None else None,
        cgroup=session.cgroup,
        owner=owner,
        child=stat is not None and stat.ppid == os.getpid(),
        tty_rdev=spawned.tty_rdev,
        master_fd=spawned.master,
        slave_fd=spawned.slave,
        shell_key="" if listing else session._shell_key,
        created_at_ms=session.created_at_ms,
        motd=session.motd,
        open_wait_reason=session.open_wait_reason,
        command_running=session._command_running,
        prompt_cwd=session._prompt_cwd,
        exited=isinstance(status, p.Exited),
        exit_code=status.exit_code if isinstance(status, p.Exited) else None,
        exit_signal=status.signal if isinstance(status, p.Exited) else None,
        outbox=session.channel.hold() if full else b"",
        terminal=None if listing else session.terminal.snapshot(render=full, max_lines=None if full else SAVED_LINES),
        active=op_state(active, taken=session.tracker.taken)
        if full and active is not None and not active.done
        else None,
        last=op_state(session.last_op)
        if not listing and session.last_op is not None and session.last_op.done
        else None,
        keyed=keyed if full else [],
        sandbox=session.sandbox,
        profile=session.profile,
        limit_paths=session.limits.paths() if session.limits is not None else [],
        workspace=session.workspace,
    )


def save_mark(session: LocalSession) -> tuple[int, int]:
    """Changes whenever output arrives or is drawn: the saved state is rewritten only when it has."""
    return session.channel.received, session.terminal._generation


def master_fd(session: LocalSession) -> int:
    return session._proc.master


def _op(state: OpState, session: LocalSession) -> SendOp:
    request = SendRequest(
        input="", timeout_s=state.timeout_s, idle_s=state.idle_s, max_bytes=state.max_bytes,
        request_key=state.request_key,
    )  # fmt: skip
    op = SendOp(request, state.anchor, session.loop)
    op.id = state.id
    op.started, op.deadline = state.started, state.deadline
    op.output_line = state.output_line
    op.capture.lines, op.capture.room, op.capture.end_line = state.capture_lines, state.capture_room, state.capture_end
    op.exit_code = state.exit_code
    if state.result is not None:
        op.future.set_result(_result_decoder.decode(state.result))
    return op


def adopt(
    state: SessionState,
    master: int,
    slave: int,
    *,
    config: Config,
    reaper: ChildReaper,
    containment: Containment,
    child: bool,
) -> LocalSession:
    """The live session ``state`` describes, on the PTY ``master``/``slave``. ``child``: the program is this
    process's child (an exec kept the pid); after a crash it is not, and its exit status is not known."""
    scope: Scope
    if state.cgroup is not None:
        scope = CgroupScope(Path(state.cgroup))
    else:
        scope = containment.scope(state.session_id)
        scope.attach(state.pid)
    terminal = state.terminal
    sandboxed = state.profile is not None and state.profile.contained
    spawned = Spawned(pid=state.pid, master=master, slave=slave, tty_rdev=state.tty_rdev, gate=-1, sandboxed=sandboxed)
    session = LocalSession(
        session_id=state.session_id,
        type=state.type,
        name=state.name,
        spawned=spawned,
        scope=scope,
        config=config,
        reaper=reaper,
        cols=terminal.cols if terminal is not None else config.default_cols,
        rows=terminal.rows if terminal is not None else config.default_rows,
        shell_key=state.shell_key,
    )
    if terminal is not None:
        session.terminal.restore(terminal)
    session.motd = state.motd
    session.sandbox, session.workspace = state.sandbox, state.workspace
    session.profile = state.profile or session.profile
    session.limits = LimitScope.at(state.limit_paths)
    session.open_wait_reason = cast(p.WaitReason, state.open_wait_reason)
    session.created_at_ms = state.created_at_ms
    session._command_running = state.command_running
    session._prompt_cwd = state.prompt_cwd
    for kept in state.keyed:
        op = _op(kept, session)
        if kept.request_key is not None:
            session._keys[kept.request_key] = op
    if state.last is not None:
        session.last_op = _op(state.last, session)
        if state.last.request_key is not None:
            session._keys[state.last.request_key] = session.last_op
    session.channel.write(state.outbox)
    if state.exited:
        session._status = p.Exited(exit_code=state.exit_code, signal=state.exit_signal)
    else:
        session.watch_exit(child=child and state.child)
    if state.active is not None:
        op = _op(state.active, session)
        if state.active.request_key is not None:
            session._keys[state.active.request_key] = op
        session.resume(op, taken=state.active.taken)
    return session
