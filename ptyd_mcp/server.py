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
from ptyd_mcp import text
from ptyd_mcp.codex import CodexExec, UnknownSession
from ptyd_mcp.codex_tools import CODEX_TOOLS
from ptyd_mcp.config import DEFAULT_MAX_BYTES
from ptyd_mcp.instructions import SERVER_NAME, SERVER_TITLE, SERVER_VERSION, instructions
from ptyd_mcp.terminals import Outcome, Progress, Terminals
from ptyd_mcp.tools import TOOLS, ToolSpec

log = logging.getLogger("ptyd_mcp")


def _result(outcome: Outcome, notices: list[str]) -> types.CallToolResult:
    body = "\n".join([*notices, outcome.text])
    content: list[types.ContentBlock] = [types.TextContent(type="text", text=body)]
    if outcome.image_png is not None:
        content.append(types.ImageContent(type="image", data=outcome.image_png, mime_type="image/png"))
    return types.CallToolResult(content=content, structured_content=outcome.structured)


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


def _unknown_session(number: object) -> str:
    return (
        f"Unknown session ID {number}: no process of exec_command runs under it (it was never given, or its exit "
        "was reported already, which ends it). Run the command again with exec_command."
    )


def build_server(
    client: AsyncClient,
    agent: str,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    profiles: tuple[str, ...] = ("ptyd",),
    key: str | None = None,
) -> Server[Any]:
    """An MCP server acting as ``agent`` on the daemon behind ``client``, with the tool sets ``profiles`` names
    (ptyd_mcp.config.PROFILES); ``max_bytes``: the viewport budget of a send when the model gives none; ``key``:
    the agent's registration key (--agent-key-file), which proves its name."""
    terminals = Terminals(client, agent, max_bytes=max_bytes, key=key)
    codex = CodexExec(terminals.rpc)
    specs: list[ToolSpec] = []
    for profile in profiles:
        specs += {"ptyd": TOOLS, "codex": CODEX_TOOLS}[profile]
    by_name = {spec.name: spec for spec in specs}
    tools = [spec.tool() for spec in specs]

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def run(name: str, args: dict[str, Any], ctx: ServerRequestContext[Any]) -> Outcome:
        if name == "exec_command":
            chunk = await codex.exec_command(args)
            return Outcome(chunk.text(), chunk.structured())
        if name == "write_stdin":
            chunk = await codex.write_stdin(args)
            return Outcome(chunk.text(), chunk.structured())
        return await terminals.dispatch(name, args, _progress(ctx))

    async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        args = dict(params.arguments or {})
        session_id = args.get("session_id")
        sid = session_id if isinstance(session_id, str) else None
        if params.name not in by_name:
            names = ", ".join(by_name)
            return _failure(f"There is no tool {params.name!r}; the tools are {names}.", [])
        try:
            outcome = await run(params.name, args, ctx)
        except UnknownSession as exc:
            return _failure(_unknown_session(exc.args[0]), terminals.take_notices())
        except ValueError as exc:  # arguments a tool of this server checks itself (exec_command's cmd)
            return _failure(f"Invalid arguments: {exc}.", [])
        except (PtydError, DaemonUnavailable) as exc:
            return _failure(text.error(exc, sid), terminals.take_notices())
        except Exception:
            incident = secrets.token_hex(4)
            log.exception("incident %s: %s failed", incident, params.name)
            return _failure(f"ptyd-mcp failed unexpectedly (incident {incident}, in its log). Try again.", [])
        return _result(outcome, terminals.take_notices())

    return Server(
        SERVER_NAME,
        version=SERVER_VERSION,
        title=SERVER_TITLE,
        instructions=instructions(profiles),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
