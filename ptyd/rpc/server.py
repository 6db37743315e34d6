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

    def __init__(self, writer: asyncio.StreamWriter, max_buffer: int, admitted: Admitted) -> None:
        self._writer = writer
        self._max_buffer = max_buffer
        self._on_close: list[Callable[[], None]] = []
        self.admitted = admitted  # its place among the connections: kept for good once a call had a valid token

    def notify(self, line: bytes) -> None:
        if self._writer.is_closing():
            return
        self._writer.write(line + b"\n")
        if self._writer.transport.get_write_buffer_size() > self._max_buffer:
            log.info("dropping a connection: it does not read its notifications")
            self._writer.transport.abort()

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
class RpcServer:
    def __init__(self, dispatcher: Dispatcher, config: Config) -> None:
        self.dispatcher = dispatcher
        self.config = config
        self._server: asyncio.AbstractServer | None = None
        self._connections: dict[asyncio.Task[None], tuple[asyncio.StreamReader, asyncio.StreamWriter]] = {}
        self._admission = Admission(config)

    def reconfigure(self, config: Config) -> None:
        """A reloaded configuration: new connections and frames follow it."""
        self.config = config
        self.dispatcher.max_batch = config.max_batch
        self._admission.config = config

    async def start(self, sock: socket.socket) -> None:
        # asyncio listens on a socket it is given with its own backlog (100) unless told: a burst of clients
        # connecting at once would see EAGAIN past it (test_500_simultaneous_connects_are_all_served).
        self._server = await asyncio.start_unix_server(
            self._accept, sock=sock, limit=2**16, backlog=self.config.listen_backlog
        )

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # The connection runs in a task the server owns, so that close() can end it: asyncio's own task for this
        # callback must not end cancelled (Python 3.11's streams log that as an unhandled CancelledError).
        task = asyncio.get_running_loop().create_task(self._connection(reader, writer))
        self._connections[task] = (reader, writer)
        task.add_done_callback(self._gone)
        await asyncio.wait({task})

    def _gone(self, task: asyncio.Task[None]) -> None:
        self._connections.pop(task, None)
        if not task.cancelled() and task.exception() is not None:
            log.error("a connection ended on an unexpected error", exc_info=task.exception())

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await self._serve(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        pid, uid, _ = peer_credentials(sock)
        if uid != os.getuid():
            log.warning("refused a connection from uid %d (pid %d)", uid, pid)
            return
        admitted = self._admission.admit(pid, writer.transport.abort)
        if admitted is None:
            return
        try:
            await self._serve_admitted(reader, writer, pid, uid, admitted)
        finally:
            self._admission.release(admitted)

    async def _serve_admitted(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, pid: int, uid: int, admitted: Admitted
    ) -> None:
        connection = Connection(writer, self.config.max_connection_write_buffer, admitted)
        peer = Peer(next(_ids), pid, uid, connection)
        inflight = asyncio.Semaphore(self.config.max_inflight_per_connection)
        tasks: set[asyncio.Task[None]] = set()
        buffer = bytearray()
        skipping = False  # inside an over-long frame: discard up to its newline
        limit = self.config.max_frame_bytes
        try:
            while True:
                chunk = await reader.read(65536)
                if not chunk:
                    # EOF: the client may have only shut down its writing side (``socat``, ``nc -N``), so the
                    # requests in flight still get their answers. A client that is gone entirely costs nothing
                    # more: its requests only wait on operations the service owns.
                    if tasks:
                        await asyncio.gather(*tasks, return_exceptions=True)
                    break
                start = 0
                while True:
                    nl = chunk.find(b"\n", start)
                    if nl < 0:
                        if not skipping:
                            buffer += chunk[start:]
                        break
                    if skipping:
                        skipping = False
                    else:
                        buffer += chunk[start:nl]
                        if len(buffer) > limit:
                            writer.write(_frame_too_large(limit))
                        elif buffer.strip():
                            await inflight.acquire()
                            task = asyncio.get_running_loop().create_task(
                                self._handle(bytes(buffer), peer, writer, inflight)
                            )
                            tasks.add(task)
                            task.add_done_callback(tasks.discard)
                    buffer.clear()
                    start = nl + 1
                if len(buffer) > limit:
                    writer.write(_frame_too_large(limit))
                    buffer.clear()
                    skipping = True
                if writer.transport.get_write_buffer_size() > HIGH_WATER:
                    await writer.drain()
        finally:
            connection.closed()
            # On a reset or daemon shutdown the requests are cancelled; the operations they waited on go on.
            for task in tasks:
                task.cancel()
            if tasks:
                await asyncio.gather(*tasks, return_exceptions=True)

    async def _handle(
        self, frame: bytes, peer: Peer, writer: asyncio.StreamWriter, inflight: asyncio.Semaphore
    ) -> None:
        try:
            response = await self.dispatcher.handle_frame(frame, peer)
            if response is not None and not writer.is_closing():
                writer.write(response + b"\n")
                if writer.transport.get_write_buffer_size() > self.config.max_connection_write_buffer:
                    log.info("dropping connection %d: it does not read its responses", peer.connection_id)
                    writer.transport.abort()
        finally:
            inflight.release()

    def stop_accepting(self) -> None:
        if self._server is not None:
            self._server.close()

    async def close(self, drain_s: float) -> None:
        """Stop accepting; end every connection as if its client had stopped writing, so the requests in flight
        send their answers; after ``drain_s`` cancel what is left (their requests' operations are not affected)."""
        self.stop_accepting()
        for reader, writer in list(self._connections.values()):
            if not writer.transport.is_closing():
                cast(asyncio.Transport, writer.transport).pause_reading()  # nothing arrives after the end fed here
            reader.feed_eof()
        if self._connections:
            _, late = await asyncio.wait(list(self._connections), timeout=drain_s)
            for task in late:
                task.cancel()
            if late:
                await asyncio.wait(late)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
