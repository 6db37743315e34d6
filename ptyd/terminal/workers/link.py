"""The daemon's end of one engine worker (``WorkerLink``), and the in-daemon fallback (``LocalLink``).

A worker is a process on one end of a socketpair. Messages to it are framed as they are sent and written once per
loop turn, so the feeds of every session that read output in that turn go in one write. A worker's death is
noticed when its socket reads EOF, which the kernel delivers as the process exits. A worker that hangs instead
(libghostty-vt takes seconds over some output) is noticed by its watchdog (``WorkerLink._watch``): work
outstanding and not one frame back for ``stall_s``. It is killed, and that is a death. What follows a death is
the pool's (``pool``). A link may be made before its process starts (``delay``): a replacement after workers
died while starting waits out its backoff, its sessions' messages queued meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys
import time
from collections import deque
from typing import Protocol, final

from ptyd.terminal.workers import messages as m
from ptyd.terminal.workers.host import EngineHost
from ptyd.terminal.workers.proxy import RemoteTerminal

READ_CHUNK = 1 << 20
SOCKET_BUFFER = 4 << 20
COMPACT_BYTES = 1 << 20
STATUS_POLLS = 20  # 5 ms apart: how long a dead worker's exit status is waited for, for the log
# A worker with native work outstanding and no frame back for the stall time hangs if it ran this share of the stall
# time since its last frame (a frame comes every few ms of its CPU)...
HANG_CPU_SHARE = 0.25
STARVED_SHARE = 0.5  # ...and is starved, not hung, if it ran less and waited on a run queue this share of the window
# How a worker ended, as ``WorkerLink.status`` says it: the engine failed on what it rendered (a native panic,
# a fault), as opposed to a kill from outside (an operator, the OOM killer) or an end that says nothing.
ENGINE_FAULTS = frozenset({"SIGILL", "SIGSEGV", "SIGBUS", "SIGABRT", "SIGFPE", "SIGTRAP", "SIGSYS"})


class Pool(Protocol):
    """What a link asks of the pool that made it (``pool.EnginePool``)."""

    loop: asyncio.AbstractEventLoop
    stall_s: float

    def exit_of(self, pid: int) -> str | None:
        """How a child the daemon's reaper collected ended, if it knows."""
        ...

    def started(self, link: WorkerLink) -> None: ...
    def died(self, link: WorkerLink) -> None: ...


