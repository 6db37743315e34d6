"""The daemon's state as one versioned document: what a handover hands to the next daemon, and the state file.

The state file (``sessions.json`` in the runtime directory, 0600) names every live session's process tree, fenced by
start time, and is rewritten as sessions come and go. After a crash in the foreground the next daemon reads it
and kills exactly the trees the dead one left (``recover``); under systemd, where the PTYs are kept in the
service's file descriptor store, it adopts them instead, with the screens it last saved. A planned handover
carries the same document, complete (every transcript, screen and operation), through a memfd across exec.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from pathlib import Path
from typing import final

import msgspec

from ptyd.backends.os.containment import Containment, Left
from ptyd.backends.os.containment import recover as recover_left
from ptyd.backends.session_state import SessionState
from ptyd.service.agents import AgentState
from ptyd.terminal.scrollback import detached

log = logging.getLogger("ptyd.state")

STATE_VERSION = 1  # bumped on any change a previous daemon's document cannot be read with
STATE_FILE = "sessions.json"


class _State(msgspec.Struct, kw_only=True):
    pass


class _Header(_State):
    """What the document says of the daemon itself, beside its sessions."""

    daemon_pid: int
    version: int = STATE_VERSION
    handovers: int = 0
    listen_fd: int = -1
    lock_fd: int = -1
    socket_activated: bool = False  # systemd owns the socket file: the daemon never removes it
    child_nofile: tuple[int, int] | None = None  # the fd limit programs get (the one the first daemon started with)
    agents: list[AgentState] = msgspec.field(default_factory=list)


class DaemonState(_Header):
    sessions: dict[str, SessionState] = msgspec.field(default_factory=dict)


class _Version(msgspec.Struct):
    version: int = 0


_msgpack = msgspec.msgpack.Encoder()
_json = msgspec.json.Encoder()
_from_msgpack = msgspec.msgpack.Decoder(DaemonState)
_from_json = msgspec.json.Decoder(DaemonState)
_version_msgpack = msgspec.msgpack.Decoder(_Version)
_version_json = msgspec.json.Decoder(_Version)


class StateError(Exception):
    """The document cannot be read by this daemon (another format version, or damaged)."""


def encode(state: DaemonState, *, binary: bool = True) -> bytes:
    """msgpack for a handover (fast, binary); JSON for the state file (readable by an operator)."""
    return _msgpack.encode(state) if binary else _json.encode(state)


def decode(data: bytes, *, binary: bool = True) -> DaemonState:
    try:
        version = (_version_msgpack if binary else _version_json).decode(data).version
    except msgspec.DecodeError as exc:
        raise StateError(f"unreadable state document: {exc}") from None
    if version != STATE_VERSION:
        raise StateError(f"state format {version}; this ptyd reads format {STATE_VERSION}")
    try:
        return _from_msgpack.decode(data) if binary else _from_json.decode(data)
    except msgspec.DecodeError as exc:
        raise StateError(f"unreadable state document: {exc}") from None


def _session_json(session: SessionState) -> bytes:
    """``session`` as JSON, its transcript's lines as copies (``detached``): the saves encode every retained line
    again and again."""
    terminal = session.terminal
    if terminal is None or all(map(str.isascii, terminal.lines)):
        return _json.encode(session)
    fresh = msgspec.structs.replace(terminal, lines=detached(terminal.lines))
    return _json.encode(msgspec.structs.replace(session, terminal=fresh))


@final
class StateFile:
    """The state file in the runtime directory, rewritten whole (atomically) whenever it changes."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / STATE_FILE

    def write(self, state: DaemonState) -> int:
        """Replace the file with ``state``; returns its size. Run in a thread: written as a stream, a session
        at a time, so no encode holds the GIL long (one of hundreds of sessions held it ~30 ms) and no copy of
        the whole document is ever in memory."""
        tmp = self.path.with_suffix(".tmp")
        header = _json.encode(_Header(**{name: getattr(state, name) for name in _Header.__struct_fields__}))
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        size = 0
        with os.fdopen(fd, "wb") as f:
            size += f.write(header[:-1] + b',"sessions":{')  # the header's object, left open for the sessions
            for i, (session_id, session) in enumerate(state.sessions.items()):
                size += f.write(b"," * (i > 0) + _json.encode(session_id) + b":" + _session_json(session))
                time.sleep(0)  # the event loop may take the GIL here
            size += f.write(b"}}")
        os.replace(tmp, self.path)
        return size

    def read(self) -> DaemonState | None:
        try:
            return decode(self.path.read_bytes(), binary=False)
        except FileNotFoundError:
            return None
        except (OSError, StateError) as exc:
            log.warning("ignoring the state file %s: %s", self.path, exc)
            return None

    def recover(self, containment: Containment, keep: set[str] | None = None) -> int:
        """Kill what a dead daemon left, but the sessions in ``keep`` (adopted); returns processes killed."""
        state = self.read()
        sessions = state.sessions.values() if state is not None else []
        killed = recover_left(containment, [Left(s.session_id, s.pid, s.starttime, s.cgroup) for s in sessions], keep)
        if killed:
            log.warning("killed %d processes left by a previous daemon", killed)
        return killed


def remove_leftover_cgroups(containment: Containment, keep: set[str] | None = None) -> None:
    for scope in containment.leftovers():
        if keep is None or scope.cgroup not in keep:
            with contextlib.suppress(OSError):
                scope.remove()
