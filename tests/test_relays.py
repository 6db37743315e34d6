"""Readiness through relays: programs that run the real shell on a terminal of their own and copy bytes.

Local relays (script, sudo with use_pty, Python's pty.spawn, expect) are followed to the innermost
terminal, so their sends are exact (``ready_basis == "kernel"``). ssh is opaque: a send settles once the far side
drew a prompt and went quiet (``relay_quiet``), or on the far shell's signed prompt mark after
``terminal_integrate`` (``shell_integration``). In every case a silent command behind the relay is waited for.
"""

from __future__ import annotations

import contextlib
import shlex
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import Rpc, RpcError, Shell, latency
from sshd import HOST_ALIAS, Sshd

LOCAL_RELAYS = {
    "script": "script -q /dev/null",
    "sudo": "sudo -i",
    "pty.spawn": 'python3 -c \'import pty; pty.spawn(["bash", "--norc"])\'',
    "expect": "expect -c 'spawn -noecho bash --norc; interact'",
}


def _relay_shell(rpc: Rpc, token: str, command: str) -> Shell:
    # script runs $SHELL: bash, whatever the login shell is (dash's read has no -s)
    s = Shell(rpc, token, env={"PS1": "$ ", "SHELL": shutil.which("bash") or "/bin/bash"})
    opened = s.send(command + "\n")
    assert opened["wait_reason"] == "stdin_read", opened
    s.send("PS1='inner$ '\n")
    return s


@pytest.fixture(params=list(LOCAL_RELAYS))
def local_relay(request: pytest.FixtureRequest, rpc: Rpc, token: str) -> Iterator[Shell]:
    command = LOCAL_RELAYS[request.param]
    if shutil.which(command.split()[0]) is None:
        pytest.skip(f"{command.split()[0]} is not installed")
    s = _relay_shell(rpc, token, command)
    yield s
    with contextlib.suppress(RpcError, OSError):
        s.close()


def test_local_relay_waits_for_a_silent_command(local_relay: Shell) -> None:
    started = time.monotonic()
    result = local_relay.send("sleep 1; echo slept\n")
    assert time.monotonic() - started >= 0.95
    assert result["wait_reason"] == "stdin_read"
    assert result["ready_basis"] == "kernel"
    assert result["viewport"].splitlines()[-2:] == ["slept", "inner$"]


def test_local_relay_sees_an_input_prompt_exactly(local_relay: Shell) -> None:
    result = local_relay.send("read -p 'Name: ' name\n", idle_ms=10_000)
    assert result["wait_reason"] == "stdin_read"
    assert result["ready_basis"] == "kernel"
    assert result["viewport"].splitlines()[-1] == "Name:"
    result = local_relay.send("bob\n")
    assert result["viewport"].splitlines()[-1] == "inner$"
    assert local_relay.send("echo $name\n")["viewport"].splitlines()[-2:] == ["bob", "inner$"]


def test_local_relay_program_inside_is_waited_for(local_relay: Shell) -> None:
    result = local_relay.send("python3 -q\n")
    assert result["viewport"].splitlines()[-1] == ">>>"
    result = local_relay.send("import time; time.sleep(0.5); print('woke')\n")
    assert result["wait_reason"] == "stdin_read"
    assert result["viewport"].splitlines()[-2:] == ["woke", ">>>"]
    local_relay.send("exit()\n")


def test_a_cancel_behind_a_local_relay_interrupts_the_command_not_the_relay(local_relay: Shell) -> None:
    # The relay's terminal is raw: Ctrl-C is a key there, which it forwards to the terminal its shell has. A SIGINT
    # to its group ended script with the shell behind it ("Session terminated, killing shell").
    assert local_relay.send("sleep 30\n", timeout_ms=300)["wait_reason"] == "timeout"
    cancelled = local_relay.call("terminal_cancel")
    # In a sandbox sudo refuses to run (no sudoers there): sleep itself is in front, and its terminal signals.
    pressed = ("C-c", None) if cancelled["program"] != "sleep" else (None, "SIGINT")
    assert (cancelled["interrupted"], cancelled["key"], cancelled["signal"]) == (True, *pressed), cancelled
    result = local_relay.send("echo still here\n")
    assert result["viewport"].splitlines()[-2:] == ["still here", "inner$"], result["viewport"]


