"""The engine workers: starting them, spreading sessions over them, and surviving their deaths (``link``: one
worker, its socket and its watchdog).

When a worker dies, a new one takes its place and each of its sessions is rebuilt there
(``RemoteTerminal.reopen``). Who is to blame depends on how it ended (``link.ENGINE_FAULTS``):

- Killed from outside (SIGKILL the pool did not send: an operator, a test, the OOM killer): nobody. Every
  session is rebuilt as it was.
- The engine failed (a fault signal, an error exit, or a hang its watchdog ended): a session with output in
  flight is a suspect. Suspects are replayed one at a time, every other session on that worker holding its new
  output meanwhile, and a session is guilty only when its own bytes, replayed alone, fail the engine again. That
  session moves to the pyte engine for good (``QUARANTINE_NOTE``), still in a worker: pyte raises where Ghostty
  panics. A probe ended any other way (a kill, an end that says nothing) stays a suspect and is replayed again.
- It died before its hello (while starting): nobody; it is retried with a backoff. After ``STARTUP_FAILURES`` in a
  row the pool pauses: sessions render in the daemon on pyte (``LocalLink``) with a log line and daemon_info's
  ``engine_workers.paused`` saying so, a worker is tried again after a backoff (up to ``BACKOFF_MAX_S``), and
  the first that starts takes every session back on its own engine. The pool never gives up for good.

A worker whose resident memory passes its ceiling (``engine_worker_rss_mb``) is replaced between frames: its
sessions are rebuilt in a new worker the same way, and it ends when its socket closes (``memory``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import final

from ptyd.terminal.workers import messages as m
from ptyd.terminal.workers.early import preload
from ptyd.terminal.workers.link import ENGINE_FAULTS, LocalLink, WorkerLink
from ptyd.terminal.workers.memory import rss_bytes
from ptyd.terminal.workers.proxy import Link, RemoteTerminal

log = logging.getLogger("ptyd.engine")
AFTER_TAKE_OVER_S = 0.001  # any delay: its timer fires at the loop's first turn, after the synchronous take-over

QUARANTINE_NOTE = "the native engine crashed on this session's output"
HUNG_NOTE = "the native engine hung on this session's output"
ERROR_NOTE = "the native engine failed on this session's output"
PAUSED_NOTE = "engine workers are paused (they die while starting): rendered in the daemon on pyte meanwhile"
STARTUP_FAILURES = 3  # workers in a row that die before their hello: the pool pauses
BACKOFF_S = 0.1  # a worker after one that died while starting waits this, doubled for each in a row
BACKOFF_MAX_S = 10.0  # ...at most: a paused pool tries again at least this often (a start costs ~0.3 s of CPU)
RSS_CHECK_S = 2.0  # how often the workers' resident sizes are read (only while sessions exist)
KILLS = frozenset({"SIGKILL", "SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT"})  # ends from outside


def verdict(status: str) -> bool | None:
    """Did the engine fail (True), was the worker ended from outside (False), or does its end not say (None)?"""
    if status in ENGINE_FAULTS or (status.startswith("exit status") and status != "exit status 0"):
        return True
    if status in KILLS:
        return False
    return None


@dataclass(frozen=True, slots=True)
class PoolInfo:
    """daemon_info's ``engine_workers``: what the pool went through, and where it stands."""

    workers: int  # started (said hello) and serving
    pids: list[int]  # ...their process ids
    rss_bytes: list[int]  # ...their resident sizes
    crashes: int  # workers that died after starting (hangs and kills included)
    hangs: int  # ...of which killed by their watchdog
    kills: int  # ...of which killed from outside (nobody's fault)
    start_failures: int  # workers that died before their hello
    restarts: int  # workers started to replace one
    recycled: int  # workers replaced for their memory
    quarantined: int  # sessions moved to pyte for good
    paused: str | None  # why sessions render in the daemon now, while workers are tried again


