"""A loopback HTTP/1.1 proxy that adds ``Authorization: Bearer ...`` to every request: for a client that cannot
send ptyd-mcp's bearer secret (the MCP conformance suite), so it tests the transport and not the secret.

One request per connection (``Connection: close`` both ways); a response, SSE streams included, is piped back as
it comes, and a client that hangs up closes the upstream connection too (a dropped stream stays dropped)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError):
        while chunk := await reader.read(65536):
            writer.write(chunk)
            await writer.drain()
    writer.close()


async def _handle(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter, port: int, header: bytes) -> None:
    try:
        head = await client_r.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        client_w.close()
        return
    request_line, *fields = head[:-4].split(b"\r\n")
    kept = [f for f in fields if f.split(b":", 1)[0].strip().lower() not in (b"connection", b"authorization")]
    length = next((int(f.split(b":", 1)[1]) for f in kept if f.lower().startswith(b"content-length:")), 0)
    body = await client_r.readexactly(length) if length else b""
    up_r, up_w = await asyncio.open_connection("127.0.0.1", port)
    up_w.write(b"\r\n".join([request_line, *kept, header, b"Connection: close"]) + b"\r\n\r\n" + body)
    await up_w.drain()
    back = asyncio.ensure_future(_pipe(up_r, client_w))
    hangup = asyncio.ensure_future(client_r.read())  # EOF: the client dropped the stream
    await asyncio.wait([back, hangup], return_when=asyncio.FIRST_COMPLETED)
    up_w.close()
    client_w.close()
    for task in (back, hangup):
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, ConnectionError):
            await task


@contextlib.contextmanager
def bearer_proxy(upstream_port: int, authorization: str) -> Iterator[int]:
    """Serve the proxy on a free loopback port (yielded) in a thread of its own, until the block ends."""
    loop = asyncio.new_event_loop()
    header = b"Authorization: " + authorization.encode()
    ready = threading.Event()
    port: list[int] = []

    async def main() -> asyncio.base_events.Server:
        server = await asyncio.start_server(lambda r, w: _handle(r, w, upstream_port, header), "127.0.0.1", 0)
        port.append(server.sockets[0].getsockname()[1])
        return server

    server = loop.run_until_complete(main())
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    ready.set()
    try:
        yield port[0]
    finally:
        loop.call_soon_threadsafe(server.close)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
