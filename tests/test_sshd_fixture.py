"""The loopback sshd fixture works: a command runs as this user, with the environment the fixture promises."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from sshd import Sshd


def test_command_runs_as_this_user_through_sshd(sshd: Sshd) -> None:
    done = sshd.run("id", "-u", capture_output=True, timeout=30, check=True)
    assert done.stdout.decode().strip() == str(os.getuid())


def test_path_finds_this_venvs_ptyd_and_ptyd_variables_pass_through(sshd: Sshd) -> None:
    done = sshd.run(
        'command -v ptyd; echo "$PTYD_SOCKET"',
        capture_output=True,
        timeout=30,
        check=True,
        env={**os.environ, "PTYD_SOCKET": "/nowhere/ptyd.sock"},
    )
    ptyd, socket_path = done.stdout.decode().splitlines()
    assert Path(ptyd) == Path(sys.executable).parent / "ptyd"
    assert socket_path == "/nowhere/ptyd.sock"


def test_stdin_and_stdout_are_bridged(sshd: Sshd) -> None:
    done = sshd.run("cat", input=b"hello\x00\xffworld", capture_output=True, timeout=30, check=True)
    assert done.stdout == b"hello\x00\xffworld"
