"""Crash survival: what the daemon keeps for a successor while it runs, and how a daemon restarted after a crash
adopts the sessions (under systemd, or with the fd keeper of ``ptyd.keeper``).

While it runs, the daemon keeps each session's PTY master in systemd's fd store and saves the sessions (screens
included) to the state file. systemd restarts a daemon that died (KillMode=process leaves the sessions' processes
running) and passes the stored masters back; the new daemon adopts each session whose program is still the same
process, from the saved state plus what the PTY still buffers. Everything else is killed as after a crash in
the foreground (``continuity.document``).
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import time
from typing import Protocol

import msgspec

from ptyd.backends.base import PtyBackendSession
from ptyd.backends.os import procfs
from ptyd.backends.session_state import SessionState
from ptyd.continuity import handover
from ptyd.continuity.document import DaemonState, StateFile
from ptyd.service.service import PtyService

log = logging.getLogger("ptyd.adoption")


class FdKeeper(Protocol):
    """Where PTY masters outlive the daemon: systemd's fd store or ``ptyd keeper``."""

    stored: set[str]

    def sync(self, masters: dict[str, int]) -> None: ...


# A save that wrote this much leaves memory to give back once saves pause (``large_saved``): its copies of every
# retained line and their JSON (8 MiB a session whose scrollback is full of 4-byte text) were freed in the writer
# thread's arena and stayed resident (4-byte fill: 6.8-7.0 MiB a session against a 4 + 1 MiB budget).
GIVE_BACK_SAVE_BYTES = 1 << 20
SAVE_SLICE_S = 0.002  # a save's states are taken this long at a time, the loop serving sends between
NEW_SESSION_SAVE_S = 0.2  # a new session is in the saved state this soon: a crash just after an open keeps it
TIOCGPTPEER = 0x5441  # _IO('T', 0x41): open the slave of a PTY master (Linux 4.13)


def _alive(session: SessionState) -> bool:
    """Whether the session's program is the very process the state names (a pid may have been reused)."""
    if session.exited:
        return True  # nothing left to run: its transcript is what the owner keeps
    stat = procfs.read_stat(session.pid)
    return stat is not None and session.starttime is not None and stat.starttime == session.starttime


def survivors(state: DaemonState | None, stored: dict[str, int]) -> tuple[DaemonState, dict[str, tuple[int, int]]]:
    """After a crash under systemd: the saved ``state`` cut to the sessions that can be adopted (a PTY master in
    the fd store, the same program still running) and their master and slave. Unused masters are closed."""
    fds: dict[str, tuple[int, int]] = {}
    for session_id, master in stored.items():
        session = state.sessions.get(session_id) if state is not None else None
        slave = -1
        if session is not None and _alive(session):
            try:
                slave = fcntl.ioctl(master, TIOCGPTPEER, os.O_RDWR | os.O_NOCTTY | os.O_CLOEXEC)
            except OSError as exc:
                log.warning("session %s: cannot open its terminal again: %s", session_id, exc.strerror)
        if slave >= 0:
            os.set_blocking(master, False)
            fds[session_id] = (master, slave)
        else:
            os.close(master)
    if state is None:
        return DaemonState(daemon_pid=0), fds
    kept = {sid: s for sid, s in state.sessions.items() if sid in fds}
    return msgspec.structs.replace(state, sessions=kept), fds


