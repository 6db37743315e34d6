"""A second, independent MCP client drives ptyd-mcp: the MCP Inspector's CLI (TypeScript SDK), pinned in
``inspector/package-lock.json`` and installed there with ``npm ci`` on first use.

Each Inspector call launches its own ``ptyd-mcp`` over stdio, so these tests also show a session outliving the
server process that opened it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from conftest import Daemon
from ptyd_mcp.tools import BY_NAME

from .harness import ROOT, new_agent, server_argv, server_env

HERE = Path(__file__).resolve().parent / "inspector"
NODE = shutil.which("node")
pytestmark = pytest.mark.skipif(NODE is None, reason="node is not installed (Debian: apt-get install nodejs npm)")


@pytest.fixture(scope="module")
def inspector() -> Path:
    npm = shutil.which("npm")
    assert npm is not None, "node is installed but npm is not (Debian: apt-get install npm)"
    installed = HERE / "node_modules" / ".package-lock.json"
    lock = HERE / "package-lock.json"
    if not installed.exists() or installed.stat().st_mtime < lock.stat().st_mtime:
        subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=HERE, check=True, timeout=300)
    return HERE / "node_modules" / ".bin" / "mcp-inspector"


class Inspector:
    def __init__(self, binary: Path, home: Path, socket_path: Path, agent: str) -> None:
        self.binary = binary
        self.home = home
        self.server = server_argv(socket_path, agent)

    def run(self, method: str, *options: str) -> subprocess.CompletedProcess[str]:
        env = server_env() | {"HOME": str(self.home), "MCP_CATALOG_PATH": str(self.home / "catalog.json")}
        argv = [str(self.binary), "--cli", "--method", method, *options, "--", *self.server]
        return subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT, timeout=90, check=False)

    def call(self, tool: str, **arguments: Any) -> dict[str, Any]:
        pairs = [f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in arguments.items()]
        proc = self.run("tools/call", "--tool-name", tool, *(["--tool-arg", *pairs] if pairs else []))
        # The CLI exits 5 for a result with isError: the result is still printed.
        assert proc.returncode in (0, 5), f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
        result: dict[str, Any] = json.loads(proc.stdout)
        assert result["isError"] == (proc.returncode == 5)
        return result


@pytest.fixture
def cli(inspector: Path, tmp_path: Path, daemon: Daemon) -> Inspector:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    return Inspector(inspector, home, daemon.socket, new_agent())


def test_inspector_lists_portable_tool_schemas(cli: Inspector) -> None:
    proc = cli.run("tools/list", "--strict")  # exits 6 on any error-severity schema portability problem
    assert proc.returncode == 0, proc.stderr
    tools = json.loads(proc.stdout)["tools"]
    assert {tool["name"] for tool in tools} == set(BY_NAME)
    for tool in tools:
        assert tool["outputSchema"]["type"] == "object", tool["name"]
        assert "token" not in tool["inputSchema"]["properties"], tool["name"]


def test_inspector_drives_a_session_across_server_processes(cli: Inspector) -> None:
    opened = cli.call("terminal_open", env={"PS1": "$ "}, name="inspected")
    assert not opened["isError"]
    sid = opened["structuredContent"]["session_id"]

    sent = cli.call("terminal_send", session_id=sid, input="echo via-inspector-$((40+2))\n")
    assert sent["structuredContent"]["wait_reason"] == "stdin_read"
    assert "via-inspector-42" in sent["structuredContent"]["viewport"]
    assert "[stdin_read: `bash` is waiting for input" in sent["content"][0]["text"]

    screen = cli.call("terminal_screen", session_id=sid)
    assert "via-inspector-42" in screen["structuredContent"]["lines"]
    listed = cli.call("terminal_list")
    assert [s["session_id"] for s in listed["structuredContent"]["sessions"]] == [sid]

    missing = cli.call("terminal_read", session_id="pty-missing")
    assert missing["isError"]
    assert "No session pty-missing" in missing["content"][0]["text"]

    closed = cli.call("terminal_close", session_id=sid)
    assert closed["structuredContent"]["closed"]
