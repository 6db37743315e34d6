"""The daemon's side of the fd keeper (``continuity.keeper``): start it with a secret, connect, take back what it
kept, keep it in step with the sessions, and supervise it.

Supervised: the keeper never speaks unprompted, so its connection turning readable outside ``take`` is its end.
A keeper that died is started again at once (off the loop, retried with backoff) and handed every master, so a
crash of the daemon after a keeper's crash still loses no session; meanwhile ``describe`` says crash continuity is
off, and daemon_info and ``ptyctl status`` show it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path

from ptyd.continuity.keeper import KEEPER_SOCKET, SECRET_FILE, new_secret, read_secret, receive, send

log = logging.getLogger("ptyd.keeper")

_START_WAIT_S = 5.0
_REPLY_WAIT_S = 5.0
_RESTART_BACKOFF_S = (0.0, 1.0, 2.0, 5.0, 10.0, 30.0)  # a keeper that cannot start is tried again, ever slower


def _start_keeper(directory: Path, grace_ms: float, secret: str) -> None:
    """``ptyd keeper`` in a session of its own (a Ctrl-C of `make run` is the daemon's, not the keeper's), its
    secret on stdin (a pipe, read and closed), stdout on /dev/null. Spawned, not a Popen the daemon would have to
    keep: it outlives the daemon by design (the daemon, a subreaper, reaps it if it dies)."""
    argv = [sys.executable, "-m", "ptyd", "keeper", "--dir", str(directory), "--grace-ms", str(int(grace_ms))]
    read_end, write_end = os.pipe2(os.O_CLOEXEC)
    devnull = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
    try:
        os.write(write_end, secret.encode() + b"\n")  # far below a pipe's buffer: never blocks
        os.close(write_end)
        write_end = -1
        os.posix_spawn(
            sys.executable,
            argv,
            os.environ,
            file_actions=[(os.POSIX_SPAWN_DUP2, read_end, 0), (os.POSIX_SPAWN_DUP2, devnull, 1)],
            setsid=True,
        )
    finally:
        for fd in (read_end, write_end, devnull):
            if fd >= 0:
                os.close(fd)


def _connect(path: Path) -> socket.socket | None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
    sock.settimeout(_REPLY_WAIT_S)  # a keeper that stopped listening as this connected never answers
    try:
        sock.connect(str(path))
    except OSError:
        sock.close()
        return None
    return sock


def _open(directory: Path, grace_ms: float) -> socket.socket:
    """A connection to the directory's keeper, started if none listens, that has said HELLO (blocking)."""
    path = directory / KEEPER_SOCKET
    sock = _connect(path)
    if sock is None:
        secret = new_secret(directory)
        _start_keeper(directory, grace_ms, secret)
        deadline = time.monotonic() + _START_WAIT_S
        while sock is None and time.monotonic() < deadline:
            time.sleep(0.01)
            sock = _connect(path)
        if sock is None:
            raise OSError(f"the fd keeper did not start listening on {path}")
    else:
        secret = read_secret(directory)
    try:
        send(sock, f"HELLO {secret}")
    except OSError:
        sock.close()
        raise
    return sock


def _take(sock: socket.socket) -> dict[str, int]:
    """TAKE: every master the keeper holds, by session id (it keeps them too). Raises OSError when it refuses."""
    with contextlib.suppress(OSError):  # a keeper that refused the HELLO has hung up: its answer is still there
        send(sock, "TAKE")
    taken: dict[str, int] = {}
    while True:
        message, fds = receive(sock)
        verb, _, rest = message.partition(" ")
        if verb == "FDS":
            ids = rest.split()
            for fd in fds[len(ids) :]:  # more fds than names (a truncated message): none can be matched
                os.close(fd)
            taken.update(zip(ids, fds, strict=False))  # fewer fds than names: those sessions were not kept
            continue
        for fd in fds:
            os.close(fd)
        if verb == "OK":
            continue  # the answer to HELLO (a keeper from before the secret sends none)
        if verb == "END":
            return taken
        for fd in taken.values():
            os.close(fd)
        if verb == "REFUSED":
            raise OSError(f"the fd keeper refused this daemon: {rest}")
        raise OSError("the fd keeper closed the connection")