class StateSaver:
    """Keeps the state file and systemd's fd store up to date with the sessions.

    In the foreground the state file lists process trees only, and is rewritten at once as sessions come and
    go. With systemd's fd store the PTYs are stored at once, and the state file holds what adoption needs
    (screens, the transcript's tail, the shell integration's key): a full write costs about 30 ms for 20 sessions
    of 2000 lines (in a thread; taking the states is the loop's part, only of sessions that changed, and
    ``SAVE_SLICE_S`` of the loop at a time), so it is written at once only if the last write is ``interval_s`` old,
    and otherwise at the next ``tick`` (sessions closed, or their screens changed); a session opened meanwhile is
    written within NEW_SESSION_SAVE_S."""

    def __init__(self, state_file: StateFile, service: PtyService, store: FdKeeper | None, interval_s: float) -> None:
        self.state_file = state_file
        self.service = service
        self.store = store  # systemd's fd store, the fd keeper, or none (in the foreground)
        self.interval_s = interval_s
        self._saved: handover.SaveCache = {}  # each session's state as last written, and its mark then
        self._written = -interval_s
        self._dirty = False
        self._soon: asyncio.TimerHandle | None = None
        self._taking: asyncio.Task[None] | None = None  # the states being taken, a slice of the loop at a time
        self._again = False  # a save was asked while they were
        self._pending: DaemonState | None = None  # the newest state not yet written
        self._writer: asyncio.Task[None] | None = None
        self.large_saved = 0.0  # time.monotonic() of the last large save, until the daemon gave its memory back

    def _sessions(self) -> dict[str, PtyBackendSession]:
        return {sid: e.session for sid, e in self.service.entries()}

    def changed(self) -> None:
        """The set of sessions changed."""
        if self.store is None:
            self._write(handover.snapshot(self.service, None, "listing"))
            return
        sessions = self._sessions()
        self.store.sync({sid: s.master_fd for sid, s in sessions.items()})
        self._dirty = True
        opened = not sessions.keys() <= self._saved.keys()
        due = self._written + (NEW_SESSION_SAVE_S if opened else self.interval_s) - time.monotonic()
        if due <= 0:
            self._save()
        elif opened and self._soon is None:
            self._soon = asyncio.get_running_loop().call_later(due, self._save_if_dirty)

    def _save_if_dirty(self) -> None:
        self._soon = None
        if self._dirty:
            self._save()

    def tick(self) -> None:
        if self.store is None:
            return
        sessions = self._sessions()
        if self.store.stored != sessions.keys():  # an fd the manager did not take (it lagged): offer it again
            self.store.sync({sid: s.master_fd for sid, s in sessions.items()})
        if self._dirty or any(self._moved(sid, s) for sid, s in sessions.items()):
            self._save()

    def _moved(self, session_id: str, session: PtyBackendSession) -> bool:
        saved = self._saved.get(session_id)
        return saved is None or saved.mark != session.save_mark()

    def _save(self) -> None:
        """Take the states (in slices of the loop) and write them; asked while a take is under way, take them
        again after it."""
        self._dirty = False
        if self._taking is not None:
            self._again = True
            return
        self._taking = asyncio.get_running_loop().create_task(self._take(), name="state take")

    async def _take(self) -> None:
        try:
            again = True
            while again:
                self._again = False
                state, self._saved = await handover.saved(self.service, self._saved, SAVE_SLICE_S)
                self._write(state)
                self._written = time.monotonic()
                again = self._again
        except Exception:  # a bug in one session's state: the next tick takes them all again
            log.exception("cannot take the sessions' states for the state file")
            self._dirty = True
        finally:
            self._taking = None

    def _write(self, state: DaemonState) -> None:
        """The snapshot is taken on the loop (the sessions cannot change under it); encoding and writing it (~30
        ms for 20 sessions) run in a thread, one write at a time, and only the newest pending state is written."""
        self._pending = state
        if self._writer is None:
            self._writer = asyncio.get_running_loop().create_task(self._write_pending(), name="state file")

    async def _write_pending(self) -> None:
        try:
            while self._pending is not None:
                state, self._pending = self._pending, None
                started = time.monotonic()
                try:
                    size = await asyncio.to_thread(self.state_file.write, state)
                except OSError as exc:  # a full tmpfs: the next change tries again
                    log.warning("cannot write the state file %s: %s", self.state_file.path, exc)
                    continue
                if size >= GIVE_BACK_SAVE_BYTES:
                    self.large_saved = time.monotonic()
                log.debug(
                    "saved %d sessions (%d bytes) in %.1f ms, off the loop",
                    len(state.sessions),
                    size,
                    (time.monotonic() - started) * 1e3,
                )
        finally:
            self._writer = None

    async def flush(self) -> None:
        """Wait for the takes and writes under way (the daemon's last one, at shutdown)."""
        while (busy := self._taking or self._writer) is not None:
            await asyncio.shield(busy)
