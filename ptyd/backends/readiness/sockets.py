"""Whether a socket in a program's wait set leads out of the program, asked of the kernel's sock_diag.

A socket beside the tty in a multiplexed wait usually means a relay (ssh's TCP connection, docker exec's socket
to dockerd). But event loops wake themselves through a socket pair they hold both ends of: asyncio's self-pipe
(IPython, prompt_toolkit and Textual apps, ``python -m asyncio``), and such a socket leads nowhere. The peer of a
Unix socket is only known to the kernel's socket diagnostics (``ss -x`` asks the same), one netlink round trip.
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct

from ptyd.backends.os import procfs, sock_diag

_UDIAG_SHOW_PEER = 0x4
_UNIX_DIAG_PEER = 2
_NO_COOKIE = 0xFFFFFFFF
_REQUEST = struct.Struct("=BBHIIIII")  # unix_diag_req: family, protocol, pad, states, inode, show, cookie
_REPLY = struct.Struct("=BBBBIII")  # unix_diag_msg: family, type, state, pad, inode, cookie
_ATTR = struct.Struct("=HH")  # rtattr: length, type

_peer_of: dict[int, int | None] = {}  # socket inode -> its peer's inode (a pair's ends never change)
_leads_out: dict[tuple[int, int], bool] = {}  # (pid, socket inode) -> leads out of the process
_CACHE_MAX = 4096


def unix_peer(inode: int, pid: int) -> int | None:
    """The inode of the other end of Unix socket ``inode`` of process ``pid``; None when it has none, is not a Unix
    socket, or the kernel will not say."""
    if inode in _peer_of:
        return _peer_of[inode]
    peer = _ask_peer(inode, pid)
    if len(_peer_of) >= _CACHE_MAX:
        _peer_of.clear()
    _peer_of[inode] = peer
    return peer


def _ask_peer(inode: int, pid: int) -> int | None:
    """Asked in ``pid``'s network namespace: sock_diag answers for the sockets of its own (a sandboxed session has
    pasta's, where a socket of the daemon's saw none: every asyncio REPL there was taken for a relay)."""
    request = _REQUEST.pack(socket.AF_UNIX, 0, 0, 0xFFFFFFFF, inode, _UDIAG_SHOW_PEER, _NO_COOKIE, _NO_COOKIE)
    replies = sock_diag.ask(pid, request)
    return _parse_peer(replies[0], inode) if replies else None


def _parse_peer(reply: bytes, inode: int) -> int | None:
    header = sock_diag.HEADER
    if len(reply) < header.size + _REPLY.size:
        return None
    length, kind, _, _, _ = header.unpack_from(reply)
    if kind == sock_diag.NLMSG_ERROR or _REPLY.unpack_from(reply, header.size)[4] != inode:
        return None
    offset = header.size + _REPLY.size
    end = min(length, len(reply))
    while offset + _ATTR.size <= end:
        size, attr = _ATTR.unpack_from(reply, offset)
        if size < _ATTR.size:
            return None
        if attr == _UNIX_DIAG_PEER and size >= _ATTR.size + 4:
            return int(struct.unpack_from("=I", reply, offset + _ATTR.size)[0])
        offset += (size + 3) & ~3
    return None


def socket_inode(link: str) -> int | None:
    """``socket:[123]`` (an fd's link in /proc) -> 123."""
    if not link.startswith("socket:[") or not link.endswith("]"):
        return None
    with contextlib.suppress(ValueError):
        return int(link[8:-1])
    return None


def leads_out(pid: int, link: str) -> bool:
    """A socket fd of ``pid`` (its /proc link) may carry the program's input and output elsewhere: anything but a
    Unix socket whose other end ``pid`` holds itself (an event loop's wake-up pair). Remembered per process and
    socket: every probe of an asyncio REPL asks again, and the answer means a walk of its fds."""
    inode = socket_inode(link)
    if inode is None:
        return True
    key = (pid, inode)
    if key not in _leads_out:
        if len(_leads_out) >= _CACHE_MAX:
            _leads_out.clear()
        _leads_out[key] = _peer_elsewhere(pid, inode)
    return _leads_out[key]


def _peer_elsewhere(pid: int, inode: int) -> bool:
    peer = unix_peer(inode, pid)
    if peer is None:
        return True
    wanted = f"socket:[{peer}]"
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return True
    return not any(procfs.fd_target(pid, int(fd)) == wanted for fd in fds)
