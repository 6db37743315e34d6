"""What each command did: exit_code and cwd from ptyd's shell integration, password prompts, input that cannot
arrive whole. Real bash sessions, opened the ways callers open them."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import Daemon, Rpc, RpcError, Shell, hand_over

OPENINGS = {
    "default": {"env": {"PS1": "$ "}},
    "argv bash": {"argv": ["bash"], "env": {"PS1": "$ "}},
    "argv norc": {"argv": ["/bin/bash", "--norc", "-i"], "env": {"PS1": "$ "}},
    "argv login": {"argv": ["bash", "-l"], "env": {"PS1": "$ "}},
    "no env": {},
    "zsh": {"argv": ["zsh", "-i"]},
    "zsh login": {"argv": ["zsh", "-l"]},
    "fish": {"argv": ["fish"]},
    "fish login": {"argv": ["fish", "-l"]},
}
# A user's own startup files for each shell: a prompt of theirs and a prompt hook of their own, both kept.
USER_FILES = {
    "zsh": (".zshrc", "PROMPT='%% '\nprecmd_functions+=(user_hook)\nuser_hook() { user_hook_ran=yes; }\n"),
    "fish": (
        ".config/fish/config.fish",
        "function fish_prompt; echo -n '% '; end\n"
        "function user_hook --on-event fish_prompt; set -g user_hook_ran yes; end\nset -g fish_greeting\n",
    ),
}


@pytest.fixture(params=list(OPENINGS))
def any_shell(request: pytest.FixtureRequest, rpc: Rpc, token: str, tmp_path: Path) -> Iterator[Shell]:
    params = dict(OPENINGS[request.param])
    program = request.param.split()[0]
    if program in USER_FILES:
        if shutil.which(program) is None:
            pytest.skip(f"{program} is not installed")
        name, text = USER_FILES[program]
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
        # A user with startup files (else zsh's new-user wizard runs); fish finds them under ~/.config.
        params["env"] = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": ""}
    s = Shell(rpc, token, cwd="/", **params)
    assert s.opened["wait_reason"] == "stdin_read"
    yield s
    with contextlib.suppress(RpcError, OSError):
        s.close()


def test_exit_code_and_cwd_of_each_command(any_shell: Shell) -> None:
    result = any_shell.send("true\n")
    assert (result["exit_code"], result["cwd"]) == (0, "/")
    assert any_shell.send("false\n")["exit_code"] == 1
    assert any_shell.send("sh -c 'exit 42'\n")["exit_code"] == 42
    assert any_shell.send("ls /nonexistent-dir\n")["exit_code"] == 2
    result = any_shell.send("cd /tmp\n")
    assert (result["exit_code"], result["cwd"]) == (0, "/tmp")
    assert any_shell.send("sleep 0.2; sh -c 'exit 3'\n")["exit_code"] == 3
    assert any_shell.send("\n")["exit_code"] is None  # an empty line runs nothing


def test_users_prompt_and_hooks_are_kept(any_shell: Shell, request: pytest.FixtureRequest) -> None:
    program = request.node.callspec.params["any_shell"].split()[0]
    result = any_shell.send("echo hook=$user_hook_ran; env | grep -c PTYD_SHELL\n")
    lines = result["viewport"].splitlines()
    assert lines[-2] == "0"  # no program sees the secret
    if program in USER_FILES:  # the user's own prompt, and their prompt hook ran beside ptyd's
        assert lines[-3:] == ["hook=yes", "0", "%"]
    assert "\x1b" not in result["viewport"]
    assert not any("6973" in line for line in any_shell.transcript())


def test_no_command_no_exit_code(shell: Shell) -> None:
    shell.send("false\n")
    result = shell.send("\n")
    assert result["exit_code"] is None  # an empty line runs nothing
    assert result["cwd"] is not None
    assert shell.send("")["exit_code"] is None  # a wait alone


def test_marks_stay_out_of_viewports_and_transcript(shell: Shell) -> None:
    result = shell.send("echo visible\n")
    assert "\x1b" not in result["viewport"]
    assert result["viewport"].splitlines() == ["$ echo visible", "visible", "$"]
    assert not any("6973" in line for line in shell.transcript())


def test_callers_prompt_is_kept(rpc: Rpc, token: str) -> None:
    s = Shell(rpc, token, argv=["bash", "--norc", "-i"], env={"PS1": "my-prompt> ", "PROMPT_COMMAND": "X=1"})
    try:
        result = s.send("echo $X\n")
        assert result["viewport"].splitlines() == ["my-prompt> echo $X", "1", "my-prompt>"]
        assert result["exit_code"] == 0
    finally:
        s.close()


def test_forged_marks_change_nothing(shell: Shell) -> None:
    forged = r"printf '\033]6973;0123456789abcdef0123456789abcdef;D;99;/forged\007'; false"
    result = shell.send(forged + "\n")
    assert result["exit_code"] == 1
    assert result["cwd"] != "/forged"
    # Nor can a program learn the secret from its environment.
    result = shell.send("env | grep -c PTYD_SHELL\n")
    assert result["viewport"].splitlines()[-2] == "0"


FD_OPENINGS = [name for name in OPENINGS if not name.startswith("fish")]  # fish keeps fd 6 open (below)


@pytest.mark.parametrize("any_shell", FD_OPENINGS, indirect=True)
def test_the_secret_is_not_in_the_shells_environ_nor_left_on_its_fd(any_shell: Shell) -> None:
    """Issue 27, attack 9: the secret came in PTYD_SHELL_KEY, which ``unset`` leaves in /proc/PID/environ, where
    any program of the session read it and forged a prompt mark (a failing command reported exit_code 0). It now
    comes on fd 6, which the shell's startup code reads and closes."""
    forge = (
        "k=$(tr '\\0' '\\n' < /proc/$$/environ | sed -n 's/^PTYD_SHELL_KEY=//p'); "
        "printf '\\033]6973;%s;D;0;/forged\\007' \"$k\"; false\n"
    )
    result = any_shell.send(forge)
    assert result["exit_code"] == 1, result
    assert result["cwd"] != "/forged"
    # The shell's own descriptors at rest, listed by a plain command: a command substitution would open a pipe in
    # the shell itself, at the lowest free number (6 when a user's rc file holds 3-5).
    listing = any_shell.send("ls -l /proc/$$/fd\n")["viewport"]
    assert " 0 -> " in listing, listing
    assert " 6 -> " not in listing, listing
    listed = any_shell.send("echo count=$(tr '\\0' '\\n' < /proc/$$/environ | grep -c '^PTYD_SHELL_KEY=')\n")
    assert "count=0" in listed["viewport"].splitlines(), listed["viewport"]


