"""Sockets opened inside another process's network namespace.

A socket belongs to the network namespace it was created in, whatever its holder does next. Some kernel questions
are asked per namespace (sock_diag: who holds the other end of a Unix socket), and a sandboxed session has a
namespace of its own (pasta's), where the daemon's sockets see nothing. So a child of the daemon joins that
namespace (first the user namespace that owns it, where the daemon is not root: ``setns`` needs the capability
there), opens the socket and hands it back over a socket pair, and exits. It joins no other namespace (the
sandbox's processes cannot see it) and is not dumpable meanwhile; it runs no Python but what is already loaded.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import socket

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
NS_GET_USERNS = 0xB701  # _IO(0xb7, 0x1): the user namespace that owns a namespace, as a new fd
PR_SET_DUMPABLE = 4
_libc = ctypes.CDLL(None, use_errno=True)


def namespace_of(pid: int) -> int | None:
    """The inode of ``pid``'s network namespace (None: unreadable, or the process is gone)."""
    try:
        return os.stat(f"/proc/{pid}/ns/net").st_ino
    except OSError:
        return None


def own_namespace() -> int | None:
    return namespace_of(os.getpid())


def socket_inside(pid: int, family: int, kind: int, proto: int) -> socket.socket | None:
    """A socket created in ``pid``'s network namespace; None where that cannot be done (the process is gone, or
    the daemon may not join its namespace)."""
    try:
        net = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        child = os.fork()
        if child == 0:  # pragma: no cover (the child's coverage is not collected)
            _open_and_hand_back(net, theirs, family, kind, proto)
        theirs.close()
        try:
            ours.settimeout(2.0)
            _, fds, _, _ = socket.recv_fds(ours, 1, 1)
        except OSError:
            fds = []
        finally:
            os.waitpid(child, 0)
        return socket.socket(fileno=fds[0]) if fds else None
    except OSError:
        return None
    finally:
        ours.close()
        theirs.close()
        os.close(net)


def _open_and_hand_back(net: int, back: socket.socket, family: int, kind: int, proto: int) -> None:
    """In the forked child: never returns."""
    code = 1
    with contextlib.suppress(BaseException):
        _libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
        joined = _libc.setns(net, CLONE_NEWNET) == 0
        if not joined:  # not root: join the namespace's owner first, where the daemon's user has the capability
            owner = fcntl.ioctl(net, NS_GET_USERNS)
            joined = _libc.setns(owner, CLONE_NEWUSER) == 0 and _libc.setns(net, CLONE_NEWNET) == 0
        if joined:
            made = socket.socket(family, kind, proto)
            socket.send_fds(back, [b"s"], [made.fileno()])
            code = 0
    os._exit(code)
