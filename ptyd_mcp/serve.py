"""Serving: the MCP SDK and the daemon client, loaded by :func:`ptyd_mcp.cli.main` once the command line is read."""

from __future__ import annotations

import argparse
import os
from io import TextIOWrapper
from typing import Any, cast

import anyio
from mcp.server import Server
from mcp.server.stdio import stdio_server

from ptyd.daemon.runtime import StartupError
from ptyd_client import AsyncClient
from ptyd_mcp.early import AnsweredStdout, Early, ReplayedStdin
from ptyd_mcp.identity import http_secret, secret_path
from ptyd_mcp.server import build_server

__all__ = ["StartupError", "serve"]


async def serve_stdio(server: Server[Any], early: Early | None) -> None:
    if early is None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())
        return
    # The host's first line was read (and maybe answered) before the SDK loaded: it gets the line again, and its
    # answer to an initialize answered already is dropped (ptyd_mcp.early). The SDK's own stdio plumbing, over the
    # same file descriptors, as UTF-8.
    stdin = anyio.wrap_file(TextIOWrapper(os.fdopen(0, "rb", closefd=False), encoding="utf-8", errors="replace"))
    stdout = anyio.wrap_file(TextIOWrapper(os.fdopen(1, "wb", closefd=False), encoding="utf-8"))
    replayed = ReplayedStdin(early.first_line.decode(errors="replace"), stdin)
    answered = AnsweredStdout(stdout, early)
    async with stdio_server(cast("Any", replayed), cast("Any", answered)) as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


async def run(args: argparse.Namespace, early: Early | None) -> None:
    client = AsyncClient(args.socket)
    client.token = None  # the token comes from the agent's token file, never from $PTYD_TOKEN
    server = build_server(
        client, args.agent, max_bytes=args.max_bytes, profiles=args.profiles, key=getattr(args, "agent_key", None)
    )
    try:
        if args.http_socket is not None or args.http_port is not None:
            from ptyd_mcp.http import private_to_sessions, serve_http  # uvicorn and starlette: only for HTTP

            secret = None
            if args.http_socket is None or not private_to_sessions(args.http_socket, client.socket_path):
                path = secret_path(client.socket_path, args.agent)
                secret = (http_secret(path), path)
            await serve_http(server, args.http_socket, args.http_port, secret)
        else:
            await serve_stdio(server, early)
    finally:
        await client.close()


def serve(args: argparse.Namespace, early: Early | None = None) -> None:
    """Serve until the host goes away; ``early``: the host's first line over stdio, read (and maybe answered)
    before the SDK was loaded."""
    anyio.run(run, args, early)
