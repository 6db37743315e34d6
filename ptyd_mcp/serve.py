"""Serving: the MCP SDK and the daemon client, loaded by :func:`ptyd_mcp.cli.main` once the command line is read."""

from __future__ import annotations

import argparse
from typing import Any

import anyio
from mcp.server import Server
from mcp.server.stdio import stdio_server

from ptyd.daemon.runtime import StartupError
from ptyd_client import AsyncClient
from ptyd_mcp.server import build_server

__all__ = ["StartupError", "serve"]


async def serve_stdio(server: Server[Any]) -> None:
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


async def run(args: argparse.Namespace) -> None:
    client = AsyncClient(args.socket)
    client.token = None  # the token comes from the agent's token file, never from $PTYD_TOKEN
    server = build_server(client, args.agent, max_bytes=args.max_bytes, profiles=args.profiles)
    try:
        if args.http_socket is not None or args.http_port is not None:
            from ptyd_mcp.http import serve_http  # uvicorn and starlette: only for HTTP

            await serve_http(server, args.http_socket, args.http_port)
        else:
            await serve_stdio(server)
    finally:
        await client.close()


def serve(args: argparse.Namespace) -> None:
    anyio.run(run, args)