class Keeper:
    """The daemon's connection to its keeper. ``stored`` and ``sync`` are those of ``systemd.FdStore``, so the
    state saver keeps either one in step with the sessions."""

    def __init__(self, directory: Path, grace_ms: float, sock: socket.socket | None) -> None:
        self._directory = directory
        self._grace_ms = grace_ms
        self._sock: socket.socket | None = sock
        self._masters: Callable[[], dict[str, int]] | None = None
        self._restart: asyncio.Task[None] | None = None
        self.problem: str | None = None  # why crash continuity is off right now
        self.restarts = 0
        self.stored: set[str] = set()

    @classmethod
    def attach(cls, directory: Path, grace_ms: float) -> Keeper:
        """Connect to the keeper, started if none runs (blocking: run it off the loop)."""
        return cls(directory, grace_ms, _open(directory, grace_ms))

    @classmethod
    def failed(cls, directory: Path, grace_ms: float, why: str) -> Keeper:
        """No keeper yet (it did not start, or refused this daemon): one is tried again once supervised."""
        keeper = cls(directory, grace_ms, None)
        keeper.problem = f"{why}; trying again"
        return keeper

    def take(self) -> dict[str, int]:
        """Every master the keeper holds, by session id (blocking)."""
        assert self._sock is not None
        try:
            taken = _take(self._sock)
        except OSError:
            self._sock.close()
            self._sock = None
            raise
        self.stored = set(taken)
        return taken

    def describe(self) -> str:
        """daemon_info's crash_continuity."""
        return "keeper" if self.problem is None else f"none: {self.problem}"

    def sync(self, masters: dict[str, int]) -> None:
        """Store new masters and remove closed ones, without blocking the loop: a keeper that is behind (its socket
        buffer full) gets the rest at the next sync (the state saver's tick offers what ``stored`` lacks)."""
        sock = self._sock
        if sock is None:
            return
        sock.settimeout(0)  # non-blocking sends; take() and attach() wait for replies with the timeout
        try:
            for name in sorted(self.stored - masters.keys()):
                send(sock, f"REMOVE {name}")
                self.stored.discard(name)
            for name, fd in masters.items():
                if name not in self.stored:
                    send(sock, f"STORE {name}", [fd])
                    self.stored.add(name)
        except BlockingIOError:
            log.debug("the fd keeper is behind; the rest at the next sync")
        except OSError as exc:  # the keeper died: the sessions live on, but no longer past a crash
            self._lost(f"lost the fd keeper ({exc.strerror or exc})")
        finally:
            if self._sock is not None:
                self._sock.settimeout(_REPLY_WAIT_S)

    # --- supervision -------------------------------------------------------------------------------------------

    def supervise(self, masters: Callable[[], dict[str, int]]) -> None:
        """From now on a keeper that dies is started again and handed ``masters()`` (on the loop)."""
        self._masters = masters
        if self._sock is None:
            self._restart = asyncio.get_running_loop().create_task(self._start_again(), name="fd keeper restart")
        self._watch()

    def _watch(self) -> None:
        if self._sock is not None and self._masters is not None:
            asyncio.get_running_loop().add_reader(self._sock.fileno(), self._readable)

    def _readable(self) -> None:
        sock = self._sock
        if sock is None:
            return
        try:
            data = sock.recv(4096, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._lost("the fd keeper died")

    def _lost(self, why: str) -> None:
        sock, self._sock = self._sock, None
        if sock is None:
            return
        with contextlib.suppress(ValueError, RuntimeError):  # not watched yet, or the loop is gone
            asyncio.get_running_loop().remove_reader(sock.fileno())
        sock.close()
        self.stored = set()
        self.problem = f"{why}; starting another"
        log.warning("%s: a crash of this daemon would end its sessions until another holds them", why)
        if self._masters is not None and self._restart is None:
            self._restart = asyncio.get_running_loop().create_task(self._start_again(), name="fd keeper restart")

    async def _start_again(self) -> None:
        try:
            for attempt in range(sys.maxsize):
                await asyncio.sleep(_RESTART_BACKOFF_S[min(attempt, len(_RESTART_BACKOFF_S) - 1)])
                try:
                    sock = await asyncio.to_thread(_open, self._directory, self._grace_ms)
                except OSError as exc:
                    self.problem = f"cannot start another fd keeper ({exc}); trying again"
                    log.warning("%s", self.problem)
                    continue
                try:
                    for fd in (await asyncio.to_thread(_take, sock)).values():
                        os.close(fd)  # this daemon holds its masters itself
                except OSError as exc:
                    sock.close()
                    self.problem = f"{exc}; trying again"
                    log.warning("%s", self.problem)
                    continue
                self._sock, self.problem = sock, None
                self.restarts += 1
                assert self._masters is not None
                self.sync(self._masters())
                self._watch()
                log.info("started another fd keeper: it holds the %d sessions' terminals", len(self.stored))
                return
        finally:
            self._restart = None

    async def bye(self) -> None:
        """A clean shutdown: no more restarts; the keeper lets go of everything and exits."""
        if self._restart is not None:
            self._restart.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._restart
        sock, self._sock = self._sock, None
        if sock is not None:
            with contextlib.suppress(ValueError, RuntimeError):
                asyncio.get_running_loop().remove_reader(sock.fileno())
            with contextlib.suppress(OSError):
                send(sock, "BYE")
            sock.close()
        with contextlib.suppress(OSError):
            (self._directory / SECRET_FILE).unlink()
