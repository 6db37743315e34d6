"""Which connections the daemon keeps: at most ``max_connections``, at most ``max_connections_per_peer`` from one
process, and none that has not authenticated within ``unauthenticated_connection_ms``.

Connections are the one resource a client gets without a token, so they are what a leaking or hostile process
would hoard: 1,024 idle connections used to lock every client out, ptyctl included, for as long as they stayed
open. A peer is the process at the other end (SO_PEERCRED's pid, taken when it connected). At ``max_connections``
the oldest connection that never authenticated makes room for the newcomer: it had its chance, and a client that
authenticates (a call with a valid token) is never displaced this way.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable
from typing import final

from ptyd.config import Config

log = logging.getLogger("ptyd.rpc")


@final
class Admitted:
    """One connection as admission sees it: its peer, whether it authenticated, and how to end it."""

    def __init__(self, admission: Admission, pid: int, abort: Callable[[], None]) -> None:
        self._admission = admission
        self.pid = pid
        self.abort = abort
        self.authenticated = False
        self.presenting = 0  # calls in flight that carry a token (a long send may be the first call)
        self.timer: asyncio.TimerHandle | None = None

    def authenticate(self) -> None:
        self._admission.authenticated(self)


@final
class Admission:
    def __init__(self, config: Config) -> None:
        self.config = config
        self._per_peer: Counter[int] = Counter()
        self._admitted: set[Admitted] = set()
        self._unauthenticated: dict[Admitted, None] = {}  # oldest first
        self._capped: set[int] = set()  # peers told once that they hold their share (the log is not flooded)

    def admit(self, pid: int, abort: Callable[[], None]) -> Admitted | None:
        """The connection's place, or None when it is refused (the caller closes it unanswered)."""
        config = self.config
        if self._per_peer[pid] >= config.max_connections_per_peer:
            if pid not in self._capped:
                self._capped.add(pid)
                log.info("refusing connections from pid %d: it holds max_connections_per_peer", pid)
            return None
        if len(self._admitted) >= config.max_connections:
            # Not one whose first call, carrying a token, is still running (a long send): it may yet authenticate.
            oldest = next((a for a in self._unauthenticated if not a.presenting), None)
            if oldest is None:
                log.info("refused a connection from pid %d: max_connections reached", pid)
                return None
            log.info("max_connections reached: closing a connection of pid %d that never authenticated", oldest.pid)
            self._end(oldest)
        admitted = Admitted(self, pid, abort)
        self._admitted.add(admitted)
        self._per_peer[pid] += 1
        self._unauthenticated[admitted] = None
        admitted.timer = asyncio.get_running_loop().call_later(
            config.unauthenticated_connection_ms / 1000, self._expire, admitted
        )
        return admitted

    def authenticated(self, admitted: Admitted) -> None:
        """The connection made a call with a valid token: it stays as long as its client keeps it."""
        if not admitted.authenticated:
            admitted.authenticated = True
            self._unauthenticated.pop(admitted, None)
            if admitted.timer is not None:
                admitted.timer.cancel()
                admitted.timer = None

    def release(self, admitted: Admitted) -> None:
        """The connection ended (any way): its slot and its peer's share are free again."""
        if admitted not in self._admitted:
            return
        self._admitted.discard(admitted)
        self._unauthenticated.pop(admitted, None)
        if admitted.timer is not None:
            admitted.timer.cancel()
            admitted.timer = None
        self._per_peer[admitted.pid] -= 1
        if self._per_peer[admitted.pid] <= 0:
            del self._per_peer[admitted.pid]
        if self._per_peer[admitted.pid] < self.config.max_connections_per_peer:
            self._capped.discard(admitted.pid)

    def _expire(self, admitted: Admitted) -> None:
        admitted.timer = None
        if admitted.presenting:  # its token is being checked or its call runs: judged when that call is done
            admitted.timer = asyncio.get_running_loop().call_later(
                self.config.unauthenticated_connection_ms / 1000, self._expire, admitted
            )
            return
        log.debug("closing a connection of pid %d: no authenticated call within its bound", admitted.pid)
        self._end(admitted)

    def _end(self, admitted: Admitted) -> None:
        self.release(admitted)  # at once: the slot is free before the connection's task has seen the abort
        admitted.abort()