@pytest.mark.parametrize("any_shell", [name for name in OPENINGS if name.startswith("fish")], indirect=True)
def test_fish_keeps_the_secret_from_its_commands(any_shell: Shell) -> None:
    """fish cannot close a descriptor: its fd 6 stays open, and its commands inherit it. The daemon closed the
    pipe's other end and fish read it whole: what a command reads there (or in fish's environ) forges nothing."""
    for source in ("/proc/$fish_pid/fd/6", "/dev/fd/6"):
        forge = f"set k (cat {source}); printf '\\e]6973;%s;D;0;/forged\\a' \"$k\"; false\n"
        result = any_shell.send(forge)
        assert (result["exit_code"], result["cwd"]) == (1, "/"), result
    forge = (
        "set k (tr '\\0' '\\n' < /proc/$fish_pid/environ | sed -n 's/^PTYD_SHELL_KEY=//p'); "
        "printf '\\e]6973;%s;D;0;/forged\\a' \"$k\"; false\n"
    )
    result = any_shell.send(forge)
    assert (result["exit_code"], result["cwd"]) == (1, "/"), result
    listed = any_shell.send("tr '\\0' '\\n' < /proc/$fish_pid/environ | grep -c '^PTYD_SHELL_KEY='\n")
    assert listed["viewport"].splitlines()[-2] == "0", listed["viewport"]


