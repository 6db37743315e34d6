"""Streamable HTTP for hosts that want it: on a Unix socket (0600), or on a loopback port that only serves processes
of this user, as the daemon's own socket does (a port, unlike a socket file, has no permissions of its own)."""

from __future__ import annotations

import contextlib
import os
import socket
import sys
from pathlib import Path
from typing import Any

from mcp.server import Server
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import ASGIApp, Receive, Scope, Send

from ptyd.daemon.runtime import bind_socket

TCP_TABLE = Path("/proc/net/tcp")


def _address(field: str) -> tuple[str, int]:
    """``0100007F:1F90`` from /proc/net/tcp: the kernel prints the address as a native-endian integer."""
    host, port = field.split(":")
    return socket.inet_ntoa(int(host, 16).to_bytes(4, sys.byteorder)), int(port, 16)


def peer_uid(client: tuple[str, int], server: tuple[str, int]) -> int | None:
    """The uid owning the connecting socket of a loopback TCP connection, from the kernel's socket table."""
    with contextlib.suppress(OSError):
        for line in TCP_TABLE.read_text().splitlines()[1:]:
            fields = line.split()
            if _address(fields[1]) == client and _address(fields[2]) == server:
                return int(fields[7])
    return None


class SameUserOnly:
    """ASGI middleware: refuses (403) an HTTP request whose peer is not a process of this server's user."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            client, server = scope.get("client"), scope.get("server")
            if client is None or server is None or peer_uid(tuple(client), tuple(server)) != os.getuid():
                await send(
                    {"type": "http.response.start", "status": 403, "headers": [(b"content-type", b"text/plain")]}
                )
                await send({"type": "http.response.body", "body": b"ptyd-mcp serves only processes of its own user\n"})
                return
        await self.app(scope, receive, send)


async def serve_http(server: Server[Any], unix_path: Path | None, port: int | None) -> None:
    """Serve ``server`` at ``/mcp`` on ``unix_path``, else on 127.0.0.1:``port`` (0: any free port, announced)."""
    import uvicorn

    app: ASGIApp
    if unix_path is not None:
        # No browser reaches a Unix socket, so DNS rebinding (the Host-header check) does not apply.
        security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
        app = server.streamable_http_app(transport_security=security)
        # The daemon's own binding: 0600, and a socket file another server still listens on is left alone.
        listener = bind_socket(unix_path, backlog=128)
    else:
        app = SameUserOnly(server.streamable_http_app(host="127.0.0.1"))
        listener = socket.create_server(("127.0.0.1", port or 0))
        print(f"ptyd-mcp: streamable HTTP on http://127.0.0.1:{listener.getsockname()[1]}/mcp", file=sys.stderr)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    try:
        await uvicorn.Server(config).serve(sockets=[listener])
    finally:
        listener.close()
        if unix_path is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(unix_path)
