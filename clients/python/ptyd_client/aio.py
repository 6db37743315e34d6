"""The asyncio client: concurrent calls multiplexed on one connection, responses matched by request id.

A long ``terminal_send`` and any number of reads can be in flight together; the daemon runs requests on one
connection concurrently and answers each with its id.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from pathlib import Path
from typing import Any

from ptyd_client import core, remote
from ptyd_client.aio_methods import AsyncMethods, AsyncSession
from ptyd_client.errors import ConnectionLost, DaemonUnavailable

__all__ = ["AsyncClient", "AsyncSession"]  # the session handle is the methods module's


class _Dropped(Exception):
    def __init__(self, sent: bool) -> None:
        self.sent = sent


class _Connection:
    """One socket, a reader task that routes each response to the future of its request."""

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, stream: remote.Stream | None = None
    ) -> None:
        self.stream = stream  # the ssh link, when the daemon is on another machine
        self._reader = reader
        self._writer = writer
        self._requests = core.Requests()
        self._pending: dict[int, asyncio.Future[core.Response]] = {}
        self.closed = False
        self._task = asyncio.get_running_loop().create_task(self._read_responses(), name="ptyd-client reader")

    @classmethod
    async def open(cls, target: Path | remote.SshHost, connect_timeout: float | None) -> _Connection:
        if isinstance(target, remote.SshHost):
            stream = remote.dial(target, connect_timeout)
            stream.sock.setblocking(False)
            reader, writer = await asyncio.open_unix_connection(sock=stream.sock)
            return cls(reader, writer, stream)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        sock.setblocking(False)
        try:
            await asyncio.wait_for(asyncio.get_running_loop().sock_connect(sock, str(target)), connect_timeout)
        except OSError as exc:
            sock.close()
            raise core.connect_failure(target, exc) from None
        except BaseException:
            sock.close()
            raise
        reader, writer = await asyncio.open_unix_connection(sock=sock)
        return cls(reader, writer)

    async def failure(self) -> DaemonUnavailable | None:
        """Why the ssh link ended, when ssh or the remote ``ptyd dial-stdio`` failed."""
        return None if self.stream is None else await asyncio.to_thread(self.stream.failure)

    async def _read_responses(self) -> None:
        lines = core.LineBuffer()
        try:
            while data := await self._reader.read(1 << 20):
                for line in lines.feed(data):
                    self._route(core.decode_response(line))
        except (ConnectionError, OSError):
            pass
        finally:
            self.closed = True
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(_Dropped(sent=True))

    def _route(self, response: core.Response | None) -> None:
        if response is None:
            return
        future = self._pending.get(response.id) if isinstance(response.id, int) else None
        if future is None and response.id is None and response.error is not None and len(self._pending) == 1:
            # An error without an id (a frame the daemon could not read) belongs to the one request in flight.
            future = next(iter(self._pending.values()))
        if future is not None and not future.done():
            future.set_result(response)

    async def call(self, method: str, params: dict[str, Any]) -> core.Response:
        if self.closed:
            raise _Dropped(sent=False)
        request_id, frame = self._requests.encode(method, params)
        future: asyncio.Future[core.Response] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        try:
            try:
                self._writer.write(frame)
                await self._writer.drain()
            except (ConnectionError, OSError):
                raise _Dropped(sent=False) from None
            return await future
        finally:
            # Also on cancellation: a late response finds no future and is dropped.
            del self._pending[request_id]

    async def close(self) -> None:
        self.closed = True
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._writer.close()
        with contextlib.suppress(ConnectionError, OSError):
            await self._writer.wait_closed()
        if self.stream is not None:
            await asyncio.to_thread(self.stream.close)  # reaps ssh


class AsyncClient(AsyncMethods):
    """The asyncio twin of :class:`~ptyd_client.Client` (same methods, awaited); use ``async with``.

    Calls may run concurrently (``asyncio.gather``, tasks): they share one connection.
    """

    def __init__(
        self,
        socket_path: str | os.PathLike[str] | None = None,
        token: str | None = None,
        *,
        host: str | None = None,
        connect_timeout: float = 5.0,
    ) -> None:
        self.target = remote.resolve_target(socket_path, host)
        # The local socket, or the ssh:// host, as errors name it.
        self.socket_path: Path | str = self.target if isinstance(self.target, Path) else str(self.target)
        self.token = core.resolve_token(token)
        self.connect_timeout = connect_timeout
        self._connection: _Connection | None = None
        self._connecting = asyncio.Lock()

    async def connect(self) -> None:
        """Connect now (otherwise the first call connects); raises :class:`DaemonUnavailable`."""
        await self._connected()

    async def close(self) -> None:
        """Close the connection; calls in flight raise :class:`ConnectionLost`. Sessions live on."""
        if self._connection is not None:
            connection, self._connection = self._connection, None
            await connection.close()

    async def __aenter__(self) -> AsyncClient:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _connected(self) -> _Connection:
        async with self._connecting:  # concurrent calls that find the connection gone reconnect once
            if self._connection is not None and self._connection.closed:
                await self._connection.close()
                self._connection = None
            if self._connection is None:
                self._connection = await _Connection.open(self.target, self.connect_timeout)
            return self._connection

    async def call(self, method: str, **params: Any) -> Any:
        """Call ``method`` with ``params`` as given and return its result."""
        retried = False
        while True:
            connection = await self._connected()
            try:
                response = await connection.call(method, params)
            except _Dropped as dropped:
                # The reader may not have seen the end yet (a loop that was blocked): never reuse this one.
                connection.closed = True
                failure = await connection.failure()
                if failure is not None:
                    raise failure from None
                if retried or (dropped.sent and method not in core.RETRY_SAFE):
                    reason = f"the connection dropped during {method}; its outcome is unknown"
                    raise ConnectionLost(self.socket_path, reason) from None
                retried = True
                continue
            return response.unwrap()