@final
class EnginePool:
    def __init__(
        self,
        size: int,
        loop: asyncio.AbstractEventLoop,
        *,
        stall_s: float,
        early_answers: bool = False,
        rss_limit: int = 0,
    ) -> None:
        self.size = size if size > 0 else (os.cpu_count() or 1)
        self.loop = loop
        self.early_answers = early_answers  # the daemon answers a session's queries until its worker is up
        self.stall_s = stall_s  # a worker with work outstanding and no frame back this long hangs: killed
        self.rss_limit = rss_limit  # bytes a worker may hold before it is replaced; 0: no ceiling
        self.links: list[WorkerLink] = []
        self.reaped: Callable[[int], str | None] | None = None  # the daemon's reaper: how a child it took ended
        self.spare: WorkerLink | None = None  # started beside them, to replace one at once (``_refill``)
        self.local: LocalLink | None = None  # set while the pool is paused
        self.paused: str | None = None
        self._retry: asyncio.TimerHandle | None = None
        self._rss_timer: asyncio.TimerHandle | None = None
        self._next_sid = 0
        self._failures = 0  # workers in a row that died before their hello
        self.crashes = 0
        self.hangs = 0
        self.kills = 0
        self.start_failures = 0
        self.restarts = 0
        self.recycled = 0
        self.quarantined = 0
        self._dead: list[int] = []  # workers that died, for ``close`` to reap where no reaper runs

    @property
    def broken(self) -> bool:
        return self.local is not None

    def exit_of(self, pid: int) -> str | None:
        return self.reaped(pid) if self.reaped is not None else None

    def new_sid(self) -> int:
        self._next_sid += 1
        return self._next_sid

    def info(self) -> PoolInfo:
        started = [link for link in self.links if link.hello]
        return PoolInfo(
            workers=len(started),
            pids=[link.pid for link in started],
            rss_bytes=[rss or 0 for rss in (rss_bytes(link.pid) for link in started)],
            crashes=self.crashes,
            hangs=self.hangs,
            kills=self.kills,
            start_failures=self.start_failures,
            restarts=self.restarts,
            recycled=self.recycled,
            quarantined=self.quarantined,
            paused=self.paused,
        )

    def warm(self, *, handed: bool = False) -> None:
        """Start every worker now (their interpreters start while the daemon does), and load what answers the
        first sessions' queries until they are up. ``handed``: a handover's new daemon, whose sessions wait
        unserved until it serves: the workers' processes start at the loop's first turn, after the take-over
        (their imports, ~0.5 s of CPU each, competed with it on 2 cores), and pyte is not preloaded (the sessions
        are restored, so their workers answer; a session opened before the workers are up loads it then)."""
        while not self.broken and len(self.links) < self.size:
            self._spawn(delay=AFTER_TAKE_OVER_S if handed else 0.0)
        if self.early_answers and not handed:
            preload()  # what answers meanwhile

    def _spawn(self, *, delay: float = 0.0, replacing: bool = False, spare: bool = False) -> WorkerLink | None:
        try:
            link = WorkerLink(self, delay=delay)
        except OSError as exc:
            self._failures += 1
            self.start_failures += 1
            self._pause(f"cannot start an engine worker: {exc}")
            return None
        link.rss_limit = self.rss_limit
        self.restarts += replacing
        if spare:
            self.spare = link
        else:
            self.links.append(link)
        return link

    def _refill(self, delay: float = 0.0) -> None:
        """Start the spare: a worker with no session, which takes a dead one's sessions without the ~1 s (3 s
        under load) an interpreter and the native library take to start."""
        if self.spare is None and not self.broken and self.links:
            self._spawn(delay=delay, spare=True)

    def _take_spare(self) -> WorkerLink | None:
        spare, self.spare = self.spare, None
        if spare is None or spare.dead:
            return None
        self.restarts += 1
        self.links.append(spare)
        return spare

    def attach(self, term: RemoteTerminal) -> Link:
        if not self.broken and len(self.links) < self.size:
            self._spawn()
        link: Link = self.local if self.local is not None else min(self.links, key=lambda wl: len(wl.sessions))
        link.sessions[term.sid] = term
        if isinstance(link, LocalLink):
            term.engine = "pyte"
            term.engine_note = PAUSED_NOTE
        if self._rss_timer is None and self.rss_limit:
            self._rss_timer = self.loop.call_later(RSS_CHECK_S, self._check_memory)
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
        if self.local is not None:
            self._resume()
        self._refill()  # once a worker is up: the spare's start does not slow the first ones'

    # --- pausing -----------------------------------------------------------------------------------------

    def _backoff(self) -> float:
        return min(BACKOFF_S * (1 << min(max(self._failures - 1, 0), 16)), BACKOFF_MAX_S)

    def _pause(self, why: str) -> None:
        """Render in the daemon on pyte until a worker starts; try one again after the backoff."""
        if self.local is None:
            self.local = LocalLink(self)
        delay = self._backoff()
        if self.paused is None:
            log.warning("engine workers paused: %s; sessions render in the daemon on pyte until one starts", why)
        self.paused = why
        if self._retry is None:
            log.info("trying an engine worker again in %.1f s", delay)
            self._retry = self.loop.call_later(delay, self._try_again)

    def _try_again(self) -> None:
        self._retry = None
        if self.local is not None and not self.links and self.spare is None:
            self._spawn(replacing=True)

    def _resume(self) -> None:
        """A worker started while paused: every session goes back to a worker, on the engine it had."""
        local, self.local, self.paused = self.local, None, None
        assert local is not None
        if not self.links:  # the spare of before the pause started
            self._take_spare()
        log.warning("engine workers started again: %d sessions go back to them", len(local.sessions))
        for term in list(local.sessions.values()):
            local.send(m.Close(sid=term.sid))
            target = min(self.links, key=lambda wl: len(wl.sessions))  # the one that started, and any starting
            target.sessions[term.sid] = term
            if term.engine_note == PAUSED_NOTE:
                term.engine_note = None
            term.reopen(target, term.wanted, held=False)
        local.sessions.clear()
        self._refill()

    # --- a worker died ---------------------------------------------------------------------------------

    def died(self, link: WorkerLink) -> None:
        if link in self.links:
            self.links.remove(link)
        if link is self.spare:
            self.spare = None
        if link.pid:
            self._dead.append(link.pid)
        sessions = list(link.sessions.values())
        hung = link.hung_s is not None
        status = "hung" if hung else link.status()
        fault = True if hung else verdict(status)
        if not link.hello:  # while starting: nobody's fault, whatever it rendered
            fault = None
            self._failures += 1
            self.start_failures += 1
            log.warning(
                "engine worker pid %d died (%s) while starting, with %d sessions", link.pid, status, len(sessions)
            )
        else:
            self.crashes += 1
            self.hangs += hung
            self.kills += fault is False
            if hung:
                log.warning(
                    "engine worker pid %d hung (no progress for %d ms with work outstanding): killed it, with %d"
                    " sessions: rebuilding them in a new worker",
                    link.pid,
                    (link.hung_s or 0) * 1000,
                    len(sessions),
                )
            else:
                log.warning(
                    "engine worker pid %d died (%s) with %d sessions: rebuilding them in a new worker",
                    link.pid,
                    status,
                    len(sessions),
                )
        delay = self._backoff() if self._failures else 0.0
        if sessions or link.hello:  # its sessions need a worker now (one that did not start leaves none to fill)
            target: Link | None = self.local or self._take_spare()
            if target is None and self._failures >= STARTUP_FAILURES:
                self._pause(f"{self._failures} workers in a row died while starting, the last: {status}")
            if target is None:
                target = self.local or self._spawn(delay=delay, replacing=True) or self.local
            assert target is not None
            self._rebuild(link, sessions, target, fault, HUNG_NOTE if hung else QUARANTINE_NOTE)
        elif self.local is not None:  # a worker tried while paused did not start: the next try, later
            self._pause(f"{self._failures} workers in a row died while starting, the last: {status}")
        self._refill(delay)

    def _rebuild(
        self, link: WorkerLink, sessions: list[RemoteTerminal], target: Link, fault: bool | None, note: str
    ) -> None:
        """``link``'s sessions on ``target``: the probe guilty if the engine failed on it, suspects held."""
        probe = link.probe
        for term in sessions:
            target.sessions[term.sid] = term
            if isinstance(target, LocalLink):
                if term.wanted != "pyte":
                    term.engine_note = PAUSED_NOTE
                term.reopen(target, "pyte", held=False)
                continue
            if probe is not None:
                suspect = term is probe or term in link.suspects
            else:
                suspect = term in link.suspects or (fault is not False and term.in_flight and term.engine != "pyte")
            if term is probe and fault is True:
                self._quarantine(term, target, note)
            elif suspect and isinstance(target, WorkerLink):
                term.reopen(target, term.engine, held=True)
                if term is probe:
                    target.suspects.appendleft(term)  # replayed first again
                else:
                    target.suspects.append(term)
            else:
                term.reopen(target, term.engine, held=False)
        if isinstance(target, WorkerLink):
            self._next_probe(target)

    # --- memory ------------------------------------------------------------------------------------------

    def _check_memory(self) -> None:
        """Replace a worker past its ceiling, between frames (a timer: no frame is half-handled)."""
        self._rss_timer = None
        for link in list(self.links):
            if not link.hello or link.dead or link.probe is not None or link.suspects:
                continue
            rss = rss_bytes(link.pid)
            if rss is None or rss <= link.rss_limit:
                link.fresh = False
                continue
            if link.fresh:  # a replacement past the ceiling as soon as it took its sessions: they need it
                link.rss_limit = 2 * rss
                link.fresh = False
                log.warning(
                    "engine worker pid %d holds %d MiB with its %d sessions, past the ceiling of %d MiB as soon as"
                    " it took them: its ceiling is %d MiB",
                    link.pid,
                    rss >> 20,
                    len(link.sessions),
                    self.rss_limit >> 20,
                    link.rss_limit >> 20,
                )
                continue
            self._recycle(link, rss)
        if self.rss_limit and any(link.sessions for link in self.links):
            self._rss_timer = self.loop.call_later(RSS_CHECK_S, self._check_memory)

    def _recycle(self, link: WorkerLink, rss: int) -> None:
        new = self._take_spare()
        if new is None:
            try:
                new = WorkerLink(self)
            except OSError:
                return  # it serves on: the next check tries again
            self.restarts += 1
            self.links.append(new)
        new.rss_limit, new.fresh = self.rss_limit, True
        self.recycled += 1
        log.warning(
            "engine worker pid %d holds %d MiB, past its ceiling of %d MiB: replacing it (pid %d), with %d sessions",
            link.pid,
            rss >> 20,
            link.rss_limit >> 20,
            new.pid,
            len(link.sessions),
        )
        self.links.remove(link)
        for term in list(link.sessions.values()):
            new.sessions[term.sid] = term
            term.reopen(new, term.engine, held=False)
        link.sessions.clear()
        link.retire()
        self._dead.append(link.pid)
        self._refill()

    def _quarantine(self, term: RemoteTerminal, target: Link, note: str) -> None:
        self.quarantined += 1
        term.wanted = "pyte"
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
        self._take_spare()
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
        for timer in (self._retry, self._rss_timer):
            if timer is not None:
                timer.cancel()
        self._take_spare()
        for link in self.links:
            link.close()
        self.links.clear()
        for pid in self._dead:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)


_pool: EnginePool | None = None


def shared_pool(size: int, stall_ms: int, rss_mb: int = 0) -> EnginePool:
    """The daemon's pool (one per event loop: in-process tests run several)."""
    global _pool
    loop = asyncio.get_running_loop()
    if _pool is None or _pool.loop is not loop:
        if _pool is not None:
            _pool.abandon()
        _pool = EnginePool(size, loop, stall_s=stall_ms / 1000, early_answers=True)
    _pool.stall_s = stall_ms / 1000
    _pool.rss_limit = rss_mb << 20
    return _pool


def pool_info() -> PoolInfo | None:
    """The daemon's pool's ``info``, if it has one."""
    return _pool.info() if _pool is not None else None
