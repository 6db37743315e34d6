"""``ptyd-mcp``: serve ptyd's terminals to an MCP host over stdio (default) or streamable HTTP.

This module imports nothing but the standard library: ``--help`` and ``--version`` answer at once, and the MCP SDK
(the ``mcp`` extra, most of the start-up time) is loaded only to serve, by :mod:`ptyd_mcp.serve`.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import importlib.util
import logging
import os
import sys
from pathlib import Path
from typing import Any

from ptyd_mcp import __version__
from ptyd_mcp.config import DEFAULT_AGENT, DEFAULT_MAX_BYTES, PROFILES

# The distributions the ``mcp`` extra brings, by the top-level module a missing one shows up as.
EXTRA_MODULES = frozenset({"mcp", "mcp_types", "anyio", "pydantic", "starlette", "uvicorn", "httpx2", "sse_starlette"})
MISSING_EXTRA = (
    "ptyd-mcp: the MCP SDK is not installed ({missing} is missing): it is ptyd's 'mcp' extra. Install it with "
    "`pip install 'ptyd[mcp]'`, from a checkout `pip install '.[mcp]'` (or `pipx install --force '.[mcp]'`)."
)


def read_agent_key(parser: argparse.ArgumentParser, path: Path) -> str:
    """The registration key in ``path``, which only its owner may read (as ssh holds its keys): a key others can
    read proves nothing."""
    try:
        info = os.stat(path)
        key = path.read_text().strip()
    except OSError as exc:
        parser.error(f"--agent-key-file {path}: {exc.strerror}")
    if info.st_mode & 0o077:
        parser.error(f"--agent-key-file {path}: others may read it (mode {info.st_mode & 0o777:o}); chmod 600 it")
    if not key:
        parser.error(f"--agent-key-file {path}: it is empty")
    return key


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
        "--agent-key-file",
        type=Path,
        default=os.environ.get("PTYD_AGENT_KEY_FILE") or None,
        help="a file (mode 0600) holding the agent's registration key (`ptyd agent-key NAME` prints one), which "
        "proves the name to the daemon: a profile looser than sandbox_default, roots of its own "
        "(default: $PTYD_AGENT_KEY_FILE)",
    )
    parser.add_argument(
        "--max-bytes",
        type=int,
        default=int(os.environ.get("PTYD_MCP_MAX_BYTES") or DEFAULT_MAX_BYTES),
        help="viewport budget of a send in UTF-8 bytes when the model gives none (default: $PTYD_MCP_MAX_BYTES, "
        f"else {DEFAULT_MAX_BYTES}, about {DEFAULT_MAX_BYTES // 4} tokens); the cut keeps the tail and the errors",
    )
    parser.add_argument(
        "--tools",
        default=os.environ.get("PTYD_MCP_TOOLS") or "ptyd",
        help="the tool set, or several comma-separated: 'ptyd' (terminal_open, terminal_send, ...), 'codex' "
        "(exec_command and write_stdin, the shape of Codex's unified exec) (default: $PTYD_MCP_TOOLS, else ptyd)",
    )
    http = parser.add_mutually_exclusive_group()
    http.add_argument("--http-socket", type=Path, help="serve streamable HTTP on this Unix socket (mode 0600)")
    http.add_argument("--http-port", type=int, help="serve streamable HTTP on 127.0.0.1:PORT (see the README)")
    parser.add_argument(
        "--no-early-initialize",
        action="store_true",
        help="over stdio, let the MCP SDK answer initialize once it is loaded, rather than at once (ptyd_mcp.early)",
    )
    parser.add_argument("--version", action="version", version=f"ptyd-mcp {__version__}")
    args = parser.parse_args(argv)
    args.agent_key = read_agent_key(parser, args.agent_key_file) if args.agent_key_file else None
    args.profiles = tuple(dict.fromkeys(name.strip() for name in args.tools.split(",") if name.strip()))
    unknown = [name for name in args.profiles if name not in PROFILES]
    if unknown or not args.profiles:
        parser.error(f"--tools: unknown tool set {', '.join(unknown) or '(none)'}; the sets are {', '.join(PROFILES)}")
    return args


def _load_serving() -> Any:
    """ptyd_mcp.serve (the SDK), or the message naming the extra when it is not installed."""
    try:
        from ptyd_mcp import serve
    except ModuleNotFoundError as exc:
        missing = (exc.name or "").partition(".")[0]
        if missing not in EXTRA_MODULES:
            raise
        sys.exit(MISSING_EXTRA.format(missing=missing))
    return serve


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    # stdout is the MCP channel over stdio: every diagnostic goes to stderr.
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="ptyd-mcp: %(levelname)s %(message)s")
    early = None
    if args.http_socket is None and args.http_port is None and not args.no_early_initialize:
        if importlib.util.find_spec("mcp") is None:  # answer no initialize for a server that cannot serve
            sys.exit(MISSING_EXTRA.format(missing="mcp"))
        # The SDK loads in a thread while the host's initialize is answered (ptyd_mcp.early).
        with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="load-sdk") as loader:
            loading = loader.submit(_load_serving)
            from ptyd_mcp.early import answer_initialize

            early = answer_initialize(args.profiles)
            serving = loading.result()
    else:
        serving = _load_serving()
    try:
        with contextlib.suppress(KeyboardInterrupt):
            serving.serve(args, early)
    except serving.StartupError as exc:  # from --http-socket: a live server holds the path
        sys.exit(f"ptyd-mcp: {exc}")
