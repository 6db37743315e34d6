"""Who is at the other end of a loopback TCP connection: a port, unlike a socket file, has no permissions of its
own, so an HTTP server on 127.0.0.1 (ptyd-mcp's, ``ptyd web``) looks the connecting socket's owner up in the
kernel's socket table and serves only processes of its own user."""

from __future__ import annotations

import contextlib
import os
import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ptyd.backends.os import sock_diag

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Receive, Scope, Send

TCP_TABLE = Path("/proc/net/tcp")


def _address(field: str) -> tuple[str, int]:
    """``0100007F:1F90`` from /proc/net/tcp: the kernel prints the address as a native-endian integer."""
    host, port = field.split(":")
    return socket.inet_ntoa(int(host, 16).to_bytes(4, sys.byteorder)), int(port, 16)


def peer_uid(client: tuple[str, int], server: tuple[str, int]) -> int | None:
    """The uid owning the connecting socket of a loopback TCP connection: asked of sock_diag by the connection's
    addresses (0.1 ms), else found in the kernel's socket table (``owner_in_proc``)."""
    uid = sock_diag.tcp_owner(client, server)
    return uid if uid is not None else owner_in_proc(client, server)


def owner_in_proc(client: tuple[str, int], server: tuple[str, int]) -> int | None:
    """The same from /proc/net/tcp, whose read walks every connection bucket (4-5 ms here)."""
    with contextlib.suppress(OSError):
        for line in TCP_TABLE.read_text().splitlines()[1:]:
            fields = line.split()
            if _address(fields[1]) == client and _address(fields[2]) == server:
                return int(fields[7])
    return None


class SameUserOnly:
    """ASGI middleware: refuses (403) an HTTP request whose peer is not a process of this server's user."""

    def __init__(self, app: ASGIApp, refusal: bytes = b"this server serves only processes of its own user\n") -> None:
        self.app = app
        self.refusal = refusal

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            client, server = scope.get("client"), scope.get("server")
            if client is None or server is None or peer_uid(tuple(client), tuple(server)) != os.getuid():
                await send(
                    {"type": "http.response.start", "status": 403, "headers": [(b"content-type", b"text/plain")]}
                )
                await send({"type": "http.response.body", "body": self.refusal})
                return
        await self.app(scope, receive, send)
