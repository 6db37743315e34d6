"""Event streams: ``terminal_event`` notifications on a connection of their own.

A subscription lives as long as its connection, so each stream owns one: requests on the client's connection are
never held up by a burst of events, and closing the stream ends the subscription.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import select
import time
from collections import deque
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, cast

from ptyd_client import core, remote
from ptyd_client.errors import ConnectionLost
from ptyd_client.types import TerminalEvent


def _subscribe_frame(token: str, session_id: str | None, output: bool, screen: bool = False) -> bytes:
    params = core.drop_none({"token": token, "session_id": session_id, "output": output})
    if screen:  # only when asked: a daemon older than the screen events refuses the field
        params["screen"] = True
    return core.Requests().encode("terminal_subscribe", params)[1]


def _event(line: bytes) -> TerminalEvent | None:
    try:
        message = json.loads(line)
    except ValueError:
        return None
    if isinstance(message, dict) and message.get("method") == "terminal_event" and "id" not in message:
        return cast(TerminalEvent, message.get("params"))
    return None


class EventStream:
    """Blocking iterator over one subscription's events (``for event in stream``, or :meth:`next`)."""

    def __init__(
        self, target: Path | remote.SshHost, token: str, session_id: str | None, output: bool, screen: bool = False
    ) -> None:
        self._path = str(target)
        self._stream = remote.dial(target, None)
        self._sock = self._stream.sock
        self._sock.settimeout(None)
        self._lines = core.LineBuffer()
        self._pending: deque[TerminalEvent] = deque()
        self._sock.sendall(_subscribe_frame(token, session_id, output, screen))
        response = self._until_response()
        self.subscription_id: str = response.unwrap()["subscription_id"]

    @classmethod
    def open(
        cls, target: Path | remote.SshHost, token: str, session_id: str | None, output: bool, screen: bool = False
    ) -> EventStream:
        """Subscribe on a connection of its own (as ``AsyncEventStream.open``)."""
        return cls(target, token, session_id, output, screen)

    def _read(self, timeout: float | None) -> list[bytes]:
        readable, _, _ = select.select([self._sock], [], [], timeout)
        if not readable:
            return []
        data = self._sock.recv(1 << 20)
        if not data:
            raise ConnectionLost(self._path, "the daemon closed the event stream")
        return self._lines.feed(data)

    def _until_response(self) -> core.Response:
        while True:
            for line in self._read(None):
                response = core.decode_response(line)
                if response is not None:
                    return response
                event = _event(line)
                if event is not None:
                    self._pending.append(event)

    def next(self, timeout: float | None = None) -> TerminalEvent | None:
        """The next event, or None when ``timeout`` seconds pass without one."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._pending:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            for line in self._read(remaining):
                event = _event(line)
                if event is not None:
                    self._pending.append(event)
            if deadline is not None and time.monotonic() >= deadline and not self._pending:
                return None
        return self._pending.popleft()

    def __iter__(self) -> Iterator[TerminalEvent]:
        while True:
            event = self.next()
            if event is not None:
                yield event

    def close(self) -> None:
        """End the subscription (by closing its connection)."""
        self._stream.close()

    def __enter__(self) -> EventStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncEventStream:
    """Asynchronous iterator over one subscription's events (``async for event in stream``)."""

    def __init__(
        self, path: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, subscription_id: str
    ) -> None:
        self._path = path
        self._reader = reader
        self._writer = writer
        self.subscription_id = subscription_id
        self._early: deque[TerminalEvent] = deque()
        self._connection: remote.Stream | None = None

    @classmethod
    async def open(
        cls, target: Path | remote.SshHost, token: str, session_id: str | None, output: bool, screen: bool = False
    ) -> AsyncEventStream:
        socket_path = str(target)
        connection = remote.dial(target, None)
        connection.sock.setblocking(False)
        reader, writer = await asyncio.open_unix_connection(sock=connection.sock, limit=1 << 24)
        writer.write(_subscribe_frame(token, session_id, output, screen))
        early: deque[TerminalEvent] = deque()
        while True:
            line = await reader.readline()
            if not line:
                writer.close()
                raise ConnectionLost(socket_path, "the daemon closed the event stream")
            response = core.decode_response(line)
            if response is not None:
                result: dict[str, Any] = response.unwrap()
                stream = cls(socket_path, reader, writer, result["subscription_id"])
                stream._early = early
                stream._connection = connection
                return stream
            event = _event(line)
            if event is not None:
                early.append(event)

    async def next(self) -> TerminalEvent:
        if self._early:
            return self._early.popleft()
        while True:
            line = await self._reader.readline()
            if not line:
                raise ConnectionLost(self._path, "the daemon closed the event stream")
            event = _event(line)
            if event is not None:
                return event

    def __aiter__(self) -> AsyncIterator[TerminalEvent]:
        return self

    async def __anext__(self) -> TerminalEvent:
        try:
            return await self.next()
        except ConnectionLost:
            raise StopAsyncIteration from None

    async def close(self) -> None:
        self._writer.close()
        with contextlib.suppress(OSError):
            await self._writer.wait_closed()
        if self._connection is not None:
            self._connection.close()  # and the ssh carrying it, if any
