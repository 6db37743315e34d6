"""The fd keeper: what systemd's fd store is to ptyd.service, for a daemon that runs without a service manager.

With ``fd_keeper = true`` and no systemd fd store, the daemon starts ``ptyd keeper`` (a process of its own, in a
session of its own) and hands it each session's PTY master as sessions come and go. Holding a master keeps the
PTY alive, so when the daemon dies (a crash, SIGKILL) the programs run on without a hangup; the next daemon takes
the masters back and adopts the sessions, exactly as after a crash under systemd (``continuity.adoption``). A
clean shutdown says goodbye and the keeper exits; a keeper left without a daemon for ``fd_keeper_grace_ms``
closes the masters (the programs get their hangup, the next daemon kills what is left) and exits. The daemon's
side, and its supervision of the keeper, is ``continuity.keeper_link``.

The wire: a SOCK_SEQPACKET Unix socket ``keeper.sock`` beside the daemon's (0600 in the 0700 runtime directory,
peers of another uid refused), one message a request. A connection's first message must be ``HELLO secret``,
the secret the daemon handed the keeper on its stdin when it started it (and keeps 0600 in ``keeper.key`` for
the next daemon): anything else, or a wrong secret, is answered ``REFUSED`` and the connection closed, so a
program that merely reaches the socket gets no PTY master. While a daemon is connected a second one is refused
too (no displacement: the live daemon's crash continuity stays); one whose predecessor's connection has ended (a
handover's exec, a crash) is answered ``OK`` and takes its place. Then: ``STORE name`` with one fd,
``REMOVE name``, ``TAKE`` (answered by ``FDS name...`` messages carrying the fds, then ``END``) and ``BYE``.
"""

from __future__ import annotations

import array
import contextlib
import hmac
import logging
import os
import secrets
import select
import socket
import struct
import sys
import time
from pathlib import Path

KEEPER_SOCKET = "keeper.sock"
SECRET_FILE = "keeper.key"  # noqa: S105 - a file name; the secret is in it, 0600
_BATCH = 200  # fds a message (the kernel takes at most 253)
_MAX_MESSAGE = 65536
_HELLO_WAIT_S = 5.0  # a connection that has not said HELLO by then is closed
_MAX_PENDING = 8  # connections waiting to say HELLO: past it the oldest is closed

log = logging.getLogger("ptyd.keeper")


def send(sock: socket.socket, text: str, fds: list[int] | None = None) -> None:
    ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds).tobytes())] if fds else []
    sock.sendmsg([text.encode()], ancillary)


def receive(sock: socket.socket) -> tuple[str, list[int]]:
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


def new_secret(directory: Path) -> str:
    """A fresh secret for a keeper about to start, kept 0600 beside the socket for the daemons that come next."""
    secret = secrets.token_hex(32)
    path = directory / SECRET_FILE
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secret + "\n")
    os.replace(tmp, path)
    return secret


def read_secret(directory: Path) -> str:
    """The running keeper's secret ("" if none is kept: such a keeper refuses this daemon)."""
    try:
        return (directory / SECRET_FILE).read_text().strip()
    except OSError:
        return ""


def secret_from_stdin() -> str:
    """``ptyd keeper``'s secret: the first line of its stdin (a pipe the daemon wrote and closed), never argv
    or the environment, which other processes can read in /proc. Stdin is /dev/null afterwards."""
    secret = sys.stdin.readline().strip()
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    return secret


# --- the keeper process ---------------------------------------------------------------------------------------


def serve(directory: Path, grace_s: float, secret: str) -> int:
    """Run the keeper for the daemon whose runtime directory is ``directory`` (``ptyd keeper``)."""
    if not secret:
        print("ptyd keeper: no secret on stdin (the daemon starts the keeper itself)", file=sys.stderr)
        return 2
    listener = _bind(directory / KEEPER_SOCKET)
    if listener is None:
        return 0  # another keeper serves this directory
    kept: dict[str, int] = {}
    daemon: socket.socket | None = None
    pending: dict[socket.socket, float] = {}  # connections yet to say HELLO, and until when they may
    refused: dict[socket.socket, float] = {}  # answered REFUSED: until they hang up, or until when at most
    alone_since: float | None = time.monotonic()  # no daemon connected: since when
    with listener:
        while True:
            now = time.monotonic()
            if alone_since is not None and now - alone_since >= grace_s:
                break  # the daemon died and none came back: its sessions get their hangup
            for waiting in (pending, refused):
                for conn in [c for c, deadline in waiting.items() if deadline <= now]:
                    del waiting[conn]
                    conn.close()
            deadlines = [*pending.values(), *refused.values()]
            if alone_since is not None:
                deadlines.append(alone_since + grace_s)
            wait = max(0.0, min(deadlines) - now) if deadlines else None
            watched = [listener, *pending, *refused] + ([daemon] if daemon is not None else [])
            ready = _ready(watched, wait)
            if listener in ready:
                _accept(listener, pending)
            for conn in [c for c in refused if c in ready]:
                if not _discard(conn):
                    del refused[conn]
                    conn.close()
            said_bye = replaced = False
            for conn in [c for c in pending if c in ready]:
                del pending[conn]
                verdict = _hello(conn, secret, daemon, kept)
                said_bye = verdict == "bye"
                if said_bye:
                    break
                if verdict == "refused":
                    refused[conn] = time.monotonic() + _HELLO_WAIT_S
                if verdict == "accepted":
                    if daemon is not None:
                        daemon.close()  # a predecessor whose connection had ended
                    daemon, alone_since, replaced = conn, None, True
            if said_bye:
                break
            if daemon is None or replaced or daemon not in ready:
                continue  # (a new daemon's next request is read at the next turn: it may not be there yet)
            try:
                message, fds = receive(daemon)
                if message and not _handle(daemon, message, fds, kept):
                    break
            except OSError:  # the daemon went while it was answered: as if it had just closed
                message = ""
            if not message:
                daemon.close()
                daemon, alone_since = None, time.monotonic()
                if not kept:
                    break  # nothing to keep for a next daemon
    for conn in [*pending, *refused]:
        conn.close()
    if daemon is not None:
        daemon.close()
    for fd in kept.values():
        os.close(fd)
    with contextlib.suppress(OSError):
        (directory / KEEPER_SOCKET).unlink()
    return 0