@final
class WorkerLink:
    """The daemon's end of one worker."""

    def __init__(self, pool: Pool, *, delay: float = 0.0) -> None:
        self._pool = pool
        self.loop = pool.loop
        ours, theirs = socket.socketpair()
        self.pid = 0  # none yet while ``delay`` runs
        self._theirs: socket.socket | None = theirs
        if delay > 0:
            self._starting: asyncio.TimerHandle | None = self.loop.call_later(delay, self._start)
        else:
            self._starting = None
            try:
                self._spawn()
            except OSError:
                ours.close()
                raise
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
        self.retired = False  # the pool replaced it on purpose (its memory): its end is no death
        self.spawn_error = False  # its process could not be started
        self.rss_limit = 0  # bytes it may hold before the pool replaces it
        self.fresh = False  # it replaced a worker for its memory and was not measured since
        self._progress = 0.0  # loop time of the last frame from the worker, or of the work sent since
        self._looked = 0.0  # loop time the watchdog last looked or was armed...
        self._sched: tuple[int, int] | None = None  # ...and the worker's schedstat then (``_sched_ns``)
        self._quiet_ran = 0  # ns on a CPU since the last frame, summed over the looks that saw none
        self._watchdog: asyncio.TimerHandle | None = None  # armed only while work may be outstanding
        self.loop.add_reader(ours.fileno(), self._readable)

    def _spawn(self) -> None:
        """Start the process. Spawned, not forked, and reaped like every child (the daemon's reaper takes any
        that exits): the worker's end is the only descriptor it inherits (the loop spawns one at a time)."""
        theirs, self._theirs = self._theirs, None
        assert theirs is not None
        try:
            theirs.set_inheritable(True)
            argv = [sys.executable, "-m", "ptyd.terminal.workers.main", str(theirs.fileno())]
            self.pid = os.posix_spawn(sys.executable, argv, os.environ, file_actions=_file_actions(theirs.fileno()))
        finally:
            theirs.close()

    def _start(self) -> None:
        """Its backoff is over: start the process (a failure to is a death before the hello)."""
        self._starting = None
        if self.dead:
            return
        try:
            self._spawn()
        except OSError:
            self.spawn_error = True
            self._died()

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
            self._look(self._progress)
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

    def _native_outstanding(self) -> bool:
        return any(term.in_flight and term.engine != "pyte" for term in self.sessions.values())

    def _look(self, now: float) -> None:
        """A new window for the watchdog's next verdict, from ``now``, after a frame: nothing ran without one yet."""
        self._looked, self._quiet_ran = now, 0
        self._sched = _sched_ns(self.pid) if self.pid else None

    def _working(self, now: float) -> bool:
        """No frame came back since the last look: is the worker working anyway? pyte's work only: it used the CPU
        meanwhile (pyte is slow on some output, seconds a piece under load, never stuck in a loop, and its slowness
        taken for a hang killed its worker again at each rebuild, without end). Native work: it waited on a run
        queue for most of the window and ran little since its last frame, which comes every few ms of its CPU: a
        worker starved of the cores, not hung (after forty kills under 25 floods, one rebuilding 13 sessions was
        killed for 2.4 s without a frame). A native engine stuck in a write runs instead, and is caught once it ran
        ``HANG_CPU_SHARE`` of the stall time: at once on a quiet machine, later on a loaded one. A stopped or
        blocked worker neither runs nor waits: it is hung."""
        before, window = self._sched, now - self._looked
        self._sched, self._looked = _sched_ns(self.pid), now
        if self._sched is None or before is None:
            return False
        ran, waited = self._sched[0] - before[0], self._sched[1] - before[1]
        if not self._native_outstanding():
            return ran > 0
        self._quiet_ran += ran
        return self._quiet_ran < HANG_CPU_SHARE * self._pool.stall_s * 1e9 and waited >= STARVED_SHARE * window * 1e9

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
        if not self.hello or self._progress > self._looked:  # starting, or a frame came back since the last look
            self._look(now)
            self._watchdog = self.loop.call_at(now + self._pool.stall_s, self._watch)
            return
        if now - self._progress < self._pool.stall_s or self._working(now):
            self._watchdog = self.loop.call_at(now + self._pool.stall_s, self._watch)
            return
        self.hung_s = now - self._progress
        with contextlib.suppress(OSError):
            os.kill(self.pid, signal.SIGKILL)
        self._died()

    def _unstarted(self) -> None:
        if self._starting is not None:
            self._starting.cancel()
            self._starting = None
        if self._theirs is not None:
            self._theirs.close()
            self._theirs = None

    def _died(self) -> None:
        if self.dead:
            return
        self.dead = True
        self._unstarted()
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
        if not self.pid:
            return "could not start" if self.spawn_error else "never started"
        for _ in range(STATUS_POLLS):
            try:  # looked at, not reaped: the daemon's reaper collects every child
                info = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:  # collected already
                return self._pool.exit_of(self.pid) or "exited"
            if info is not None:
                if info.si_code == os.CLD_EXITED:
                    return f"exit status {info.si_status}"
                with contextlib.suppress(ValueError):
                    return signal.Signals(info.si_status).name
                return f"signal {info.si_status}"
            time.sleep(0.005)
        return "closed its socket"

    def retire(self) -> None:
        """End it without a death: its socket closes, and the worker ends when it reads that (the reaper
        collects it). Its sessions were moved already."""
        self.retired = True
        self._hang_up()

    def _hang_up(self) -> None:
        """Its watchdog stopped and its socket closed: the worker ends when it reads that."""
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None
        self._unstarted()
        if not self.dead:
            self.dead = True
            self.loop.remove_reader(self._sock.fileno())
            if self._writing:
                self.loop.remove_writer(self._sock.fileno())
            self._sock.close()

    def close(self) -> None:
        self._hang_up()
        if not self.pid:
            return
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

    def __init__(self, pool: Pool) -> None:
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


def _sched_ns(pid: int) -> tuple[int, int] | None:
    """Nanoseconds ``pid`` ran on a CPU and waited on a run queue (its schedstat), or None if unreadable."""
    try:
        with open(f"/proc/{pid}/schedstat", "rb") as f:
            fields = f.read().split()
        return int(fields[0]), int(fields[1])
    except (OSError, ValueError, IndexError):
        return None
