"""``ptyd-mcp``: serve ptyd's terminals to an MCP host over stdio (default) or streamable HTTP."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp.server import Server
from mcp.server.stdio import stdio_server

from ptyd.daemon.runtime import StartupError
from ptyd_client import AsyncClient
from ptyd_mcp import __version__
from ptyd_mcp.http import serve_http
from ptyd_mcp.server import build_server
from ptyd_mcp.terminals import DEFAULT_MAX_BYTES

DEFAULT_AGENT = "mcp"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="ptyd-mcp",
        description="An MCP server over ptyd: persistent terminals whose sessions outlive this server.",
    )
    parser.add_argument("--socket", help="ptyd's socket (default: $PTYD_SOCKET, else the daemon's default path)")
    parser.add_argument(
        "--agent",
        default=os.environ.get("PTYD_AGENT") or DEFAULT_AGENT,
        help="agent name: a restarted server with the same name sees the same sessions "
        f"(default: $PTYD_AGENT, else {DEFAULT_AGENT!r})",
    )
    parser.add_argument(
        "--max-bytes",
        type=int,
        default=int(os.environ.get("PTYD_MCP_MAX_BYTES") or DEFAULT_MAX_BYTES),
        help="viewport budget of a send in UTF-8 bytes when the model gives none (default: $PTYD_MCP_MAX_BYTES, "
        f"else {DEFAULT_MAX_BYTES}, about {DEFAULT_MAX_BYTES // 4} tokens); the cut keeps the tail and the errors",
    )
    http = parser.add_mutually_exclusive_group()
    http.add_argument("--http-socket", type=Path, help="serve streamable HTTP on this Unix socket (mode 0600)")
    http.add_argument("--http-port", type=int, help="serve streamable HTTP on 127.0.0.1:PORT (see the README)")
    parser.add_argument("--version", action="version", version=f"ptyd-mcp {__version__}")
    return parser.parse_args(argv)


async def serve_stdio(server: Server[Any]) -> None:
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


async def run(args: argparse.Namespace) -> None:
    client = AsyncClient(args.socket)
    client.token = None  # the token comes from the agent's token file, never from $PTYD_TOKEN
    server = build_server(client, args.agent, max_bytes=args.max_bytes)
    try:
        if args.http_socket is not None or args.http_port is not None:
            await serve_http(server, args.http_socket, args.http_port)
        else:
            await serve_stdio(server)
    finally:
        await client.close()


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    # stdout is the MCP channel over stdio: every diagnostic goes to stderr.
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="ptyd-mcp: %(levelname)s %(message)s")
    try:
        with contextlib.suppress(KeyboardInterrupt):
            anyio.run(run, args)
    except StartupError as exc:  # from --http-socket: a live server holds the path
        sys.exit(f"ptyd-mcp: {exc}")