def test_local_relay_password_prompt(local_relay: Shell) -> None:
    result = local_relay.send("read -s -p 'Passphrase: ' secret\n", idle_ms=10_000)
    assert result["wait_reason"] == "stdin_read", result
    assert result["viewport"].splitlines()[-1] == "Passphrase:", result
    assert result["password_prompt"] is True, result
    result = local_relay.send("hunter2\n")
    assert result["password_prompt"] is False, result
    assert "hunter2" not in result["viewport"]


# --- terminal multiplexers: their server reads our terminal, the client in front only waits on its socket -------

MULTIPLEXERS = {
    "tmux": "tmux -S {dir}/tmux.sock -f /dev/null new-session 'env PS1=\"pane$ \" bash --norc -i'",
    "screen": "env SCREENDIR={dir} PS1='pane$ ' screen -q bash --norc -i",
}


@pytest.fixture(params=list(MULTIPLEXERS))
def multiplexer(request: pytest.FixtureRequest, rpc: Rpc, token: str, tmp_path: Path) -> Iterator[Shell]:
    if shutil.which(request.param) is None:
        pytest.skip(f"{request.param} is not installed")
    directory = tmp_path / "mux"
    directory.mkdir(mode=0o700)
    s = Shell(rpc, token, env={"PS1": "$ "})
    result = s.send(MULTIPLEXERS[request.param].format(dir=directory) + "\n", idle_ms=10_000)
    assert result["wait_reason"] == "stdin_read", result
    assert "pane$" in result["viewport"]
    yield s
    with contextlib.suppress(RpcError, OSError):
        s.close()  # the server lives in the session's process tree: it goes with it


def test_multiplexer_pane_is_probed_exactly(multiplexer: Shell) -> None:
    started = time.monotonic()
    result = multiplexer.send("sleep 1; echo slept\n", idle_ms=10_000)
    assert time.monotonic() - started >= 0.95
    assert result["wait_reason"] == "stdin_read"
    assert result["ready_basis"] == "kernel"
    assert result["relay"] is None
    assert "slept" in result["viewport"]
    result = multiplexer.send("read -p 'Name: ' name\n", idle_ms=10_000)
    assert result["wait_reason"] == "stdin_read"
    assert "Name:" in result["viewport"]
    multiplexer.send("bob\n")
    assert "bob" in multiplexer.send("echo $name-ok\n")["viewport"]


# --- a program that is a relay too: mc runs its commands in a subshell behind a pty, and keeps most keys itself ---


@pytest.fixture
def mc(rpc: Rpc, token: str, tmp_path: Path) -> Iterator[Shell]:
    if shutil.which("mc") is None:
        pytest.skip("mc is not installed")
    (tmp_path / "note.txt").write_text("a line mc shows\n")
    (tmp_path / ".config" / "mc").mkdir(parents=True)
    (tmp_path / ".config" / "mc" / "ini").write_text("[Midnight-Commander]\nuse_internal_edit=false\n")
    env = {"HOME": str(tmp_path), "SHELL": shutil.which("bash") or "/bin/bash", "EDITOR": "vim -u NONE"}
    # No PS1 in its environment: mc's subshell would take that prompt and mc no longer sees it come back.
    s = Shell(rpc, token, env=env, cwd=str(tmp_path))
    result = s.send("mc\n", idle_ms=10_000)
    assert result["wait_reason"] == "stdin_read", result
    assert "1Help" in result["viewport"]
    yield s
    with contextlib.suppress(RpcError, OSError):
        s.close()


def test_mc_keys_it_keeps_settle_on_its_own_wait(mc: Shell) -> None:
    for key, shown in (("x", "# x"), ("y", "# xy"), ("\x7f", "# x")):  # typed on its command line, and erased
        result = mc.send(key, idle_ms=10_000)
        assert result["wait_reason"] == "stdin_read", result
        assert result["ready_basis"] == "kernel"
        assert result["viewport"].splitlines()[-2].rstrip().endswith(shown), result
    mc.send("\x7f", idle_ms=10_000)