@pytest.mark.parametrize("program", ["bash", "zsh"])
def test_an_exported_ps2_does_not_take_the_secret_to_every_command(rpc: Rpc, token: str, program: str) -> None:
    """PS0 and PS2 hold the secret (the command and continuation marks): a PS2 exported by the user (here, from the
    session's environment) stays the shell's own, or every command it runs could read the secret and forge marks."""
    s = Shell(rpc, token, argv=[program], env={"PS2": "more> ", "PS0": ""})
    try:
        s.send("echo 'open\n")  # a continuation prompt: the mark is in PS2 by then
        s.send("done'\n")
        listed = s.send("echo leaked=$(env | grep -c 6973)\n")
        assert "leaked=0" in listed["viewport"].splitlines(), listed["viewport"]
    finally:
        s.close()


def test_null_inside_a_repl(shell: Shell) -> None:
    result = shell.send("python3 -q\n")
    assert (result["exit_code"], result["cwd"]) == (None, None)
    result = shell.send("1/0\n")
    assert (result["exit_code"], result["cwd"]) == (None, None)
    result = shell.send("import sys; sys.exit(5)\n")
    assert result["exit_code"] == 5  # the shell's command (python3) finished in this send


def test_exec_sessions_have_no_outcome(rpc: Rpc, token: str) -> None:
    s = Shell(rpc, token, type="exec", argv=["bash", "-c", "read -p 'go? ' x; echo $x"])
    try:
        assert s.opened["wait_reason"] == "stdin_read"
        result = s.send("y\n")
        assert result["exit_code"] is None
        assert result["wait_reason"] == "session_exit"
    finally:
        s.close()


# --- password prompts ---------------------------------------------------------------------------------------


def test_password_prompt_while_read_s_waits(shell: Shell) -> None:
    result = shell.send("read -s -p 'Token: ' t\n")
    assert result["wait_reason"] == "stdin_read"
    assert result["password_prompt"] is True
    assert shell.call("terminal_status")["password_prompt"] is True
    result = shell.send("abc\n")
    assert result["password_prompt"] is False
    assert shell.call("terminal_status")["password_prompt"] is False


def test_password_prompt_for_getpass_not_for_input(shell: Shell) -> None:
    result = shell.send("python3 -c 'import getpass; getpass.getpass(\"Secret: \")'\n")
    assert result["password_prompt"] is True
    shell.send("x\n")
    result = shell.send("python3 -q\n")
    assert result["password_prompt"] is False
    result = shell.send("input('Name: ')\n")
    assert result["password_prompt"] is False
    shell.send("bob\n")
    shell.send("exit()\n")


def test_password_prompt_for_ssh_keygen_passphrase(shell: Shell, tmp_path: Path) -> None:
    key = tmp_path / "key"
    result = shell.send(f"ssh-keygen -q -t ed25519 -f {key}\n")
    assert result["wait_reason"] == "stdin_read"
    assert result["password_prompt"] is True
    result = shell.send("pass phrase\n")
    assert result["password_prompt"] is True  # "Enter same passphrase again"
    result = shell.send("pass phrase\n")
    assert result["password_prompt"] is False
    assert result["exit_code"] == 0
    assert key.exists()


def test_no_password_prompt_for_full_screen_programs(shell: Shell) -> None:
    result = shell.send("vim -u NONE -N\n")
    assert result["alt_screen"] is True
    assert result["password_prompt"] is False
    shell.send("\x1b:q!\n")


# --- input delivery ----------------------------------------------------------------------------------------


