"""The daemon's side of the systemd contract, spoken directly: datagrams and a few environment variables.

No library: sd_notify is one ``sendmsg`` on a Unix datagram socket (with SCM_RIGHTS to store an fd), and socket
activation is fds from 3 on plus ``LISTEN_PID``/``LISTEN_FDS``/``LISTEN_FDNAMES``; a dependency would add more
code than it saves.

The file descriptor store keeps each session's PTY master in the service manager while the daemon runs, named
by the session id, so that a daemon restarted after a crash gets them back (among ``LISTEN_FDS``) and adopts
the sessions. It is used when ``$FDSTORE`` is set: systemd 254 and later set it to ``FileDescriptorStoreMax=``;
ptyd.service sets it itself for older ones.
"""

from __future__ import annotations

import array
import os
import socket
from dataclasses import dataclass, field

SD_LISTEN_FDS_START = 3
SESSION_FD_PREFIX = "pty-"  # stored fds are named by session id; session ids start with this


@dataclass(slots=True)
class Activation:
    """What systemd passed at start: the listening socket and the stored PTY masters by session id."""

    listener: socket.socket | None = None
    stored: dict[str, int] = field(default_factory=dict)


def activation() -> Activation:
    """The fds passed by socket activation and from the fd store; empty when the daemon was not activated."""
    found = Activation()
    try:
        pid = int(os.environ.get("LISTEN_PID", ""))
        count = int(os.environ.get("LISTEN_FDS", ""))
    except ValueError:
        return found
    names = os.environ.get("LISTEN_FDNAMES", "").split(":")
    for name in ("LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"):
        os.environ.pop(name, None)  # not inherited by session programs, nor by a handover's exec
    if pid != os.getpid() or count < 1:
        return found
    for index, fd in enumerate(range(SD_LISTEN_FDS_START, SD_LISTEN_FDS_START + count)):
        os.set_inheritable(fd, False)  # none may leak into sessions
        name = names[index] if index < len(names) else ""
        if name.startswith(SESSION_FD_PREFIX) and name not in found.stored:
            found.stored[name] = fd
        elif found.listener is None:
            sock = socket.socket(fileno=fd)
            if sock.family != socket.AF_UNIX or sock.type != socket.SOCK_STREAM:
                raise RuntimeError("the socket passed by systemd is not a Unix stream socket")
            found.listener = sock
        else:
            os.close(fd)  # a second socket, or a stored fd of a name used twice: nothing of ours
    return found


def notify(message: str, fds: list[int] | None = None) -> bool:
    """Send ``message`` (e.g. ``READY=1``) to ``$NOTIFY_SOCKET``, with ``fds`` attached; False when there is
    none or it cannot be reached."""
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return False
    if address.startswith("@"):
        address = "\0" + address[1:]
    ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds).tobytes())] if fds else []
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
        try:
            # Never blocks the daemon: a manager that does not keep up loses a status line, and an fd not
            # stored is offered again at the next change.
            sock.sendmsg([message.encode()], ancillary, socket.MSG_DONTWAIT, address)
        except OSError:
            return False
    return True


def fd_store_enabled() -> bool:
    try:
        return bool(os.environ.get("NOTIFY_SOCKET")) and int(os.environ.get("FDSTORE", "0")) > 0
    except ValueError:
        return False


class FdStore:
    """Keeps the service manager's fd store equal to the daemon's live sessions: each session's PTY master,
    named by its session id. ``FDPOLL=0``: systemd must not drop a PTY on a hangup; the next daemon decides."""

    def __init__(self, stored: set[str]) -> None:
        self.stored = stored  # what the store holds: at start, what systemd passed back (unused ones go first)

    def sync(self, masters: dict[str, int]) -> None:
        for name in sorted(self.stored - masters.keys()):
            notify(f"FDSTOREREMOVE=1\nFDNAME={name}")
            self.stored.discard(name)
        for name, fd in masters.items():
            if name not in self.stored and notify(f"FDSTORE=1\nFDNAME={name}\nFDPOLL=0", [fd]):
                self.stored.add(name)
