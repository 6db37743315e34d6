"""A descriptor the daemon inherited reaches no session (issue 27, attack 7): spawns close every fd but 0-2 and
the gate, sandboxed or not."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, Daemon, Shell

INHERITED_FD = 42  # a number no shell uses itself (bash keeps 255, the gate is 3 and closed at once)


@pytest.mark.parametrize("profile", ["none", "workspace"])
def test_a_descriptor_the_daemon_inherited_is_not_in_any_session(
    fresh_daemon: Daemon, tmp_path: Path, profile: str
) -> None:
    if profile != "none" and shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed")
    fresh_daemon.config_path.write_text(f'sandbox_scratch_dir = "{tmp_path / "scratch"}"\n')
    target = tmp_path / "written-through"
    fd = os.open(target, os.O_WRONLY | os.O_CREAT, 0o600)
    os.dup2(fd, INHERITED_FD)  # inheritable
    os.close(fd)
    argv = [
        sys.executable,
        "-m",
        "ptyd",
        "--socket",
        str(fresh_daemon.socket),
        "--config",
        str(fresh_daemon.config_path),
    ]
    log = open(fresh_daemon.log_path, "ab")  # noqa: SIM115 - handed to the child
    try:
        fresh_daemon.proc = subprocess.Popen(
            argv,
            stdout=log,
            stderr=log,
            cwd=ROOT,
            env={k: v for k, v in os.environ.items() if not k.startswith("PTYD_") and k != "SHELL"},
            pass_fds=(INHERITED_FD,),
        )
    finally:
        os.close(INHERITED_FD)
        log.close()
    fresh_daemon.wait_ready()
    assert Path(f"/proc/{fresh_daemon.proc.pid}/fd/{INHERITED_FD}").exists()  # the daemon does hold it
    with fresh_daemon.rpc() as rpc:
        token = rpc.call("agent_register", name="fd-reader")["token"]
        s = Shell(rpc, token, env={"PS1": "$ "}, sandbox=profile)
        assert s.opened["sandbox"] == profile
        result = s.send(f"ls /proc/$$/fd | sort -n | tr '\\n' ' '; echo; echo pwned >&{INHERITED_FD}\n")
        lines = result["viewport"].splitlines()
        assert lines[-3].split() == ["0", "1", "2", "255"], result["viewport"]
        assert "Bad file descriptor" in lines[-2], result["viewport"]
    assert target.read_text() == ""
