"""The blocking client: one connection, one call at a time (calls from several threads are serialized)."""

from __future__ import annotations

import os
import select
import socket
import threading
from pathlib import Path
from typing import Any

from ptyd_client import core, remote
from ptyd_client.errors import ConnectionLost
from ptyd_client.methods import Methods, Session

__all__ = ["Client", "Session"]  # the session handle is the methods module's


class _Dropped(Exception):
    """The connection ended; ``sent`` says whether the daemon may have received the request."""

    def __init__(self, sent: bool) -> None:
        self.sent = sent


class _Connection:
    def __init__(self, stream: remote.Stream) -> None:
        self.stream = stream
        self.sock = stream.sock
        self._lines = core.LineBuffer()
        self._frames: list[bytes] = []
        self._requests = core.Requests()

    def alive(self) -> bool:
        """False when the daemon closed the connection since the last call (a pending EOF)."""
        readable, _, _ = select.select([self.sock], [], [], 0)
        if not readable:
            return True
        try:
            return self.sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) != b""
        except BlockingIOError:
            return True
        except OSError:
            return False

    def call(self, method: str, params: dict[str, Any], timeout: float | None) -> core.Response:
        request_id, frame = self._requests.encode(method, params)
        self.sock.settimeout(timeout)
        try:
            self.sock.sendall(frame)
        except (BrokenPipeError, ConnectionResetError):
            # sendall failed, so the final newline was not sent: the daemon runs only complete lines.
            raise _Dropped(sent=False) from None
        while True:
            while self._frames:
                response = core.decode_response(self._frames.pop(0))
                if response is None:
                    continue
                # A response to an earlier call that timed out is stale; an error without an id (a frame the
                # daemon could not read) can only be about this call, the one in flight.
                if response.id == request_id or (response.id is None and response.error is not None):
                    return response
            try:
                data = self.sock.recv(1 << 20)
            except ConnectionResetError:
                raise _Dropped(sent=True) from None
            if not data:
                raise _Dropped(sent=True)
            self._frames += self._lines.feed(data)

    def close(self) -> None:
        self.stream.close()


class Client(Methods):
    """A blocking ptyd client.

    ``socket_path`` defaults to where the daemon listens (``$PTYD_SOCKET``, ``$XDG_RUNTIME_DIR/ptyd/ptyd.sock``,
    ``/tmp/ptyd-$UID/ptyd.sock``); ``host`` (or ``$PTYD_HOST`` when neither is given), ``ssh://[user@]host[:port]``,
    reaches the ptyd of another machine through ssh (see :mod:`ptyd_client.remote`). ``token`` defaults to
    ``$PTYD_TOKEN``; :meth:`agent_register` mints and keeps one.
    ``timeout`` bounds the wait for each answer (None: as long as the daemon takes; its own waits are bounded
    by each call's ``timeout_ms``). The connection is made on first use and remade once, transparently, when
    the daemon dropped it.
    """

    def __init__(
        self,
        socket_path: str | os.PathLike[str] | None = None,
        token: str | None = None,
        *,
        host: str | None = None,
        timeout: float | None = None,
        connect_timeout: float = 5.0,
    ) -> None:
        self.target = remote.resolve_target(socket_path, host)
        # The local socket, or the ssh:// host, as errors name it.
        self.socket_path: Path | str = self.target if isinstance(self.target, Path) else str(self.target)
        self.token = core.resolve_token(token)
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self._connection: _Connection | None = None
        self._lock = threading.Lock()

    # --- connection ------------------------------------------------------------------------------------

    def connect(self) -> None:
        """Connect now (otherwise the first call connects); raises :class:`DaemonUnavailable`."""
        with self._lock:
            self._connected()

    def close(self) -> None:
        """Close the connection. Sessions live on in the daemon; reconnect with the same token."""
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None

    def __enter__(self) -> Client:
        self.connect()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _connected(self) -> _Connection:
        if self._connection is not None and not self._connection.alive():
            self._connection.close()
            self._connection = None
        if self._connection is None:
            self._connection = _Connection(remote.dial(self.target, self.connect_timeout))
        return self._connection

    def call(self, method: str, **params: Any) -> Any:
        """Call ``method`` with ``params`` as given and return its result; for methods newer than this client."""
        with self._lock:
            retried = False
            while True:
                connection = self._connected()
                try:
                    return connection.call(method, params, self.timeout).unwrap()
                except _Dropped as dropped:
                    failure = connection.stream.failure()  # ssh, or the remote dial-stdio, could not connect
                    connection.close()
                    self._connection = None
                    if failure is not None:
                        raise failure from None
                    if retried or (dropped.sent and method not in core.RETRY_SAFE):
                        reason = f"the connection dropped during {method}; its outcome is unknown"
                        raise ConnectionLost(self.socket_path, reason) from None
                    retried = True