def test_mc_commands_run_behind_it_are_waited_for(mc: Shell) -> None:
    started = time.monotonic()
    result = mc.send("sleep 1; echo hi\r", idle_ms=10_000)
    assert time.monotonic() - started >= 0.95
    assert result["wait_reason"] == "stdin_read"
    assert "1Help" in result["viewport"]  # back in its panels
    result = mc.send("python3 -q\r", idle_ms=10_000)
    assert result["wait_reason"] == "stdin_read"
    assert result["viewport"].splitlines()[-1] == ">>>"
    assert mc.send("6*7\r")["viewport"].splitlines()[-2:] == ["42", ">>>"]
    result = mc.send("exit()\r", idle_ms=10_000)
    assert result["wait_reason"] == "stdin_read"
    assert "1Help" in result["viewport"]


def test_mc_viewer_and_quit(mc: Shell) -> None:
    mc.send("cd .\r", idle_ms=10_000)
    result = mc.send("\x1b[F", idle_ms=10_000)  # End: the last entry, note.txt
    result = mc.send("\x1bOR", idle_ms=10_000)  # F3: its own viewer
    assert result["wait_reason"] == "stdin_read", result
    assert "a line mc shows" in result["viewport"], result
    result = mc.send("q", idle_ms=10_000)
    assert result["wait_reason"] == "stdin_read", result
    assert "1Help" in result["viewport"]
    if shutil.which("vim") is not None:  # F4: an external editor, which mc starts in front of itself
        result = mc.send("\x1bOS", idle_ms=10_000)
        assert result["wait_reason"] == "stdin_read", result
        assert result["viewport"].splitlines()[0] == "a line mc shows", result
        result = mc.send(":q\r", idle_ms=10_000)
        assert result["wait_reason"] == "stdin_read", result
        assert "1Help" in result["viewport"]
    result = mc.send("\x1b[21~", idle_ms=10_000)  # F10: quit
    assert result["wait_reason"] == "stdin_read", result
    assert "1Help" not in result["viewport"]


# --- ssh: an opaque relay -------------------------------------------------------------------------------------


@pytest.fixture
def ssh_shell(rpc: Rpc, token: str, sshd: Sshd) -> Iterator[Shell]:
    s = Shell(rpc, token, env={"PS1": "$ "})
    command = shlex.join([*sshd.ssh, "-t", HOST_ALIAS, "env PS1='far$ ' bash --norc -i"])
    result = s.send(command + "\n")
    assert result["wait_reason"] == "stdin_read", result
    assert result["relay"] == "ssh"
    assert result["viewport"].splitlines()[-1] == "far$"
    yield s
    s.close()


def test_ssh_silent_command_is_not_settled_early(ssh_shell: Shell) -> None:
    started = time.monotonic()
    result = ssh_shell.send("sleep 2; echo slept\n")
    elapsed = time.monotonic() - started
    assert elapsed >= 1.95
    # Before idle_ms (3 s after the last output): settled on the relay's quiet, not on the silence.
    latency(elapsed, tight=2 + 1.5, fallback=2 + 3.0, what="a silent command through ssh")
    assert result["wait_reason"] == "stdin_read"
    assert result["ready_basis"] == "relay_quiet"
    assert result["relay"] == "ssh"
    assert result["viewport"].splitlines()[-2:] == ["slept", "far$"]


def test_ssh_input_prompt_and_repl_are_seen_soon(ssh_shell: Shell) -> None:
    started = time.monotonic()
    result = ssh_shell.send("read -p 'Name: ' name\n")
    latency(time.monotonic() - started, tight=1.5, fallback=3.0, what="a prompt through ssh")  # 3.0: idle_ms
    assert result["wait_reason"] == "stdin_read"
    assert result["viewport"].splitlines()[-1] == "Name:"
    assert ssh_shell.send("bob\n")["viewport"].splitlines()[-1] == "far$"
    result = ssh_shell.send("python3 -q\n")
    assert result["viewport"].splitlines()[-1] == ">>>"
    assert ssh_shell.send("6*7\n")["viewport"].splitlines()[-2:] == ["42", ">>>"]
    ssh_shell.send("exit()\n")


