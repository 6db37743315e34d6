"""The engine workers: starting them, spreading sessions over them, and surviving their deaths.

Each worker is a process on one end of a socketpair (``WorkerLink``). Messages to it are framed as they are
sent and written once per loop turn, so the feeds of every session that read output in that turn go in one
write. A worker's death is noticed when its socket reads EOF, which the kernel delivers as the process exits. A
worker that hangs instead (libghostty-vt takes seconds over some output) is noticed by its watchdog
(``WorkerLink._watch``): work outstanding and not one frame back for ``stall_s``. It is killed, and that is a death.

Then a new worker takes its place and each of its sessions is rebuilt there (``RemoteTerminal.reopen``). A session
with output in flight when the worker died is a suspect: suspects are replayed one at a time, every other
session on that worker holding its new output meanwhile, so a second death during a session's replay names it.
That session moves to the pyte engine for good (``QUARANTINE_NOTE``), still in a worker: pyte raises where
Ghostty panics. If no worker can start at all, sessions render inside the daemon on pyte (``LocalLink``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
import time
from collections import deque
from typing import final

from ptyd.terminal.workers import messages as m
from ptyd.terminal.workers.early import preload
from ptyd.terminal.workers.host import EngineHost
from ptyd.terminal.workers.proxy import Link, RemoteTerminal

log = logging.getLogger("ptyd.engine")

QUARANTINE_NOTE = "the native engine crashed on this session's output"
HUNG_NOTE = "the native engine hung on this session's output"
ERROR_NOTE = "the native engine failed on this session's output"
NO_WORKER_NOTE = "no engine worker could start: rendered in the daemon on pyte"
STARTUP_FAILURES = 3  # workers in a row that die before saying hello: workers cannot start here
READ_CHUNK = 1 << 20
SOCKET_BUFFER = 4 << 20
COMPACT_BYTES = 1 << 20
STATUS_POLLS = 20  # 5 ms apart: how long a dead worker's exit status is waited for, for the log


@final
class WorkerLink:
    """The daemon's end of one worker."""

    def __init__(self, pool: EnginePool) -> None:
        self._pool = pool
        self.loop = pool.loop
        ours, theirs = socket.socketpair()
        try:
            # Spawned, not forked, and reaped like every child (the daemon's reaper takes any that exits): the
            # worker's end is the only descriptor it inherits (the loop spawns one process at a time).
            theirs.set_inheritable(True)
            argv = [sys.executable, "-m", "ptyd.terminal.workers.main", str(theirs.fileno())]
            self.pid = os.posix_spawn(sys.executable, argv, os.environ, file_actions=_file_actions(theirs.fileno()))
        except OSError:
            ours.close()
            raise
        finally:
            theirs.close()
        ours.setblocking(False)
        with contextlib.suppress(OSError):  # fewer, larger writes and wake-ups (the kernel caps what it grants)
            ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SOCKET_BUFFER)
            ours.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SOCKET_BUFFER)
        self._sock = ours
        self.sessions: dict[int, RemoteTerminal] = {}
        self.hello = False
        self.dead = False
        self.probe: RemoteTerminal | None = None  # the suspect whose output is being replayed alone
        self.suspects: deque[RemoteTerminal] = deque()
        self._out = bytearray()
        self._sent = 0  # bytes of ``_out`` written to the socket already
        self._in = bytearray()
        self._flush_scheduled = False
        self._writing = False
        self.hung_s: float | None = None  # set when the watchdog killed it: how long it showed no progress
        self._progress = 0.0  # loop time of the last frame from the worker, or of the work sent since
        self._watchdog: asyncio.TimerHandle | None = None  # armed only while work may be outstanding
        self.loop.add_reader(ours.fileno(), self._readable)

    @property
    def ready(self) -> bool:
        return self.hello

    # --- sending ---------------------------------------------------------------------------------------

    def may_send(self, term: RemoteTerminal) -> bool:
        """While suspects wait for their probe, only the probe (and pyte sessions, which cannot crash it) send."""
        if term.engine == "pyte" or (self.probe is None and not self.suspects):
            return True
        return self.probe is term

    def send(self, msg: m.ToWorker) -> None:
        if self.dead:
            return
        m.frame_into(msg, self._out)
        if self._watchdog is None and not isinstance(msg, m.Close):
            self._progress = self.loop.time()
            self._watchdog = self.loop.call_at(self._progress + self._pool.stall_s, self._watch)
        if not self._flush_scheduled and not self._writing:
            self._flush_scheduled = True
            self.loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        if self.dead:
            return
        out = self._out
        while self._sent < len(out):
            try:
                with memoryview(out) as view:
                    self._sent += self._sock.send(view[self._sent :])
            except (BlockingIOError, InterruptedError):
                break
            except OSError:  # the worker is gone: its EOF is on its way
                self._sent = len(out)
                break
        if self._sent >= len(out):
            out.clear()
            self._sent = 0
        elif self._sent >= COMPACT_BYTES:  # sent from an offset, moved down now and then (not on every send)
            del out[: self._sent]
            self._sent = 0
        if out and not self._writing:
            self.loop.add_writer(self._sock.fileno(), self._flush)
            self._writing = True
        elif not self._out and self._writing:
            self.loop.remove_writer(self._sock.fileno())
            self._writing = False

    # --- receiving ---------------------------------------------------------------------------------------

    def _readable(self) -> None:
        eof = False
        while True:
            try:
                data = self._sock.recv(READ_CHUNK)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                eof = True
                break
            if not data:
                eof = True
                break
            self._in += data
            if len(data) < READ_CHUNK:
                break
        try:
            bodies = m.frames(self._in)
        except ValueError:
            bodies, eof = [], True
        if bodies:
            self._progress = self.loop.time()
        for body in bodies:
            msg = m.to_daemon.decode(body)
            if isinstance(msg, m.Ack):
                term = self.sessions.get(msg.sid)
                if term is not None:
                    term.acked(msg)
            elif isinstance(msg, m.Snapshot):
                term = self.sessions.get(msg.sid)
                if term is not None:
                    term.snapshotted(msg)
            elif isinstance(msg, m.Painted):
                term = self.sessions.get(msg.sid)
                if term is not None:
                    term.painted(msg)
            else:
                self.hello = True
                self._pool.started(self)
        if eof:
            self._died()
        elif bodies and self._watchdog is not None and not self._outstanding():
            self._watchdog.cancel()  # idle: no timer runs until work is sent again
            self._watchdog = None

    # --- the watchdog ------------------------------------------------------------------------------------

    def _outstanding(self) -> bool:
        return any(term.in_flight for term in self.sessions.values())

    def _caught_up(self) -> bool:
        """Take what the worker sent while this loop was busy (timers run before I/O); False: it died."""
        self._readable()
        return not self.dead

    def _watch(self) -> None:
        """Work outstanding and no frame back for ``stall_s``: the worker hangs; kill it, which is a death."""
        self._watchdog = None
        if self.dead:
            return
        if not self._caught_up() or not self._outstanding():
            return
        now = self.loop.time()
        if not self.hello or now - self._progress < self._pool.stall_s:  # a starting interpreter is not hung
            due = now + self._pool.stall_s if not self.hello else self._progress + self._pool.stall_s
            self._watchdog = self.loop.call_at(due, self._watch)
            return
        self.hung_s = now - self._progress
        with contextlib.suppress(OSError):
            os.kill(self.pid, signal.SIGKILL)
        self._died()

    def _died(self) -> None:
        if self.dead:
            return
        self.dead = True
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None
        self.loop.remove_reader(self._sock.fileno())
        if self._writing:
            self.loop.remove_writer(self._sock.fileno())
        self._sock.close()
        self._pool.died(self)

    def status(self) -> str:
        """How the process ended (its socket closes as it exits: the exit status follows within moments)."""
        for _ in range(STATUS_POLLS):
            try:  # looked at, not reaped: the daemon's reaper collects every child
                info = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                return "exited"
            if info is not None:
                if info.si_code == os.CLD_EXITED:
                    return f"exit status {info.si_status}"
                with contextlib.suppress(ValueError):
                    return signal.Signals(info.si_status).name
                return f"signal {info.si_status}"
            time.sleep(0.005)
        return "closed its socket"

    def close(self) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None
        if not self.dead:
            self.dead = True
            self.loop.remove_reader(self._sock.fileno())
            if self._writing:
                self.loop.remove_writer(self._sock.fileno())
            self._sock.close()
        with contextlib.suppress(OSError):
            os.kill(self.pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)


