"""The one seam between the bench and a ptyd client: :func:`connect`.

``KIND`` picks the implementation: ``"ptyd_client"`` is the project's blocking Python client (clients/python),
``"minimal"`` a bare blocking NDJSON client (one request at a time), kept for when that package is unavailable
and to show what the client itself costs. run.py sets it from ``--client``.
"""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path
from typing import Any, Protocol

CLIENT_PACKAGE = Path(__file__).resolve().parent.parent / "clients" / "python"
KIND = "ptyd_client"


class Caller(Protocol):
    def call(self, method: str, **params: Any) -> Any: ...

    def close(self) -> None: ...


class CallFailed(Exception):
    """The daemon answered with a JSON-RPC error (minimal client)."""


class MinimalClient:
    """Blocking NDJSON JSON-RPC over a Unix socket: what any language can do in twenty lines."""

    def __init__(self, path: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.sock.connect(str(path))
        except OSError:
            self.sock.close()
            raise
        self._buffer = b""
        self._next_id = 0

    def call(self, method: str, **params: Any) -> Any:
        self._next_id += 1
        frame = {"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": params}
        self.sock.sendall(json.dumps(frame, separators=(",", ":")).encode() + b"\n")
        while b"\n" not in self._buffer:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("daemon closed the connection")
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        reply = json.loads(line)
        if "error" in reply:
            raise CallFailed(reply["error"])
        return reply["result"]

    def close(self) -> None:
        self.sock.close()


def available_kinds() -> list[str]:
    """The client kinds that work here: ``ptyd_client`` only if the package imports (it may be mid-change)."""
    if str(CLIENT_PACKAGE) not in sys.path:
        sys.path.insert(0, str(CLIENT_PACKAGE))
    try:
        import ptyd_client  # noqa: F401
    except ImportError:
        return ["minimal"]
    return ["ptyd_client", "minimal"]


def connect(path: Path) -> Caller:
    """A connected client for the daemon at ``path``, of the kind ``KIND`` names; raises OSError if it is down."""
    if KIND == "minimal":
        return MinimalClient(path)
    if str(CLIENT_PACKAGE) not in sys.path:
        sys.path.insert(0, str(CLIENT_PACKAGE))
    from ptyd_client import Client, DaemonUnavailable

    client = Client(path, timeout=None)
    try:
        client.connect()
    except DaemonUnavailable as exc:
        raise ConnectionRefusedError(str(exc)) from None
    return client
