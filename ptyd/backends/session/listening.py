"""Which TCP ports a session's processes listen on, read from /proc when a result or a status is built.

Nothing is polled: the session's processes' socket inodes (``/proc/PID/fd``) are matched against the listening
sockets of their network namespace, so an idle session costs nothing and a result costs a directory listing per
process (a few readlinks for a shell at its prompt), and, for one that holds a socket, a sock_diag dump of the
listening ones (``/proc/PID/net/tcp`` and ``tcp6``, state 0A, where sock_diag cannot be asked: 9 ms a result).
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
from collections.abc import Iterable

from ptyd import protocol as p
from ptyd.backends.os import sock_diag
from ptyd.backends.readiness.sockets import socket_inode

_LISTEN = "0A"  # TCP_LISTEN in /proc/net/tcp's st column
MAX_PORTS = 64  # a result lists at most this many: a server with thousands of ports is still one line of news


def _socket_inodes(pid: int) -> list[int]:
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return []
    inodes = []
    for fd in fds:
        with contextlib.suppress(OSError):
            inode = socket_inode(os.readlink(f"/proc/{pid}/fd/{fd}"))
            if inode is not None:
                inodes.append(inode)
    return inodes


def _address(hex_address: str) -> str:
    """/proc/net/tcp's address (host-order 32-bit words, in hex) as text."""
    raw = bytes.fromhex(hex_address)
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    return str(ipaddress.ip_address(words))


def _listening_sockets(pid: int) -> dict[int, tuple[str, int]]:
    """Listening TCP sockets of ``pid``'s network namespace: inode -> (address, port)."""
    asked = sock_diag.tcp_listeners(pid)
    return asked if asked is not None else _listening_in_proc(pid)


def _listening_in_proc(pid: int) -> dict[int, tuple[str, int]]:
    """The same from ``/proc/PID/net``, whose read walks the kernel's whole connection table (milliseconds)."""
    found: dict[int, tuple[str, int]] = {}
    for table in ("tcp", "tcp6"):
        try:
            with open(f"/proc/{pid}/net/{table}") as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if len(fields) < 10 or fields[3] != _LISTEN:
                continue
            address, _, port = fields[1].partition(":")
            with contextlib.suppress(ValueError):
                found[int(fields[9])] = (_address(address), int(port, 16))
    return found


def listening(pids: Iterable[int]) -> list[p.ListeningPort]:
    """The listening TCP ports held by ``pids``, by port, then address."""
    held = {pid: inodes for pid in pids if (inodes := _socket_inodes(pid))}
    if not held:
        return []
    tables: dict[str, dict[int, tuple[str, int]]] = {}  # per network namespace
    ports: dict[tuple[int, str], int] = {}  # -> the lowest pid: a forking server's workers share its socket
    for pid, inodes in held.items():
        try:
            netns = os.readlink(f"/proc/{pid}/ns/net")
        except OSError:
            continue
        if netns not in tables:
            tables[netns] = _listening_sockets(pid)
        table = tables[netns]
        for inode in inodes:
            if inode in table:
                address, port = table[inode]
                ports[port, address] = min(pid, ports.get((port, address), pid))
    return [p.ListeningPort(port=port, address=address, pid=pid) for (port, address), pid in sorted(ports.items())][
        :MAX_PORTS
    ]
