"""Streamable HTTP for hosts that want it: on a Unix socket (0600), or on a loopback port that only serves processes
of this user, as the daemon's own socket does (a port, unlike a socket file, has no permissions of its own).

Same-user is no boundary against a sandboxed session: a ``workspace`` session shares the machine's loopback (with
``sandbox_network = "host"``) and runs as the same user, so a port, and a socket file where the sandbox can
connect to it (outside the runtime directories it does not see), also demand a bearer secret
(``Authorization: Bearer ...``), kept 0600 beside the agent's token, where no sandbox sees it. A request without it
gets 401 and nothing else."""

from __future__ import annotations

import contextlib
import hmac
import os
import re
import socket
import sys
from collections import OrderedDict
from pathlib import Path
from typing import Any

from mcp.server import Server
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types.version import is_version_at_least
from starlette.types import ASGIApp, Receive, Scope, Send

from ptyd.daemon.runtime import bind_socket
from ptyd.loopback import SameUserOnly as _SameUserOnly
from ptyd.loopback import peer_uid as peer_uid
from ptyd_mcp.config import HTTP_RETRY_MS
from ptyd_mcp.events import MemoryEventStore, per_session

NEGOTIATED = re.compile(rb'"protocolVersion"\s*:\s*"([^"]{1,32})"')
SESSIONS_REMEMBERED = 4096  # sessions whose negotiated version is kept (the oldest forgotten past it)


class SessionVersion:
    """ASGI middleware: a request in a session is served at the version the session negotiated when its
    ``mcp-protocol-version`` header names an older one. The SDK primes a stream (SEP-1699: an event with an id, no
    data, and ``retry``, so a dropped stream can be resumed) by the header alone; a client that negotiated
    2025-11-25 and then declares 2025-03-26 on a request (the MCP conformance suite's server-sse-polling does)
    would get a stream it cannot resume. A session that negotiated an older version is left as it is: its client
    may not parse a priming event."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.negotiated: OrderedDict[bytes, bytes] = OrderedDict()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers", ()))
        session = headers.get(b"mcp-session-id")
        if session is None:  # an initialize, maybe: its answer names the session and its version
            await self.app(scope, receive, self._learn(send))
            return
        version, declared = self.negotiated.get(session), headers.get(b"mcp-protocol-version")
        if version and declared and declared != version and is_version_at_least(version.decode(), declared.decode()):
            rewritten = [(k, version if k == b"mcp-protocol-version" else v) for k, v in scope["headers"]]
            scope = {**scope, "headers": rewritten}
        await self.app(scope, receive, send)

    def _learn(self, send: Send) -> Send:
        session: list[bytes] = []
        seen = bytearray()

        async def learning(message: Any) -> None:
            if message["type"] == "http.response.start":
                session.extend(v for k, v in message.get("headers", ()) if k.lower() == b"mcp-session-id")
            elif message["type"] == "http.response.body" and session and len(seen) < 65536:
                seen.extend(message.get("body", b""))
                found = NEGOTIATED.search(seen)
                if found:
                    self.negotiated[session[0]] = found.group(1)
                    while len(self.negotiated) > SESSIONS_REMEMBERED:
                        self.negotiated.popitem(last=False)
                    session.clear()  # learnt: the rest of this answer is not read
            await send(message)

        return learning


class BearerSecret:
    """ASGI middleware: refuses (401) an HTTP or WebSocket request without ``Authorization: Bearer SECRET``."""

    def __init__(self, app: ASGIApp, secret: str) -> None:
        self.app = app
        self.expected = f"Bearer {secret}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            given = next((value for name, value in scope.get("headers", ()) if name == b"authorization"), b"")
            if not hmac.compare_digest(given, self.expected):
                if scope["type"] == "websocket":
                    await send({"type": "websocket.close", "code": 1008})
                    return
                headers = [(b"content-type", b"text/plain"), (b"www-authenticate", b"Bearer")]
                await send({"type": "http.response.start", "status": 401, "headers": headers})
                await send({"type": "http.response.body", "body": b"unauthorized\n"})
                return
        await self.app(scope, receive, send)


def private_to_sessions(path: Path, daemon_socket: Path | str) -> bool:
    """Whether a socket at ``path`` is in a directory every sandbox hides (``$XDG_RUNTIME_DIR``, the daemon's
    runtime directory): there no session's program reaches it, and no secret is needed."""
    where = os.path.realpath(path.parent)
    hidden = [os.environ.get("XDG_RUNTIME_DIR", "")]
    if isinstance(daemon_socket, Path):
        hidden.append(os.path.realpath(daemon_socket.parent))
    return any(root and (where == root or where.startswith(root.rstrip("/") + "/")) for root in hidden)


def SameUserOnly(app: ASGIApp) -> ASGIApp:
    """Refuses (403) an HTTP request whose peer is not a process of this server's user."""
    return _SameUserOnly(app, b"ptyd-mcp serves only processes of its own user\n")


async def serve_http(
    server: Server[Any], unix_path: Path | None, port: int | None, secret: tuple[str, Path] | None
) -> None:
    """Serve ``server`` at ``/mcp`` on ``unix_path``, else on 127.0.0.1:``port`` (0: any free port, announced);
    ``secret``: the bearer secret every request must carry, and the file that keeps it (None: none needed)."""
    import uvicorn

    app: ASGIApp
    # Resumable: a stream that drops (a send waiting for its program) is picked up again with Last-Event-ID.
    events = MemoryEventStore()
    resumable: dict[str, Any] = {"event_store": events, "retry_interval": HTTP_RETRY_MS}
    if unix_path is not None:
        # No browser reaches a Unix socket, so DNS rebinding (the Host-header check) does not apply.
        security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
        app = SessionVersion(server.streamable_http_app(transport_security=security, **resumable))
        # The daemon's own binding: 0600, and a socket file another server still listens on is left alone.
        listener = bind_socket(unix_path, backlog=128)
    else:
        app = SameUserOnly(SessionVersion(server.streamable_http_app(host="127.0.0.1", **resumable)))
        listener = socket.create_server(("127.0.0.1", port or 0))
        print(f"ptyd-mcp: streamable HTTP on http://127.0.0.1:{listener.getsockname()[1]}/mcp", file=sys.stderr)
    per_session(server, events)  # each session replays only its own streams
    if secret is not None:
        app = BearerSecret(app, secret[0])
        print(f'ptyd-mcp: every request needs "Authorization: Bearer SECRET", SECRET in {secret[1]}', file=sys.stderr)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    try:
        await uvicorn.Server(config).serve(sockets=[listener])
    finally:
        listener.close()
        if unix_path is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(unix_path)