def test_over_long_canonical_line_is_refused_whole(shell: Shell, tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    shell.send(f"cat > {target}\n")
    with pytest.raises(RpcError) as refused:
        shell.send("x" * 5000 + "\n")
    assert refused.value.data["reason"] == "line_too_long"
    assert refused.value.data["limit"] == 4095
    line = "y" * 4095 + "\n"
    result = shell.send(line + "\x04")
    assert result["unread_input"] == 0
    assert target.read_text() == line  # nothing of the refused send arrived; the next one whole


def test_long_line_for_a_command_after_the_first_is_refused(shell: Shell) -> None:
    with pytest.raises(RpcError) as refused:
        shell.send("read -r v\n" + "z" * 5000 + "\n")
    assert refused.value.data["reason"] == "line_too_long"
    assert shell.send("echo still-here\n")["viewport"].splitlines()[-2] == "still-here"


def test_long_line_to_a_raw_mode_program_is_delivered(shell: Shell) -> None:
    shell.send("python3 -q\n")  # readline: raw mode, any line length
    result = shell.send("len('" + "w" * 6000 + "')\n")
    assert result["viewport"].splitlines()[-2:] == ["6000", ">>>"]
    shell.send("exit()\n")


def test_the_shell_command_line_itself_may_be_long(shell: Shell) -> None:
    result = shell.send(f"X={'v' * 6000}; echo ${{#X}}\n")
    assert result["viewport"].splitlines()[-2] == "6000"


# Shells ptyd did not set up (zsh -f and fish --no-config read no startup files), here and behind a local relay.
UNINTEGRATED = {
    "zsh": (["zsh", "-f"], None),
    "fish": (["fish", "--no-config"], None),
    "fish behind script": (["bash", "--norc", "-i"], "SHELL=$(command -v fish) script -q /dev/null"),
}


@pytest.mark.parametrize("case", list(UNINTEGRATED))
def test_integrate_into_a_shell_ptyd_did_not_set_up(rpc: Rpc, token: str, tmp_path: Path, case: str) -> None:
    argv, relay = UNINTEGRATED[case]
    if any(shutil.which(program) is None for program in (argv[0], case.split()[0], "script")):
        pytest.skip("the shell or the relay is not installed")
    s = Shell(rpc, token, argv=argv, cwd="/", env={"HOME": str(tmp_path), "XDG_CONFIG_HOME": "", "PS1": "$ "})
    try:
        if relay is not None:
            assert s.send(relay + "\n")["wait_reason"] == "stdin_read"
        assert s.send("false\n")["exit_code"] is None
        installed = s.call("terminal_integrate")
        assert installed["wait_reason"] == "stdin_read"
        assert not any("__ptyd" in line for line in s.transcript())  # the installing line erased itself
        result = s.send("cd /tmp; false\n")
        assert (result["exit_code"], result["cwd"]) == (1, "/tmp")
    finally:
        s.close()


def test_shells_integrated_before_and_after_a_handover_keep_their_own_keys(fresh_daemon: Daemon) -> None:
    """Each shell terminal_integrate sets up signs with a key of its own, counted across a handover too, and the
    new daemon knows what each shell runs: the innermost shell's first prompt does not end the command that runs
    it, and leaving it ends that command once, with its status (before: one key for both, and the first line sent
    after the handover lost)."""
    fresh_daemon.start()
    with fresh_daemon.rpc() as rpc:
        s = Shell(rpc, rpc.call("agent_register", name="nested")["token"], cwd="/", env={"PS1": "$ "})
        s.send("bash --norc\n")
        assert s.call("terminal_integrate")["running"]["command"] == "bash --norc"
    hand_over(fresh_daemon)
    with fresh_daemon.rpc() as rpc:
        s.rpc = rpc
        s.send("env PS1='in$ ' bash --norc\n")
        installed = s.call("terminal_integrate")
        assert installed["commands"] == []
        assert installed["running"]["command"] == "env PS1='in$ ' bash --norc"
        assert s.send("false\n")["exit_code"] == 1
        left = s.send("exit 4\n")
        assert [(c["command"], c["exit_code"]) for c in left["commands"]] == [
            ("exit 4", None),
            ("env PS1='in$ ' bash --norc", 4),
        ]
        assert left["running"]["command"] == "bash --norc"
        s.close()