def _file_actions(keep: int) -> list[tuple[int | str, ...]]:
    """What a worker must not inherit: every inheritable descriptor but ``keep`` (the PTYs a handover carried
    across its exec, its lock and listening socket are inheritable); stdin is /dev/null."""
    actions: list[tuple[int | str, ...]] = [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0)]
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2 and fd != keep:
            with contextlib.suppress(OSError):  # the directory's own descriptor, closed by now
                if os.get_inheritable(fd):
                    actions.append((os.POSIX_SPAWN_CLOSE, fd))
    return actions


@final
class LocalLink:
    """The engines in the daemon itself, on pyte: for when no worker can start."""

    def __init__(self, pool: EnginePool) -> None:
        self.loop = pool.loop
        self.sessions: dict[int, RemoteTerminal] = {}
        self._host = EngineHost()
        self._queue: list[m.ToWorker] = []
        self.dead = False

    @property
    def ready(self) -> bool:
        return True

    def may_send(self, term: RemoteTerminal) -> bool:
        return True

    def send(self, msg: m.ToWorker) -> None:
        if isinstance(msg, m.Open):
            msg = m.Open(sid=msg.sid, engine="pyte", cols=msg.cols, rows=msg.rows, end=msg.end)
        if not self._queue:
            self.loop.call_soon(self._run)
        self._queue.append(msg)

    def _run(self) -> None:
        queue, self._queue = self._queue, []
        snapshots: list[m.ToDaemon] = []
        for msg in queue:
            snapshots.extend(self._host.handle(msg))
        out = self._host.finish() + snapshots
        for reply in out:
            term = self.sessions.get(getattr(reply, "sid", -1))
            if term is None:
                continue
            if isinstance(reply, m.Ack):
                term.acked(reply)
            elif isinstance(reply, m.Snapshot):
                term.snapshotted(reply)
            elif isinstance(reply, m.Painted):
                term.painted(reply)


