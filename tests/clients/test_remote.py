"""Reaching ptyd on another machine: ``ptyd dial-stdio`` alone, then ptyctl and the Python client through a real
sshd on a loopback port (``ssh testhost ptyd dial-stdio``), as a client on another host would."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, Daemon
from sshd import Sshd

CLIENT_DIR = ROOT / "clients" / "python"
sys.path.insert(0, str(CLIENT_DIR))

from ptyd_client import AsyncClient, Client, DaemonUnavailable  # noqa: E402 - importable once on the path

PTYD = [sys.executable, "-m", "ptyd"]


def remote_env(sshd: Sshd, daemon_socket: Path, **extra: str) -> dict[str, str]:
    """What a client needs to reach ``daemon_socket`` through the loopback sshd, and nothing local."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PTYD_")}
    env["PYTHONPATH"] = str(CLIENT_DIR)
    env["PTYD_SSH_COMMAND"] = " ".join(sshd.ssh)
    # The remote side finds its daemon by --socket; nothing on this side names the socket.
    env["PTYD_REMOTE_PTYD"] = f"ptyd --socket {daemon_socket}"
    return {**env, **extra}


@pytest.fixture
def over_ssh(sshd: Sshd, daemon: Daemon, monkeypatch: pytest.MonkeyPatch) -> Sshd:
    """This process's clients reach the shared daemon only through ssh."""
    for name, value in remote_env(sshd, daemon.socket).items():
        if name.startswith("PTYD_"):
            monkeypatch.setenv(name, value)
    monkeypatch.delenv("PTYD_SOCKET", raising=False)
    return sshd


def logins(sshd: Sshd) -> int:
    return sshd.log().count("Accepted publickey")


# --- dial-stdio on its own ---------------------------------------------------------------------------------


def test_dial_stdio_bridges_one_connection_until_the_daemon_closes_it(daemon: Daemon) -> None:
    requests = b"".join(
        json.dumps({"jsonrpc": "2.0", "id": i, "method": "daemon_info"}).encode() + b"\n" for i in (1, 2)
    )
    done = subprocess.run(
        [*PTYD, "dial-stdio", "--socket", str(daemon.socket)], input=requests, capture_output=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert [a["id"] for a in answers] == [1, 2]
    assert daemon.proc is not None
    assert all(a["result"]["pid"] == daemon.proc.pid for a in answers)


def test_dial_stdio_without_a_daemon_exits_3_and_says_why(tmp_path: Path) -> None:
    done = subprocess.run(
        [*PTYD, "dial-stdio", "--socket", str(tmp_path / "ptyd.sock")], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 3
    assert "no socket there: is ptyd running on this machine?" in done.stderr


def test_dial_stdio_names_a_regular_file_for_what_it_is(tmp_path: Path) -> None:
    (tmp_path / "ptyd.sock").write_text("")
    done = subprocess.run(
        [*PTYD, "dial-stdio", "--socket", str(tmp_path / "ptyd.sock")], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 3
    assert "not a socket" in done.stderr


# --- through a real sshd ---------------------------------------------------------------------------------------


def test_ptyctl_drives_a_session_through_ssh(sshd: Sshd, daemon: Daemon) -> None:
    env = remote_env(sshd, daemon.socket)
    before = logins(sshd)

    def ptyctl(*args: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "ptyd_client", "--host", "ssh://testhost", *args]
        return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60)

    status = ptyctl("--json", "status")
    assert status.returncode == 0, status.stderr
    assert daemon.proc is not None
    assert json.loads(status.stdout)["pid"] == daemon.proc.pid
    assert json.loads(status.stdout)["socket"] == "ssh://testhost"
    opened = ptyctl("open", "--name", "over-ssh", "--env", "PS1=$ ")
    assert opened.returncode == 0, opened.stderr
    sid = opened.stdout.strip()
    try:
        sent = ptyctl("send", "over-ssh", "echo remote-$((6*7))")  # by name
        assert sent.returncode == 0, sent.stderr
        assert "remote-42" in sent.stdout
        assert "[stdin_read, exit code 0]" in sent.stderr
        listed = ptyctl("ls")
        assert sid in listed.stdout
    finally:
        closed = ptyctl("close", sid)
    assert closed.returncode == 0, closed.stderr
    assert logins(sshd) > before  # every one of those went through sshd


def test_ptyctl_reports_an_unreachable_host_with_exit_code_3(sshd: Sshd, daemon: Daemon) -> None:
    env = remote_env(sshd, daemon.socket)
    argv = [sys.executable, "-m", "ptyd_client", "--host", "ssh://testhost:1", "status"]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 3
    assert "ssh://testhost:1" in done.stderr
    assert "refused" in done.stderr.lower()  # ssh's own reason


def test_a_far_side_without_ptyd_on_its_path_names_ptyd_remote_ptyd(sshd: Sshd, daemon: Daemon) -> None:
    env = remote_env(sshd, daemon.socket, PTYD_REMOTE_PTYD="ptyd-not-installed-there")
    for command in (["status"], ["ls"]):  # without a token (a dial-stdio stream) and with one (operator-token)
        argv = [sys.executable, "-m", "ptyd_client", "--host", "ssh://testhost", *command]
        done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60)
        assert done.returncode == 3, done.stderr
        assert "command not found" in done.stderr  # the remote shell's own words
        assert "set PTYD_REMOTE_PTYD to its full path there" in done.stderr


def test_python_client_with_ptyd_host_runs_a_session(over_ssh: Sshd, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PTYD_HOST", "ssh://testhost")
    before = logins(over_ssh)
    with Client() as ptyd:
        assert ptyd.socket_path == "ssh://testhost"
        ptyd.agent_register("remote-agent")
        try:
            with ptyd.open(env={"PS1": "$ "}) as shell:
                result = shell.send("echo hello from $((6*7))\n")
                assert result["wait_reason"] == "stdin_read"
                assert "hello from 42" in result["viewport"]
                assert any("hello from 42" in line for line in shell.read(0)["lines"])
        finally:
            ptyd.agent_release()
    assert logins(over_ssh) == before + 1  # one ssh connection carried every call


def test_async_client_over_ssh_runs_concurrent_calls(over_ssh: Sshd) -> None:
    async def main() -> None:
        async with AsyncClient(host="ssh://testhost") as ptyd:
            await ptyd.agent_register("remote-async")
            shell = await ptyd.open(env={"PS1": "$ "})
            sent, info = await asyncio.gather(shell.send("sleep 0.3; echo slept\n"), ptyd.daemon_info())
            assert "slept" in sent["viewport"]
            assert info["sessions"] >= 1
            await ptyd.agent_release()

    asyncio.run(main())


def test_a_host_without_a_running_daemon_is_daemon_unavailable(
    over_ssh: Sshd, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PTYD_REMOTE_PTYD", f"ptyd --socket {tmp_path / 'none.sock'}")
    with Client(host="ssh://testhost") as ptyd, pytest.raises(DaemonUnavailable) as caught:
        ptyd.daemon_info()
    assert "no socket there" in str(caught.value)
    assert caught.value.socket_path == "ssh://testhost"
