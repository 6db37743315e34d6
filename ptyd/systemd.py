"""The daemon's side of the systemd contract, spoken directly: it is a datagram and two environment variables.

No library: sd_notify is one ``sendto`` on a Unix datagram socket, and socket activation is fd 3 plus
``LISTEN_PID``/``LISTEN_FDS``; a dependency would add more code than it saves.
"""

from __future__ import annotations

import os
import socket

SD_LISTEN_FDS_START = 3


def listen_socket() -> socket.socket | None:
    """The listening socket passed by socket activation, or None when the daemon was not activated."""
    try:
        pid = int(os.environ.get("LISTEN_PID", ""))
        count = int(os.environ.get("LISTEN_FDS", ""))
    except ValueError:
        return None
    if pid != os.getpid() or count < 1:
        return None
    for name in ("LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"):
        os.environ.pop(name, None)  # not inherited by session programs
    for fd in range(SD_LISTEN_FDS_START, SD_LISTEN_FDS_START + count):
        os.set_inheritable(fd, False)  # only the first is served; none may leak into sessions
    sock = socket.socket(fileno=SD_LISTEN_FDS_START)
    if sock.family != socket.AF_UNIX or sock.type != socket.SOCK_STREAM:
        raise RuntimeError("the socket passed by systemd is not a Unix stream socket")
    return sock


def notify(message: str) -> bool:
    """Send ``message`` (e.g. ``READY=1``) to ``$NOTIFY_SOCKET``; False when there is none."""
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return False
    if address.startswith("@"):
        address = "\0" + address[1:]
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
        try:
            sock.sendto(message.encode(), address)
        except OSError:
            return False
    return True
