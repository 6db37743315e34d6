"""The fd keeper: what systemd's fd store is to ptyd.service, for a daemon that runs without a service manager.

With ``fd_keeper = true`` and no systemd fd store, the daemon starts ``ptyd keeper`` once (a process of its own,
in a session of its own) and hands it each session's PTY master as sessions come and go. Holding a master keeps
the PTY alive, so when the daemon dies (a crash, SIGKILL) the programs run on without a hangup; the next daemon
takes the masters back and adopts the sessions, exactly as after a crash under systemd (``continuity.adoption``). A
clean shutdown says goodbye and the keeper exits; a keeper left without a daemon for ``fd_keeper_grace_ms``
closes the masters (the programs get their hangup, the next daemon kills what is left) and exits.

The wire: a SOCK_SEQPACKET Unix socket ``keeper.sock`` beside the daemon's (0600 in the 0700 runtime directory,
peers of another uid refused), one message a request: ``STORE name`` with one fd, ``REMOVE name``, ``TAKE``
(answered by ``FDS name...`` messages carrying the fds, then ``END``) and ``BYE``.
"""

from __future__ import annotations

import array
import contextlib
import logging
import os
import select
import socket
import struct
import sys
import time
from pathlib import Path

KEEPER_SOCKET = "keeper.sock"
_BATCH = 200  # fds a message (the kernel takes at most 253)
_MAX_MESSAGE = 65536
_START_WAIT_S = 5.0
_REPLY_WAIT_S = 5.0

log = logging.getLogger("ptyd.keeper")


def _send(sock: socket.socket, text: str, fds: list[int] | None = None) -> None:
    ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds).tobytes())] if fds else []
    sock.sendmsg([text.encode()], ancillary)


def _receive(sock: socket.socket) -> tuple[str, list[int]]:
    """One message and the fds it carries ("" at the end of the connection)."""
    fds = array.array("i")
    data, ancillary, _, _ = sock.recvmsg(_MAX_MESSAGE, socket.CMSG_SPACE(_BATCH * fds.itemsize))
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
    for fd in fds:
        os.set_inheritable(fd, False)
    return data.decode(errors="replace"), list(fds)


def _peer_uid(sock: socket.socket) -> int:
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return int(struct.unpack("3i", creds)[1])


# --- the keeper process ---------------------------------------------------------------------------------------


def serve(directory: Path, grace_s: float) -> int:
    """Run the keeper for the daemon whose runtime directory is ``directory`` (``ptyd keeper``)."""
    listener = _bind(directory / KEEPER_SOCKET)
    if listener is None:
        return 0  # another keeper serves this directory
    kept: dict[str, int] = {}
    daemon: socket.socket | None = None
    alone_since: float | None = time.monotonic()  # no daemon connected: since when
    with listener:
        while True:
            if alone_since is not None and time.monotonic() - alone_since >= grace_s:
                break  # the daemon died and none came back: its sessions get their hangup
            watched = [listener] if daemon is None else [listener, daemon]
            wait = None if alone_since is None else max(0.0, alone_since + grace_s - time.monotonic())
            ready, _, _ = select.select(watched, [], [], wait)
            if listener in ready:
                try:
                    conn, _ = listener.accept()
                except OSError:
                    continue
                if _peer_uid(conn) != os.getuid():
                    conn.close()
                    continue
                if daemon is not None:  # a new daemon (after a handover's exec) replaces the one it was...
                    _drain(daemon, kept)  # ...once what the old one sent last is done
                    daemon.close()
                daemon, alone_since = conn, None
                continue
            if daemon is not None and daemon in ready:
                try:
                    message, fds = _receive(daemon)
                    if message and not _handle(daemon, message, fds, kept):
                        break
                except OSError:  # the daemon went while it was answered: as if it had just closed
                    message = ""
                if not message:
                    daemon.close()
                    daemon, alone_since = None, time.monotonic()
                    if not kept:
                        break  # nothing to keep for a next daemon
    if daemon is not None:
        daemon.close()
    for fd in kept.values():
        os.close(fd)
    with contextlib.suppress(OSError):
        (directory / KEEPER_SOCKET).unlink()
    return 0


def _drain(daemon: socket.socket, kept: dict[str, int]) -> None:
    """Act on the requests a connection still holds."""
    daemon.setblocking(False)
    while True:
        try:
            message, fds = _receive(daemon)
        except OSError:  # nothing more now (or the connection is gone)
            return
        if not message or not _handle(daemon, message, fds, kept):
            return


