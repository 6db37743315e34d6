"""The answer to ``initialize`` over stdio, given while the MCP SDK is still loading.

Loading the SDK (pydantic models of every protocol revision) takes most of ptyd-mcp's start: 1-3 s on a busy
2-core machine, which a host that starts a server per conversation waits every time. So the command line starts
the import in a thread, reads the host's first line, and when it is ``initialize`` answers it at once with what the
SDK would answer (the same name, capabilities, instructions and version negotiation, read from the SDK's own
version table without importing the SDK). The SDK then gets the same line replayed, so its session state is what
``initialize`` makes it, and its own answer to that id is dropped; an answer that differs from the early one is
logged (tests/mcp_server/test_http_and_packaging.py checks there is none). Only the standard library is used here.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
from dataclasses import dataclass
from typing import Any

from ptyd_mcp.instructions import SERVER_NAME, SERVER_TITLE, SERVER_VERSION, instructions

log = logging.getLogger("ptyd_mcp")

FIRST_LINE_MAX = 1024 * 1024  # a first line longer than this is no initialize this server answers early


@dataclass(frozen=True)
class Early:
    """The host's first line (replayed to the SDK) and, when it was initialize, the id and result answered."""

    first_line: bytes
    request_id: int | str | None
    result: dict[str, Any] | None


def handshake_versions() -> tuple[str, ...] | None:
    """The SDK's HANDSHAKE_PROTOCOL_VERSIONS, from its version module run alone (it imports only ``typing``):
    importing it as ``mcp_types.version`` would load the whole package first."""
    try:
        spec = importlib.util.find_spec("mcp_types")
        if spec is None or not spec.submodule_search_locations:
            return None
        path = os.path.join(next(iter(spec.submodule_search_locations)), "version.py")
        namespace: dict[str, Any] = {}
        with open(path, encoding="utf-8") as file:
            exec(compile(file.read(), path, "exec"), namespace)  # noqa: S102 - the installed SDK's own file
        versions = namespace["HANDSHAKE_PROTOCOL_VERSIONS"]
    except (OSError, KeyError, SyntaxError, ImportError):
        return None
    return tuple(versions) if isinstance(versions, tuple) else None


def initialize_result(params: Any, profiles: tuple[str, ...], versions: tuple[str, ...]) -> dict[str, Any]:
    """What the SDK's low-level server answers to ``initialize`` for this server (mcp.server.runner)."""
    requested = params.get("protocolVersion") if isinstance(params, dict) else None
    return {
        "protocolVersion": requested if requested in versions else versions[-1],
        "capabilities": {"tools": {"listChanged": False}},
        "serverInfo": {"name": SERVER_NAME, "title": SERVER_TITLE, "version": SERVER_VERSION},
        "instructions": instructions(profiles),
    }


def _read_line(fd: int) -> bytes:
    """One line from ``fd``, a byte at a time: nothing after it is taken from the pipe, the SDK reads the rest."""
    line = bytearray()
    while len(line) < FIRST_LINE_MAX:
        byte = os.read(fd, 1)
        if not byte:
            break
        line += byte
        if byte == b"\n":
            break
    return bytes(line)


def _write(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def answer_initialize(profiles: tuple[str, ...], stdin: int = 0, stdout: int = 1) -> Early:
    """Read the host's first line; answer it on ``stdout`` when it is ``initialize`` and the SDK's versions are
    known."""
    line = _read_line(stdin)
    try:
        message = json.loads(line)
    except ValueError:
        return Early(line, None, None)
    versions = handshake_versions()
    if not isinstance(message, dict) or message.get("method") != "initialize" or not versions:
        return Early(line, None, None)
    request_id = message.get("id")
    if not isinstance(request_id, int | str) or isinstance(request_id, bool) or not line.endswith(b"\n"):
        return Early(line, None, None)
    result = initialize_result(message.get("params"), profiles, versions)
    reply = {"jsonrpc": "2.0", "id": request_id, "result": result}
    _write(stdout, json.dumps(reply, separators=(",", ":"), ensure_ascii=False).encode() + b"\n")
    return Early(line, request_id, result)


class ReplayedStdin:
    """The SDK's stdin: the first line again, then the rest of the host's lines."""

    def __init__(self, first_line: str, rest: Any) -> None:
        self.first_line = first_line
        self.rest = rest

    async def _lines(self) -> Any:
        if self.first_line:
            yield self.first_line
        async for line in self.rest:
            yield line

    def __aiter__(self) -> Any:
        return self._lines()


class AnsweredStdout:
    """The SDK's stdout: drops its answer to the initialize already answered early, logging one that differs."""

    def __init__(self, out: Any, early: Early) -> None:
        self.out = out
        self.pending = early.request_id
        self.early = early.result

    async def write(self, text: str) -> int:
        if self.pending is not None:
            try:
                message = json.loads(text)
            except ValueError:
                message = None
            if isinstance(message, dict) and message.get("id") == self.pending and "method" not in message:
                self.pending = None
                if message.get("result") != self.early:
                    log.warning("the early answer to initialize was %s; the SDK's is %s", self.early, text.strip())
                return len(text)
        written: int = await self.out.write(text)
        return written

    async def flush(self) -> None:
        await self.out.flush()
