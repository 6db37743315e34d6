"""The codex tool set's schemas: Codex's own names, parameters, defaults and descriptions (unified exec), so a model
trained on Codex drives ptyd's sessions as it drives Codex's."""

from __future__ import annotations

import mcp_types as types

from ptyd_mcp.config import (
    CODEX_EXEC_YIELD_MS,
    CODEX_MAX_OUTPUT_TOKENS,
    CODEX_MAX_POLL_YIELD_MS,
    CODEX_MAX_YIELD_MS,
    CODEX_MIN_YIELD_MS,
    CODEX_POLL_YIELD_MS,
    CODEX_WRITE_YIELD_MS,
)
from ptyd_mcp.tools import ToolSpec

_MAX_TOKENS = {
    "type": "number",
    "description": f"Output token budget. Defaults to {CODEX_MAX_OUTPUT_TOKENS} tokens; longer output keeps its head "
    "and tail.",
}
# Codex's approval fields: accepted so a Codex-trained call validates, and ignored (ptyd's sandbox profiles apply).
_APPROVAL = {
    "sandbox_permissions": {"type": "string", "description": "Accepted for compatibility; ptyd's sandbox applies."},
    "justification": {"type": "string", "description": "Accepted for compatibility; not used."},
    "prefix_rule": {"type": "array", "items": {"type": "string"}, "description": "Accepted for compatibility."},
}

_OUTPUT = {
    "type": "object",
    "properties": {
        "chunk_id": {"type": "string"},
        "wall_time_seconds": {"type": "number"},
        "exit_code": {"type": ["integer", "null"], "description": "Set once the process ended."},
        "session_id": {"type": ["integer", "null"], "description": "Set while the process runs: for write_stdin."},
        "original_token_count": {"type": "integer"},
        "output": {"type": "string", "description": "What the process printed since the previous call."},
    },
    "required": ["chunk_id", "wall_time_seconds", "exit_code", "session_id", "original_token_count", "output"],
}

EXEC_COMMAND = ToolSpec(
    "exec_command",
    "Runs a command in a PTY, returning output or a session ID for ongoing interaction.",
    {
        "type": "object",
        "properties": {
            "cmd": {"type": "string", "description": "Shell command to execute."},
            "workdir": {
                "type": "string",
                "description": "Working directory for the command. Defaults to the directory ptyd starts sessions in.",
            },
            "shell": {"type": "string", "description": "Shell binary to launch. Defaults to /bin/bash."},
            "login": {
                "type": "boolean",
                "description": "True runs the shell with -l/-i semantics; false disables them. Defaults to true.",
            },
            "tty": {
                "type": "boolean",
                "description": "Accepted for compatibility: every command gets a PTY here, so write_stdin can type "
                "into it.",
            },
            "yield_time_ms": {
                "type": "number",
                "description": f"Wait before yielding output. Defaults to {CODEX_EXEC_YIELD_MS} ms; effective range "
                f"is {CODEX_MIN_YIELD_MS}-{CODEX_MAX_YIELD_MS} ms. Returns earlier when the command ends or waits "
                "for input.",
            },
            "max_output_tokens": _MAX_TOKENS,
            **_APPROVAL,
        },
        "required": ["cmd"],
        "additionalProperties": False,
    },
    _OUTPUT,
    types.ToolAnnotations(destructive_hint=True, open_world_hint=False),
)

WRITE_STDIN = ToolSpec(
    "write_stdin",
    "Writes characters to an existing unified exec session and returns recent output.",
    {
        "type": "object",
        "properties": {
            "session_id": {"type": "number", "description": "Identifier of the running unified exec session."},
            "chars": {"type": "string", "description": "Bytes to write to stdin (may be empty to poll)."},
            "yield_time_ms": {
                "type": "number",
                "description": f"How long to wait (in milliseconds) for output before yielding. Defaults to "
                f"{CODEX_WRITE_YIELD_MS} ms after a write (at most {CODEX_MAX_YIELD_MS}), {CODEX_POLL_YIELD_MS} ms "
                f"for an empty poll (at most {CODEX_MAX_POLL_YIELD_MS}).",
            },
            "max_output_tokens": _MAX_TOKENS,
        },
        "required": ["session_id"],
        "additionalProperties": False,
    },
    _OUTPUT,
    types.ToolAnnotations(destructive_hint=True, open_world_hint=False),
)

CODEX_TOOLS = (EXEC_COMMAND, WRITE_STDIN)