def _handle(daemon: socket.socket, message: str, fds: list[int], kept: dict[str, int]) -> bool:
    """Act on one request; False for BYE."""
    verb, _, name = message.partition(" ")
    if verb == "STORE" and name and len(fds) == 1:
        old = kept.pop(name, None)
        if old is not None:
            os.close(old)
        kept[name] = fds.pop()
    elif verb == "REMOVE":
        old = kept.pop(name, None)
        if old is not None:
            os.close(old)
    elif verb == "TAKE":
        items = sorted(kept.items())
        for start in range(0, len(items), _BATCH):
            batch = items[start : start + _BATCH]
            _send(daemon, "FDS " + " ".join(n for n, _ in batch), [fd for _, fd in batch])
        _send(daemon, "END")
    elif verb == "BYE":
        return False
    for fd in fds:  # fds with a request that takes none
        os.close(fd)
    return True


def _bind(path: Path) -> socket.socket | None:
    """The keeper's listening socket, or None when a live keeper already listens there."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
    with probe:
        try:
            probe.connect(str(path))
            return None
        except OSError:
            pass
    with contextlib.suppress(FileNotFoundError):
        path.unlink()  # a dead keeper's
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
    old_umask = os.umask(0o177)
    try:
        listener.bind(str(path))
    finally:
        os.umask(old_umask)
    listener.listen(4)
    return listener


# --- the daemon's side ------------------------------------------------------------------------------------------


def _start_keeper(directory: Path, grace_ms: float) -> None:
    """``ptyd keeper`` in a session of its own (a Ctrl-C of `make run` is the daemon's, not the keeper's), stdin and
    stdout on /dev/null. Spawned, not a Popen the daemon would have to keep: it outlives the daemon by design."""
    argv = [sys.executable, "-m", "ptyd", "keeper", "--dir", str(directory), "--grace-ms", str(int(grace_ms))]
    devnull = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
    try:
        os.posix_spawn(
            sys.executable,
            argv,
            os.environ,
            file_actions=[(os.POSIX_SPAWN_DUP2, devnull, 0), (os.POSIX_SPAWN_DUP2, devnull, 1)],
            setsid=True,
        )
    finally:
        os.close(devnull)


class Keeper:
    """The daemon's connection to its keeper, started if none runs. ``stored`` and ``sync`` are those of
    ``systemd.FdStore``, so the state saver keeps either one in step with the sessions."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._lost = False
        self.stored: set[str] = set()

    @classmethod
    def attach(cls, directory: Path, grace_ms: float) -> Keeper:
        path = directory / KEEPER_SOCKET
        sock = _connect(path)
        if sock is None:
            _start_keeper(directory, grace_ms)
            deadline = time.monotonic() + _START_WAIT_S
            while sock is None and time.monotonic() < deadline:
                time.sleep(0.01)
                sock = _connect(path)
            if sock is None:
                raise OSError(f"the fd keeper did not start listening on {path}")
        return cls(sock)

    def take(self) -> dict[str, int]:
        """Every master the keeper holds, by session id (it keeps them too)."""
        _send(self._sock, "TAKE")
        taken: dict[str, int] = {}
        while True:
            message, fds = _receive(self._sock)
            verb, _, names = message.partition(" ")
            if verb != "FDS":
                for fd in fds:
                    os.close(fd)
                break
            ids = names.split()
            for fd in fds[len(ids) :]:  # more fds than names (a truncated message): none can be matched
                os.close(fd)
            taken.update(zip(ids, fds, strict=False))  # fewer fds than names: those sessions were not kept
        self.stored = set(taken)
        return taken

    def sync(self, masters: dict[str, int]) -> None:
        """Store new masters and remove closed ones, without blocking the loop: a keeper that is behind (its socket
        buffer full) gets the rest at the next sync (the state saver's tick offers what ``stored`` lacks)."""
        if self._lost:
            return
        self._sock.settimeout(0)  # non-blocking sends; take() and attach() wait for replies with the timeout
        try:
            for name in sorted(self.stored - masters.keys()):
                _send(self._sock, f"REMOVE {name}")
                self.stored.discard(name)
            for name, fd in masters.items():
                if name not in self.stored:
                    _send(self._sock, f"STORE {name}", [fd])
                    self.stored.add(name)
        except BlockingIOError:
            log.debug("the fd keeper is behind; the rest at the next sync")
        except OSError as exc:  # the keeper died: the sessions live on, but no longer past a crash
            self._lost = True
            log.warning("lost the fd keeper (%s): a crash of this daemon now ends its sessions", exc)
        finally:
            self._sock.settimeout(_REPLY_WAIT_S)

    def bye(self) -> None:
        """A clean shutdown: the keeper lets go of everything and exits."""
        with contextlib.suppress(OSError):
            _send(self._sock, "BYE")
        self._sock.close()


def _connect(path: Path) -> socket.socket | None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
    sock.settimeout(_REPLY_WAIT_S)  # a keeper that stopped listening as this connected never answers
    try:
        sock.connect(str(path))
    except OSError:
        sock.close()
        return None
    return sock
