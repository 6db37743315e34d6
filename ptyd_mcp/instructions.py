"""What the server tells a host about itself at initialize: its name and the instructions of each tool set.
Standard library only: the early answer to initialize (:mod:`ptyd_mcp.early`) is made before the SDK is loaded."""

from __future__ import annotations

from ptyd_mcp import __version__

SERVER_NAME = "ptyd-mcp"
SERVER_TITLE = "ptyd terminals"
SERVER_VERSION = __version__

PTYD_INSTRUCTIONS = """\
Persistent terminals owned by ptyd, a daemon outside this server: sessions survive restarts of this server and of \
the host, so reuse them (terminal_list shows them again) instead of opening a new one per command. \
terminal_send types input and returns the moment the program waits for input again (asked of the kernel, not \
guessed from the prompt), with what the terminal showed and why it returned. A person can watch any session live \
with `ptyctl watch ID` and type into it with `ptyctl attach ID`."""

CODEX_INSTRUCTIONS = """\
Commands run in terminals owned by ptyd, a daemon outside this server. exec_command runs one command and returns \
its output once it ends (Process exited with code N), or after yield_time_ms with a session ID while it still runs \
(Process running with session ID N): then write_stdin with that session_id types into it (chars, '\\u0003' is \
Ctrl-C) or, with empty chars, polls for more output until it exits. A person can watch a session live with \
`ptyctl watch` (ptyctl ls lists them)."""

BY_PROFILE = {"ptyd": PTYD_INSTRUCTIONS, "codex": CODEX_INSTRUCTIONS}


def instructions(profiles: tuple[str, ...]) -> str:
    """The instructions of the tool sets ``profiles`` names, in that order."""
    return "\n\n".join(BY_PROFILE[name] for name in profiles)
