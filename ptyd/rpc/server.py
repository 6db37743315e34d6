"""The Unix-socket server: NDJSON framing, peer-uid check, per-connection concurrency and backpressure.

Requests on one connection run concurrently (a long terminal_send does not hold up a terminal_read); responses
carry the request id. The daemon stops reading a connection while it has ``max_inflight`` requests running or
unread responses above a high-water mark, and drops a connection whose unread responses exceed the bound, so a
client that never reads costs bounded memory and stalls nobody else. Which connections are kept at all (per-peer
shares, the global cap, the bound on never authenticating) is ``ptyd.rpc.admission``'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import socket
import struct
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast, final

from ptyd.config import Config
from ptyd.errors import FrameTooLarge
from ptyd.rpc.admission import Admission, Admitted
from ptyd.rpc.dispatch import Dispatcher, error_line

log = logging.getLogger("ptyd.rpc")

HIGH_WATER = 1024 * 1024
_ids = itertools.count(1)


@final
class Connection:
    """The sending side of one client connection, for notifications (subscribed events), and what to undo when
    it ends."""

    def __init__(self, transport: asyncio.WriteTransport, max_buffer: int, admitted: Admitted) -> None:
        self._transport = transport
        self._max_buffer = max_buffer
        self._on_close: list[Callable[[], None]] = []
        self.admitted = admitted  # its place among the connections: kept for good once a call had a valid token

    def notify(self, line: bytes) -> None:
        if self._transport.is_closing():
            return
        self._transport.write(line + b"\n")
        if self._transport.get_write_buffer_size() > self._max_buffer:
            log.info("dropping a connection: it does not read its notifications")
            self._transport.abort()

    def on_close(self, callback: Callable[[], None]) -> None:
        self._on_close.append(callback)

    def closed(self) -> None:
        callbacks, self._on_close = self._on_close, []
        for callback in callbacks:
            callback()


@dataclass(frozen=True, slots=True)
class Peer:
    connection_id: int
    pid: int
    uid: int
    connection: Connection | None = None

    # ``ptyd.rpc.dispatch.Caller``: what admission learns of the calls on this connection.
    def presenting(self, delta: int) -> None:
        """A call carrying a token started (+1) or ended (-1)."""
        if self.connection is not None:
            self.connection.admitted.presenting += delta

    def authenticated(self) -> None:
        """A call on this connection presented a valid token."""
        if self.connection is not None:
            self.connection.admitted.authenticate()


def peer_credentials(sock: socket.socket) -> tuple[int, int, int]:
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, gid = struct.unpack("3i", raw)
    return pid, uid, gid


def _frame_too_large(limit: int) -> bytes:
    return error_line(FrameTooLarge(limit=limit)) + b"\n"


@final
class _Client(asyncio.Protocol):
    """One connection: its frames are parsed as they are read, and each request's task is made in the same turn
    of the loop (a stream reader resumed a coroutine a turn later, and made the task another turn on: beside 50
    floods a turn of the loop runs every flood's ready callbacks, and a send waited that long per turn)."""

    def __init__(self, server: RpcServer) -> None:
        self._server = server
        config = server.config
        self._limit = config.max_frame_bytes
        self._max_inflight = config.max_inflight_per_connection
        self._max_buffer = config.max_connection_write_buffer
        self._transport: asyncio.Transport | None = None
        self._peer: Peer | None = None
        self._admitted: Admitted | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._queued: deque[bytes] = deque()  # frames read past ``max_inflight``: started as requests end
        self._buffer = bytearray()
        self._skipping = False  # inside an over-long frame: discard up to its newline
        self._eof = False  # the client stopped writing (or the daemon stops): close once the requests answered
        self._read_paused = False
        self._write_paused = False
        self.ended = asyncio.get_running_loop().create_future()

    # --- asyncio.Protocol --------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport = cast(asyncio.Transport, transport)
        try:
            pid, uid, _ = peer_credentials(transport.get_extra_info("socket"))
        except OSError:  # gone before it was looked at
            transport.abort()
            return
        if uid != os.getuid():
            log.warning("refused a connection from uid %d (pid %d)", uid, pid)
            transport.abort()
            return
        self._admitted = self._server.admission.admit(pid, transport.abort)
        if self._admitted is None:
            transport.abort()
            return
        # Reading stops while the responses not yet taken pass this, as a stream's drain() made it.
        transport.set_write_buffer_limits(high=HIGH_WATER)
        self._peer = Peer(next(_ids), pid, uid, Connection(transport, self._max_buffer, self._admitted))
        self._server.clients.add(self)

    def data_received(self, data: bytes) -> None:
        if self._peer is None or self._eof:
            return
        try:
            self._frames(data)
        except Exception:  # a bug here must cost this connection, not the loop's callback
            log.exception("a connection ended on an unexpected error")
            self.abort()

    def eof_received(self) -> bool:
        # The client may have only shut down its writing side (``socat``, ``nc -N``): the requests in flight (and
        # those queued) still get their answers, then the connection closes.
        self.finish()
        return True

    def connection_lost(self, exc: Exception | None) -> None:
        self._server.clients.discard(self)
        self._queued.clear()
        # On a reset or daemon shutdown the requests are cancelled; the operations they waited on go on.
        for task in self._tasks:
            task.cancel()
        if self._peer is not None and self._peer.connection is not None:
            self._peer.connection.closed()
        if self._admitted is not None:
            self._server.admission.release(self._admitted)
            self._admitted = None
        if not self.ended.done():
            self.ended.set_result(None)

    def pause_writing(self) -> None:
        self._write_paused = True
        self._pace_reading()

    def resume_writing(self) -> None:
        self._write_paused = False
        self._pace_reading()

    # --- frames and requests -----------------------------------------------------------------------------

    def _frames(self, chunk: bytes) -> None:
        buffer, limit, transport = self._buffer, self._limit, self._transport
        assert transport is not None
        start = 0
        while True:
            nl = chunk.find(b"\n", start)
            if nl < 0:
                if not self._skipping:
                    buffer += chunk[start:]
                break
            if self._skipping:
                self._skipping = False
            else:
                buffer += chunk[start:nl]
                if len(buffer) > limit:
                    transport.write(_frame_too_large(limit))
                elif buffer.strip():
                    self._request(bytes(buffer))
            buffer.clear()
            start = nl + 1
        if len(buffer) > limit:
            transport.write(_frame_too_large(limit))
            buffer.clear()
            self._skipping = True

    def _request(self, frame: bytes) -> None:
        if len(self._tasks) >= self._max_inflight:
            self._queued.append(frame)
            self._pace_reading()
            return
        assert self._peer is not None
        task = asyncio.get_running_loop().create_task(self._server._handle(frame, self._peer, self))
        self._tasks.add(task)
        task.add_done_callback(self._answered)

    def _answered(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("a request ended on an unexpected error", exc_info=task.exception())
        while self._queued and len(self._tasks) < self._max_inflight:
            self._request(self._queued.popleft())
        self._pace_reading()
        if self._eof and not self._tasks and not self._queued:
            self.close()

    def _pace_reading(self) -> None:
        """Read while fewer than ``max_inflight`` requests run and the client takes its responses."""
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        pause = self._eof or self._write_paused or bool(self._queued)
        if pause and not self._read_paused:
            transport.pause_reading()
        elif not pause and self._read_paused:
            transport.resume_reading()
        self._read_paused = pause

    def respond(self, line: bytes, peer: Peer) -> None:
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        transport.write(line + b"\n")
        if transport.get_write_buffer_size() > self._max_buffer:
            log.info("dropping connection %d: it does not read its responses", peer.connection_id)
            transport.abort()

    # --- the end -----------------------------------------------------------------------------------------

    def finish(self) -> None:
        """Read no more: answer the requests read so far, then close."""
        self._eof = True
        self._pace_reading()
        if not self._tasks and not self._queued:
            self.close()

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()

    def abort(self) -> None:
        """The requests in flight are cancelled (their operations go on); the connection closes at once."""
        self._queued.clear()
        if self._transport is not None:
            self._transport.abort()


@final
class RpcServer:
    def __init__(self, dispatcher: Dispatcher, config: Config) -> None:
        self.dispatcher = dispatcher
        self.config = config
        self._server: asyncio.AbstractServer | None = None
        self.clients: set[_Client] = set()
        self.admission = Admission(config)

    def reconfigure(self, config: Config) -> None:
        """A reloaded configuration: new connections and frames follow it."""
        self.config = config
        self.dispatcher.max_batch = config.max_batch
        self.admission.config = config

    async def start(self, sock: socket.socket) -> None:
        # asyncio listens on a socket it is given with its own backlog (100) unless told: a burst of clients
        # connecting at once would see EAGAIN past it (test_500_simultaneous_connects_are_all_served).
        self._server = await asyncio.get_running_loop().create_unix_server(
            lambda: _Client(self), sock=sock, backlog=self.config.listen_backlog
        )

    async def _handle(self, frame: bytes, peer: Peer, client: _Client) -> None:
        response = await self.dispatcher.handle_frame(frame, peer)
        if response is not None:
            client.respond(response, peer)

    def stop_accepting(self) -> None:
        if self._server is not None:
            self._server.close()

    async def close(self, drain_s: float) -> None:
        """Stop accepting; end every connection as if its client had stopped writing, so the requests in flight
        send their answers; after ``drain_s`` cancel what is left (their requests' operations are not affected)."""
        self.stop_accepting()
        clients = list(self.clients)
        for client in clients:
            client.finish()  # nothing more is read
        if clients:
            ends = [client.ended for client in clients]
            _, late = await asyncio.wait(ends, timeout=drain_s)
            for client in clients:
                if client.ended in late:
                    client.abort()
            if late:
                await asyncio.wait(late)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
