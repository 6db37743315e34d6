"""``ptyd-mcp --agent-key-file``: the harness proves its agent's name with the key the operator issued (issue 27,
item 4), so the name's looser profile is given; without the key, or with a key others may read, it is not."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from conftest import ROOT, Daemon, RpcError

from .harness import mcp_client, ok, server_argv, server_env


def issue_key(name: str) -> tuple[str, str]:
    """``ptyd agent-key NAME``: the key, and the config line with its digest."""
    done = subprocess.run(
        [sys.executable, "-m", "ptyd", "agent-key", name], capture_output=True, text=True, cwd=ROOT, check=True
    )
    return done.stdout.splitlines()[0].rsplit(" ", 1)[1], done.stdout.splitlines()[1].split(": ", 1)[1]


@pytest.fixture
def keyed(fresh_daemon: Daemon, tmp_path: Path) -> tuple[Daemon, Path]:
    key, line = issue_key("trusted")
    # A default stricter than the name's "none": only a proven registration gets "none".
    config = 'sandbox_default = "readonly"\nsandbox_agents = { "trusted" = "none" }\n'
    fresh_daemon.config_path.write_text(f"{config}[agent_keys]\n{line}\n")
    fresh_daemon.start()
    path = tmp_path / "trusted.key"
    path.write_text(key + "\n")
    path.chmod(0o600)
    return fresh_daemon, path


def test_the_key_file_proves_the_name_and_gets_its_profile(keyed: tuple[Daemon, Path]) -> None:
    daemon, key_file = keyed

    async def scenario(*extra: str) -> str:
        async with mcp_client(daemon.socket, "trusted", *extra) as client:
            _, opened = await ok(client, "terminal_open", cwd=str(key_file.parent))
            sandbox = str(opened["sandbox"])
            await ok(client, "terminal_close", session_id=opened["session_id"])
            return sandbox

    assert anyio.run(scenario, "--agent-key-file", str(key_file)) == "none"  # proven: the name's own profile


def test_without_the_key_the_name_gets_the_default(keyed: tuple[Daemon, Path]) -> None:
    daemon, _ = keyed
    with daemon.rpc() as rpc:
        token = rpc.call("agent_register", name="trusted")["token"]
        with pytest.raises(RpcError) as refused:
            rpc.call("terminal_open", token=token, sandbox="none")
        assert refused.value.kind == "sandbox_refused"
        assert refused.value.data["agent_profile"] == "readonly"


def test_a_key_file_others_may_read_is_refused(keyed: tuple[Daemon, Path]) -> None:
    daemon, key_file = keyed
    key_file.chmod(0o644)
    done = subprocess.run(
        server_argv(daemon.socket, "trusted", "--agent-key-file", str(key_file)),
        env=server_env(),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "others may read it (mode 644); chmod 600 it" in done.stderr
