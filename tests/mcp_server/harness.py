"""ptyd-mcp under test: the real server as a subprocess over stdio, driven by the official MCP SDK's client."""

from __future__ import annotations

import os
import secrets
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters
from mcp_types import CallToolResult, TextContent

ROOT = Path(__file__).resolve().parents[2]


def server_env() -> dict[str, str]:
    """The environment a host gives ptyd-mcp: nothing of the test's own ptyd settings."""
    return {k: v for k, v in os.environ.items() if not k.startswith("PTYD_")}


def server_argv(socket_path: Path, agent: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "ptyd_mcp", "--socket", str(socket_path), "--agent", agent, *extra]


def new_agent() -> str:
    return "test-" + secrets.token_hex(4)


@asynccontextmanager
async def mcp_client(socket_path: Path, agent: str, *extra: str) -> AsyncIterator[Client]:
    """A host's view: launch ``ptyd-mcp`` (with ``extra`` arguments) over stdio and complete the initialize
    handshake."""
    argv = server_argv(socket_path, agent, *extra)
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=server_env(), cwd=str(ROOT))
    async with Client(params, mode="legacy") as client:
        yield client


def text_of(result: CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))


async def ok(client: Client, tool: str, **arguments: Any) -> tuple[str, dict[str, Any]]:
    """Call a tool that must succeed; its text and structured content."""
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, text_of(result)
    assert result.structured_content is not None
    return text_of(result), result.structured_content


async def fails(client: Client, tool: str, **arguments: Any) -> str:
    """Call a tool that must fail as a tool result (isError), not as a protocol error; its text."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error, text_of(result)
    return text_of(result)
