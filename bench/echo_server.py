"""The dispatch ceiling for scenario 5: a bare NDJSON JSON-RPC echo on asyncio + uvloop, decoded and encoded with
msgspec, framed the way the daemon frames (``reader.read`` chunks split at newlines).

``python bench/echo_server.py SOCKET``: serves until SIGTERM; answers every request with its own params as the
result. Prints ``ready`` on stdout once it listens.
"""

from __future__ import annotations

import asyncio
import signal
import sys

import msgspec
import uvloop


class Request(msgspec.Struct):
    jsonrpc: str
    method: str
    params: msgspec.Raw = msgspec.Raw(b"null")
    id: int | str | None = None


class Response(msgspec.Struct):
    jsonrpc: str
    id: int | str | None
    result: msgspec.Raw


decode = msgspec.json.Decoder(Request).decode
encode = msgspec.json.Encoder().encode


async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    buffer = b""
    try:
        while chunk := await reader.read(65536):
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                request = decode(line)
                writer.write(encode(Response("2.0", request.id, request.params)) + b"\n")
    except ConnectionError:
        pass
    finally:
        writer.close()


async def main(path: str) -> None:
    server = await asyncio.start_unix_server(serve, path=path, limit=2**16)
    stop = asyncio.get_running_loop().create_future()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set_result, None)
    print("ready", flush=True)
    async with server:
        await stop


if __name__ == "__main__":
    uvloop.run(main(sys.argv[1]))