def _ready(watched: list[socket.socket], wait: float | None) -> list[socket.socket]:
    """The sockets with something to read (or an end). poll, not select: with thousands of masters kept, a new
    connection's fd is past select's FD_SETSIZE (1024)."""
    poller = select.poll()
    for sock in watched:
        poller.register(sock, select.POLLIN)
    events = {fd for fd, _ in poller.poll(None if wait is None else wait * 1000)}
    return [sock for sock in watched if sock.fileno() in events]


def _accept(listener: socket.socket, pending: dict[socket.socket, float]) -> None:
    try:
        conn, _ = listener.accept()
    except OSError:
        return
    if _peer_uid(conn) != os.getuid():
        conn.close()
        return
    if len(pending) >= _MAX_PENDING:  # connections that say nothing cannot pile up
        oldest = next(iter(pending))
        del pending[oldest]
        oldest.close()
    pending[conn] = time.monotonic() + _HELLO_WAIT_S


def _hello(conn: socket.socket, secret: str, daemon: socket.socket | None, kept: dict[str, int]) -> str:
    """A new connection's first message: "accepted" (it is the daemon now), "refused" (told so), or "bye" (the
    connected daemon's last requests, drained to decide, said goodbye)."""
    try:
        message, fds = receive(conn)
    except OSError:
        message, fds = "", []
    for fd in fds:  # a first message carries none
        os.close(fd)
    verb, _, given = message.partition(" ")
    if verb != "HELLO" or not hmac.compare_digest(given.encode(), secret.encode()):
        _refuse(conn, "no secret, or the wrong one")
        return "refused"
    if daemon is not None:
        # A new daemon replaces the one it was (a handover's exec closed that one's connection, a crash too),
        # once what the old one sent last is done; a daemon still connected is never displaced.
        state = _drain(daemon, kept)
        if state == "bye":
            _refuse(conn, "the daemon is shutting down")
            return "bye"
        if state == "open":
            _refuse(conn, "a daemon is connected")
            return "refused"
    with contextlib.suppress(OSError):
        send(conn, "OK")
    return "accepted"


def _refuse(conn: socket.socket, reason: str) -> None:
    """Say why; the caller lets the connection linger: closed with a request unread (a TAKE sent right after the
    HELLO), the peer would get a reset instead of the answer."""
    with contextlib.suppress(OSError):
        send(conn, f"REFUSED {reason}")


def _discard(conn: socket.socket) -> bool:
    """Read and drop a refused connection's requests; False once it has ended."""
    try:
        message, fds = receive(conn)
    except OSError:
        return False
    for fd in fds:
        os.close(fd)
    return bool(message)


def _drain(daemon: socket.socket, kept: dict[str, int]) -> str:
    """Act on the requests a connection still holds: "closed" once it has ended, "open" if it has not, "bye"."""
    daemon.setblocking(False)
    try:
        while True:
            try:
                message, fds = receive(daemon)
            except BlockingIOError:
                return "open"
            except OSError:
                return "closed"
            if not message:
                return "closed"
            if not _handle(daemon, message, fds, kept):
                return "bye"
    finally:
        with contextlib.suppress(OSError):
            daemon.setblocking(True)


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
            send(daemon, "FDS " + " ".join(n for n, _ in batch), [fd for _, fd in batch])
        send(daemon, "END")
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
    # Bound and listening under another name first: the path appears only once it answers. A daemon that found it
    # bound but not yet listening was refused, started a keeper of its own with a new secret, and its HELLO then
    # reached this one (which had the old secret): "no secret, or the wrong one".
    staged = path.with_name(f".{os.getpid()}.sock")  # short: a socket's path has 107 bytes at most
    with contextlib.suppress(FileNotFoundError):
        staged.unlink()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
    old_umask = os.umask(0o177)
    try:
        listener.bind(str(staged))
    finally:
        os.umask(old_umask)
    listener.listen(4)
    os.replace(staged, path)  # a dead keeper's is replaced
    return listener