@final
class EnginePool:
    def __init__(
        self, size: int, loop: asyncio.AbstractEventLoop, *, stall_s: float, early_answers: bool = False
    ) -> None:
        self.size = size if size > 0 else (os.cpu_count() or 1)
        self.loop = loop
        self.early_answers = early_answers  # the daemon answers a session's queries until its worker is up
        self.stall_s = stall_s  # a worker with work outstanding and no frame back this long hangs: killed
        self.links: list[WorkerLink] = []
        self.local: LocalLink | None = None  # set once workers cannot start
        self._next_sid = 0
        self._failures = 0  # workers in a row that died before their hello
        self.crashes = 0  # workers that died after starting
        self.hangs = 0  # ...of which killed by their watchdog
        self.quarantined = 0  # sessions moved to pyte
        self._dead: list[int] = []  # workers that died, for ``close`` to reap where no reaper runs

    @property
    def broken(self) -> bool:
        return self.local is not None

    def new_sid(self) -> int:
        self._next_sid += 1
        return self._next_sid

    def warm(self) -> None:
        """Start every worker now (their interpreters start while the daemon does), and load what answers the
        first sessions' queries until they are up."""
        while not self.broken and len(self.links) < self.size:
            self._spawn()
        if self.early_answers:
            preload()  # what answers meanwhile

    def _spawn(self) -> WorkerLink | None:
        try:
            link = WorkerLink(self)
        except OSError as exc:
            self._give_up(f"cannot start an engine worker: {exc}")
            return None
        self.links.append(link)
        return link

    def _give_up(self, why: str) -> None:
        if self.local is None:
            log.warning("%s; sessions render in the daemon on pyte from now on", why)
            self.local = LocalLink(self)

    def attach(self, term: RemoteTerminal) -> Link:
        if not self.broken and len(self.links) < self.size:
            self._spawn()
        link: Link = self.local if self.local is not None else min(self.links, key=lambda wl: len(wl.sessions))
        link.sessions[term.sid] = term
        if isinstance(link, LocalLink):
            term.engine = "pyte"
            term.engine_note = NO_WORKER_NOTE
        return link

    def detach(self, term: RemoteTerminal) -> None:
        term.link.sessions.pop(term.sid, None)
        link = term.link
        if isinstance(link, WorkerLink):
            if term in link.suspects:
                link.suspects.remove(term)
            if link.probe is term:
                link.probe = None
                self._next_probe(link)

    def started(self, link: WorkerLink) -> None:
        self._failures = 0
        for term in link.sessions.values():  # an idle session must not keep its early answers' terminal
            term.worker_up()

    # --- a worker died ---------------------------------------------------------------------------------

    def died(self, link: WorkerLink) -> None:
        if link in self.links:
            self.links.remove(link)
        self._dead.append(link.pid)
        if not link.hello:
            self._failures += 1
        sessions = list(link.sessions.values())
        if self._failures >= STARTUP_FAILURES:
            self._give_up(f"engine workers die before they start (pid {link.pid}: {link.status()})")
        elif link.hung_s is not None:
            self.crashes += 1
            self.hangs += 1
            log.warning(
                "engine worker pid %d hung (no progress for %d ms with work outstanding): killed it, with %d"
                " sessions: rebuilding them in a new worker",
                link.pid,
                link.hung_s * 1000,
                len(sessions),
            )
        else:
            self.crashes += 1
            log.warning(
                "engine worker pid %d died (%s) with %d sessions: rebuilding them in a new worker",
                link.pid,
                link.status(),
                len(sessions),
            )
        note = HUNG_NOTE if link.hung_s is not None else QUARANTINE_NOTE
        target: Link | None = self.local
        if target is None:
            target = self._spawn()
            if target is None:
                target = self.local
        assert target is not None
        probe = link.probe
        for term in sessions:
            target.sessions[term.sid] = term
            if isinstance(target, LocalLink):
                term.engine_note = NO_WORKER_NOTE
                term.reopen(target, "pyte", held=False)
                continue
            guilty = False
            if probe is not None:
                guilty = term is probe
                suspect = term in link.suspects
            else:
                suspect = (term.in_flight or term in link.suspects) and term.engine != "pyte"
                if suspect:
                    term.strikes += 1
                    guilty = term.strikes >= 2
            if guilty:
                self._quarantine(term, target, note)
            elif suspect and isinstance(target, WorkerLink):
                term.reopen(target, term.engine, held=True)
                target.suspects.append(term)
            else:
                term.reopen(target, term.engine, held=False)
        if isinstance(target, WorkerLink):
            self._next_probe(target)

    def _quarantine(self, term: RemoteTerminal, target: Link, note: str) -> None:
        self.quarantined += 1
        term.strikes = 0
        term.engine_note = note
        log.warning("session %s: %s; it runs on the pyte engine from now on", term.label, note)
        term.reopen(target, "pyte", held=False)

    def engine_failed(self, term: RemoteTerminal, error: str) -> None:
        """The engine raised on a session's output (the worker lives): native sessions move to pyte."""
        if term.engine == "pyte":
            log.warning("session %s: the pyte engine failed (%s); its screen may be off", term.label, error)
            return
        term.link.send(m.Close(sid=term.sid))
        self._quarantine(term, term.link, ERROR_NOTE)

    # --- probes ------------------------------------------------------------------------------------------

    def progressed(self, term: RemoteTerminal) -> None:
        link = term.link
        if not isinstance(link, WorkerLink) or term.in_flight:
            return
        if link.probe is term:
            link.probe = None
            term.strikes = 0
            self._next_probe(link)
        elif link.probe is None and link.suspects:
            self._next_probe(link)

    def _next_probe(self, link: WorkerLink) -> None:
        """Replay the next suspect alone, once nothing else is in flight on ``link``; none left: release all."""
        if link.probe is not None or link.dead:
            return
        if any(t.in_flight for t in link.sessions.values() if t not in link.suspects and t.engine != "pyte"):
            return  # the next ack calls again
        if link.suspects:
            link.probe = link.suspects.popleft()
            link.probe.release()
            return
        for term in link.sessions.values():
            if term.outbox:
                term.release()

    def abandon(self) -> None:
        """The loop this pool served is gone (in-process tests run one after another): close the sockets, so
        the workers end, without touching that loop."""
        for link in self.links:
            link.dead = True
            with contextlib.suppress(OSError):
                link._sock.close()
            self._dead.append(link.pid)
        self.links.clear()
        for pid in self._dead:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)

    def close(self) -> None:
        """End every worker (a daemon's own end at exit is enough: workers end when their socket closes)."""
        for link in self.links:
            link.close()
        self.links.clear()
        for pid in self._dead:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)


_pool: EnginePool | None = None


def shared_pool(size: int, stall_ms: int) -> EnginePool:
    """The daemon's pool (one per event loop: in-process tests run several)."""
    global _pool
    loop = asyncio.get_running_loop()
    if _pool is None or _pool.loop is not loop:
        if _pool is not None:
            _pool.abandon()
        _pool = EnginePool(size, loop, stall_s=stall_ms / 1000, early_answers=True)
    _pool.stall_s = stall_ms / 1000
    return _pool
