"""``ptyd dial-stdio``: stdin and stdout become one connection to this machine's daemon.

A client on another machine runs ``ssh host ptyd dial-stdio`` (as with ``docker system dial-stdio``): ssh
authenticates and carries the bytes, and the daemon sees a local connection of its own user, so its peer-uid
check and its tokens apply unchanged. ptyd never listens on a network itself.
"""

from __future__ import annotations

import contextlib
import os
import socket
import stat
import sys
import threading
from pathlib import Path

EXIT_UNAVAILABLE = 3  # as ptyctl's: the daemon is not reachable
CHUNK = 1 << 16


def unreachable_reason(path: Path, exc: OSError) -> str:
    """Why ``connect()`` to ``path`` failed, in words a person can act on."""
    if isinstance(exc, FileNotFoundError):
        # Over ssh, the far side's environment may put the default socket elsewhere than the daemon's.
        return (
            "no socket there: is ptyd running on this machine? (a daemon on another socket: "
            "PTYD_REMOTE_PTYD='ptyd --socket PATH' on the client's side)"
        )
    if isinstance(exc, ConnectionRefusedError):
        with contextlib.suppress(OSError):
            if not stat.S_ISSOCK(path.stat().st_mode):
                return "the path is not a socket"
        return "a stale socket: ptyd is not running"
    if isinstance(exc, PermissionError):
        return "permission denied (the socket belongs to another user)"
    return exc.strerror or str(exc)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _stdin_to_socket(sock: socket.socket) -> None:
    try:
        while data := os.read(sys.stdin.fileno(), CHUNK):
            sock.sendall(data)
    except OSError:
        pass
    finally:
        # The client is done sending: the daemon answers what it has and then closes, which ends the bridge.
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_WR)


def dial_stdio(path: Path) -> int:
    """Bridge stdin/stdout to the daemon at ``path`` until the daemon closes the connection."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    try:
        sock.connect(str(path))
    except OSError as exc:
        sock.close()
        print(f"ptyd dial-stdio: cannot reach ptyd at {path}: {unreachable_reason(path, exc)}", file=sys.stderr)
        return EXIT_UNAVAILABLE
    # Two blocking copies, one per direction, so neither can stall the other.
    threading.Thread(target=_stdin_to_socket, args=(sock,), name="stdin->ptyd", daemon=True).start()
    out = sys.stdout.fileno()
    try:
        while data := sock.recv(CHUNK):
            _write_all(out, data)
    except OSError:  # the client went away (a broken pipe), or the daemon reset the connection
        pass
    finally:
        sock.close()
    return 0
