"""The kernel's socket diagnostics (sock_diag, what ``ss`` asks), in a process's own network namespace.

Three questions are asked of it: who holds the other end of a Unix socket (``readiness.sockets``), which TCP
sockets listen (``session.listening``), and whose a loopback TCP connection is (``ptyd.loopback``). The last two
replace reading ``/proc/PID/net/tcp``, whose read walks every bucket of the kernel's connection hash table
whatever it holds: 4-5 ms a table on these machines, so 9 ms of every result of a session whose program holds
any socket (IPython's asyncio wake-up pair), and 5 ms of each connection to a loopback HTTP port. A dump of
listening sockets walks only the listening table; a connection is looked up by its addresses.

The answers are per network namespace: a sandboxed session has one of its own (pasta's), where the daemon's
netlink socket sees nothing, so a socket opened inside it (``netns.socket_inside``) is kept for its next questions.
"""

from __future__ import annotations

import functools
import ipaddress
import itertools
import os
import socket
import struct

from ptyd.backends.os import netns

NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLM_F_REQUEST = 0x1
NLM_F_DUMP = 0x300
NLMSG_ERROR = 2
NLMSG_DONE = 3
HEADER = struct.Struct("=IHHII")  # nlmsghdr: length, type, flags, sequence, port
_INET_REQUEST = struct.Struct("=BBBBI48x")  # inet_diag_req_v2: family, protocol, ext, pad, states, sockid (any)
_INET_ONE = struct.Struct("=BBBBI2s2s16s16sIII")  # ...with its sockid: ports, addresses, interface, cookie
_NO_COOKIE = 0xFFFFFFFF
_INET_REPLY = struct.Struct("=BBBB2s2s16s16sIQIIIII")  # inet_diag_msg: ..., sockid, expires, queues, uid, inode
_TCP_LISTEN = 10
_NAMESPACES_MAX = 32

_namespaces: dict[int, socket.socket] = {}  # network namespace (inode) -> a sock_diag socket opened in it
_sequence = itertools.count(1)


def ask(pid: int, request: bytes, *, dump: bool = False) -> list[bytes] | None:
    """The replies (each message's payload, its header first) to one sock_diag ``request`` asked in ``pid``'s
    network namespace; ``dump``: a multi-part answer, read to its end. None when it cannot be asked."""
    namespace = netns.namespace_of(pid)
    if namespace is None:
        return None
    if namespace == _own_namespace():
        try:
            with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC, NETLINK_SOCK_DIAG) as nl:
                return _query(nl, request, dump)
        except OSError:
            return None
    kept = _inside(pid, namespace)
    if kept is None:
        return None
    try:
        return _query(kept, request, dump)
    except OSError:
        _namespaces.pop(namespace).close()  # opened afresh for the next question
        return None


def tcp_listeners(pid: int) -> dict[int, tuple[str, int]] | None:
    """The listening TCP sockets of ``pid``'s network namespace: inode -> (address, port); None: not known."""
    found: dict[int, tuple[str, int]] = {}
    for family in (socket.AF_INET, socket.AF_INET6):
        replies = ask(pid, _INET_REQUEST.pack(family, socket.IPPROTO_TCP, 0, 0, 1 << _TCP_LISTEN), dump=True)
        if replies is None:
            return None
        for reply in replies:
            if len(reply) < HEADER.size + _INET_REPLY.size:
                continue
            fields = _INET_REPLY.unpack_from(reply, HEADER.size)
            kind, state, sport, source, inode = fields[0], fields[1], fields[4], fields[6], fields[-1]
            if state != _TCP_LISTEN:
                continue
            raw = source[:4] if kind == socket.AF_INET else source
            found[inode] = (str(ipaddress.ip_address(raw)), int.from_bytes(sport, "big"))
    return found


def tcp_owner(local: tuple[str, int], remote: tuple[str, int]) -> int | None:
    """The uid owning this network namespace's TCP socket whose own end is ``local`` and whose peer is ``remote``
    (one lookup by the connection's addresses: no table walked); None when there is none."""
    try:
        here, there = ipaddress.ip_address(local[0]), ipaddress.ip_address(remote[0])
    except ValueError:
        return None
    if here.version != there.version:
        return None
    family = socket.AF_INET if here.version == 4 else socket.AF_INET6
    request = _INET_ONE.pack(
        family, socket.IPPROTO_TCP, 0, 0, 0xFFFFFFFF,  # any state
        local[1].to_bytes(2, "big"), remote[1].to_bytes(2, "big"),
        here.packed.ljust(16, b"\0"), there.packed.ljust(16, b"\0"),
        0, _NO_COOKIE, _NO_COOKIE,
    )  # fmt: skip
    replies = ask(os.getpid(), request)
    if not replies or len(replies[0]) < HEADER.size + _INET_REPLY.size:
        return None
    return int(_INET_REPLY.unpack_from(replies[0], HEADER.size)[-2])


def _query(nl: socket.socket, request: bytes, dump: bool) -> list[bytes] | None:
    """One question on ``nl``: replies to an earlier one that timed out are passed over by their sequence."""
    sequence = next(_sequence) & 0xFFFFFFFF
    nl.settimeout(0.1)
    flags = NLM_F_REQUEST | (NLM_F_DUMP if dump else 0)
    nl.sendto(HEADER.pack(HEADER.size + len(request), SOCK_DIAG_BY_FAMILY, flags, sequence, 0) + request, (0, 0))
    out: list[bytes] = []
    while True:
        buffer = nl.recv(65536)
        offset = 0
        while offset + HEADER.size <= len(buffer):
            length, kind, _, seq, _ = HEADER.unpack_from(buffer, offset)
            if length < HEADER.size:
                return None
            message = buffer[offset : offset + length]
            offset += (length + 3) & ~3
            if seq != sequence:
                continue
            if kind == NLMSG_ERROR:
                return out if not dump else None
            if kind == NLMSG_DONE:
                return out
            out.append(message)
        if not dump and out:
            return out


def _inside(pid: int, namespace: int) -> socket.socket | None:
    """A sock_diag socket of ``pid``'s network namespace: opened there once (a child of the daemon joins it), kept
    for the namespace's next questions."""
    nl = _namespaces.pop(namespace, None)
    if nl is None:
        nl = netns.socket_inside(pid, socket.AF_NETLINK, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC, NETLINK_SOCK_DIAG)
        if nl is None:
            return None
        while len(_namespaces) >= _NAMESPACES_MAX:  # the oldest asked (its sessions are likely gone)
            _namespaces.pop(next(iter(_namespaces))).close()
    _namespaces[namespace] = nl
    return nl


@functools.cache
def _own_namespace() -> int | None:
    return netns.own_namespace()
