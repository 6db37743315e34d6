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
from starlette.types import ASGIApp

from ptyd.daemon.runtime import bind_socket
from ptyd.loopback import SameUserOnly as _SameUserOnly
from ptyd.loopback import peer_uid as peer_uid
from ptyd_mcp.config import HTTP_RETRY_MS
from ptyd_mcp.events import MemoryEventStore


def SameUserOnly(app: ASGIApp) -> ASGIApp:
    """Refuses (403) an HTTP request whose peer is not a process of this server's user."""
    return _SameUserOnly(app, b"ptyd-mcp serves only processes of its own user\n")


async def serve_http(server: Server[Any], unix_path: Path | None, port: int | None) -> None:
    """Serve ``server`` at ``/mcp`` on ``unix_path``, else on 127.0.0.1:``port`` (0: any free port, announced)."""
    import uvicorn

    app: ASGIApp
    # Resumable: a stream that drops (a send waiting for its program) is picked up again with Last-Event-ID.
    resumable: dict[str, Any] = {"event_store": MemoryEventStore(), "retry_interval": HTTP_RETRY_MS}
    if unix_path is not None:
        # No browser reaches a Unix socket, so DNS rebinding (the Host-header check) does not apply.
        security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
        app = server.streamable_http_app(transport_security=security, **resumable)
        # The daemon's own binding: 0600, and a socket file another server still listens on is left alone.
        listener = bind_socket(unix_path, backlog=128)
    else:
        app = SameUserOnly(server.streamable_http_app(host="127.0.0.1", **resumable))
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
