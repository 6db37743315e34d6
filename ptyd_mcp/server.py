"""The MCP server: the official SDK's low-level ``Server`` with the tools of :mod:`ptyd_mcp.tools`.

Every failure a model can act on (an unknown, busy or exited session, bad arguments, a daemon that is down) is a
tool result with ``isError: true`` and a next step, never a protocol error, and the server keeps serving. An
unexpected exception is logged with an incident id, and only the id reaches the host.
"""

from __future__ import annotations

import logging
import secrets
from typing import Any

import mcp_types as types
from mcp.server import Server, ServerRequestContext

from ptyd_client import AsyncClient, DaemonUnavailable, PtydError
from ptyd_mcp import __version__, text
from ptyd_mcp.terminals import DEFAULT_MAX_BYTES, Outcome, Progress, Terminals
from ptyd_mcp.tools import BY_NAME, INSTRUCTIONS, TOOLS

log = logging.getLogger("ptyd_mcp")


def _result(outcome: Outcome, notices: list[str]) -> types.CallToolResult:
    body = "\n".join([*notices, outcome.text])
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=body)], structured_content=outcome.structured
    )


def _failure(message: str, notices: list[str]) -> types.CallToolResult:
    body = "\n".join([*notices, message])
    return types.CallToolResult(content=[types.TextContent(type="text", text=body)], is_error=True)


def _progress(ctx: ServerRequestContext[Any]) -> Progress | None:
    """A progress reporter when the host asked for progress on this call (it sent a progress token)."""
    if not ctx.meta or ctx.meta.get("progress_token") is None:
        return None

    async def report(elapsed_s: float, message: str | None) -> None:
        await ctx.session.report_progress(round(elapsed_s, 1), None, message)

    return report


def build_server(client: AsyncClient, agent: str, *, max_bytes: int = DEFAULT_MAX_BYTES) -> Server[Any]:
    """An MCP server acting as ``agent`` on the daemon behind ``client``; ``max_bytes``: the viewport budget of a
    send when the model gives none."""
    terminals = Terminals(client, agent, max_bytes=max_bytes)

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[spec.tool() for spec in TOOLS])

    async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        args = dict(params.arguments or {})
        session_id = args.get("session_id")
        sid = session_id if isinstance(session_id, str) else None
        if params.name not in BY_NAME:
            names = ", ".join(BY_NAME)
            return _failure(f"There is no tool {params.name!r}; the tools are {names}.", [])
        try:
            outcome = await terminals.dispatch(params.name, args, _progress(ctx))
        except (PtydError, DaemonUnavailable) as exc:
            return _failure(text.error(exc, sid), terminals.take_notices())
        except Exception:
            incident = secrets.token_hex(4)
            log.exception("incident %s: %s failed", incident, params.name)
            return _failure(f"ptyd-mcp failed unexpectedly (incident {incident}, in its log). Try again.", [])
        return _result(outcome, terminals.take_notices())

    return Server(
        "ptyd-mcp",
        version=__version__,
        title="ptyd terminals",
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