def test_a_cancel_through_ssh_interrupts_the_far_command_and_keeps_the_connection(ssh_shell: Shell) -> None:
    # ssh's terminal is raw: Ctrl-C is a key it sends to the far terminal, whose line discipline interrupts the
    # command there. A SIGINT to ssh's group ended the connection.
    assert ssh_shell.send("sleep 30\n", timeout_ms=1_000)["wait_reason"] == "timeout"
    cancelled = ssh_shell.call("terminal_cancel")
    assert (cancelled["interrupted"], cancelled["key"], cancelled["signal"]) == (True, "C-c", None), cancelled
    assert ssh_shell.send("")["viewport"].splitlines()[-1] == "far$"
    assert ssh_shell.send("echo still connected\n")["viewport"].splitlines()[-2:] == ["still connected", "far$"]


def test_ssh_password_prompt_is_reported(ssh_shell: Shell) -> None:
    result = ssh_shell.send("read -s -p 'Password: ' pw\n")
    assert result["wait_reason"] == "stdin_read"
    assert result["password_prompt"] is True
    assert ssh_shell.send("x\n")["password_prompt"] is False


def test_ssh_with_integration_reports_exit_codes_and_settles_on_the_prompt(ssh_shell: Shell) -> None:
    installed = ssh_shell.call("terminal_integrate")
    assert installed["wait_reason"] == "stdin_read"
    assert installed["ready_basis"] == "shell_integration"
    assert "__ptyd" not in "\n".join(ssh_shell.transcript())  # the line that installed it erased itself
    started = time.monotonic()
    result = ssh_shell.send("sleep 1; false\n")
    elapsed = time.monotonic() - started
    assert elapsed >= 0.95
    latency(elapsed, tight=1.9, fallback=1 + 3.0, what="a prompt mark through ssh")  # 1 + idle_ms after the sleep
    assert result["ready_basis"] == "shell_integration"
    assert result["exit_code"] == 1
    assert result["viewport"].splitlines()[-1] == "far$"
    result = ssh_shell.send("cd /tmp\n")
    assert (result["exit_code"], result["cwd"]) == (0, "/tmp")
    result = ssh_shell.send("python3 -q\n")
    assert (result["exit_code"], result["cwd"]) == (None, None)  # a REPL, not the far shell, is in front
    result = ssh_shell.send("exit()\n")
    assert result["exit_code"] == 0
    assert result["viewport"].splitlines()[-1] == "far$"


def test_the_ssh_command_runs_on_while_the_far_shells_commands_end(ssh_shell: Shell) -> None:
    """The far shell's marks carry a key of their own: its first prompt does not end the local ssh command, and
    leaving it reports what ran there and the ssh command, each once."""
    installed = ssh_shell.call("terminal_integrate")
    assert installed["commands"] == []
    assert installed["exit_code"] is None
    assert installed["running"]["command"].startswith("ssh ")
    refused = ssh_shell.send("echo )\n")
    assert [(c["command"], c["exit_code"]) for c in refused["commands"]] == [("echo )", 2)]
    left = ssh_shell.send("exit 3\n")
    assert left["viewport"].splitlines()[-1] == "$"
    ended = [(c["command"], c["exit_code"]) for c in left["commands"]]
    assert ended[0] == ("exit 3", None)  # it ended with the far shell: no prompt after it to say how
    assert ended[1][0] is not None
    assert ended[1][0].startswith("ssh ")
    assert ended[1][1] == 3
    assert left["exit_code"] == 3
    assert left["running"] is None


def test_leaving_ssh_returns_to_exact_readiness(ssh_shell: Shell) -> None:
    result = ssh_shell.send("exit\n")
    assert result["ready_basis"] == "kernel"
    assert result["relay"] is None
    assert result["viewport"].splitlines()[-1] == "$"
