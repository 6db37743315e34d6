"""A send settles when the program answered: after an ambiguous key's timeout, after an event loop's work, with
keys pressed once the text before them was taken; and a cancel stops what a send left running."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest

from conftest import Shell

needs = pytest.mark.skipif


def _vim_edits_without_insert_mode_showing(shell: Shell, start: str, path: Path) -> None:
    opened = shell.send(start, idle_ms=10_000)
    assert opened["wait_reason"] == "stdin_read", opened
    for n in range(1, 5):
        # Escape is ambiguous until vim's key-sequence timeout runs out ('ttimeoutlen' 100 ms with Debian's
        # defaults): only then does it leave insert mode and take '-- INSERT --' off the screen.
        result = shell.send(f"oline {n}", keys=["Escape"])
        assert result["wait_reason"] == "stdin_read", result
        assert "INSERT" not in result["viewport"], result["viewport"]
        assert not any("INSERT" in line for line in shell.call("terminal_screen")["lines"])
    assert shell.send(":wq\n")["viewport"].endswith("$")
    assert path.read_text() == "\n" + "".join(f"line {n}\n" for n in range(1, 5))


@needs(shutil.which("vim") is None, reason="vim is not installed")
def test_vim_with_the_system_defaults_settles_after_escape_took_effect(shell: Shell, tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    # No vimrc of the user's: the system's (Debian: defaults.vim, showmode, showcmd, ttimeoutlen=100).
    _vim_edits_without_insert_mode_showing(shell, f"HOME={tmp_path} vim {path}\n", path)


@needs(shutil.which("vim") is None, reason="vim is not installed")
def test_vim_without_a_vimrc_settles_after_escape_took_effect(shell: Shell, tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    _vim_edits_without_insert_mode_showing(shell, f"vim -u NONE -c 'set showmode' {path}\n", path)


@needs(shutil.which("node") is None, reason="node is not installed")
def test_node_repl_await_is_waited_for(shell: Shell) -> None:
    assert shell.send("node\n", idle_ms=10_000)["wait_reason"] == "stdin_read"
    started = time.monotonic()
    # node reads the terminal all along, its epoll wait timed by the pending timer: the REPL has answered only
    # when it prints the value and draws its prompt again.
    result = shell.send("await new Promise(r => setTimeout(r, 1500)); 6*7\n", idle_ms=10_000)
    assert time.monotonic() - started >= 1.4
    assert result["wait_reason"] == "stdin_read", result
    assert result["viewport"].splitlines()[-2:] == ["42", ">"], result["viewport"]
    # A child the line awaits is work in progress too.
    result = shell.send("await require('util').promisify(require('child_process').exec)('sleep 1; echo 43')\n")
    assert result["wait_reason"] == "stdin_read", result
    assert "stdout: '43" in result["viewport"], result["viewport"]
    assert result["viewport"].endswith(">"), result["viewport"]
    # A line the REPL answers with another prompt (its continuation) settles at once, with no timer of its own.
    started = time.monotonic()
    result = shell.send("function f() {\n")
    assert result["wait_reason"] == "stdin_read"
    assert result["viewport"].endswith("...")
    assert time.monotonic() - started < 1.0
    assert shell.send("}\n")["viewport"].endswith(">")
    assert shell.send(".exit\n", idle_ms=10_000)["viewport"].endswith("$")


def _ipython() -> str | None:
    """IPython's command (Debian's ipython3 package names it ipython3), if it runs."""
    for name in ("ipython", "ipython3"):
        if shutil.which(name) and subprocess.run([name, "--version"], capture_output=True, check=False).returncode == 0:
            return name
    return None


IPYTHON = _ipython()


@needs(IPYTHON is None, reason="IPython is not installed (Debian: apt-get install ipython3)")
def test_ipython_await_is_waited_for(shell: Shell, tmp_path: Path) -> None:
    # prompt_toolkit's asyncio loop draws the prompt; IPython awaits a top-level await in the cell.
    opened = shell.send(f"IPYTHONDIR={tmp_path} {IPYTHON} --no-banner --colors=NoColor\n", idle_ms=20_000)
    assert opened["viewport"].endswith("In [1]:"), opened
    started = time.monotonic()
    result = shell.send("import asyncio; await asyncio.sleep(1.5); 6*7\n", idle_ms=10_000)
    assert time.monotonic() - started >= 1.4
    assert result["wait_reason"] == "stdin_read", result
    assert "Out[1]: 42" in result["viewport"], result["viewport"]
    assert result["viewport"].endswith("In [2]:"), result["viewport"]
    assert shell.send("exit\n", idle_ms=10_000)["viewport"].endswith("$")


@needs(IPYTHON is None, reason="IPython is not installed (Debian: apt-get install ipython3)")
def test_ipython_given_a_block_line_by_line_answers_it_after_the_blank_line(shell: Shell, tmp_path: Path) -> None:
    # Its continuation prompt ("   ...:") answers the lines inside the block; the blank line runs it, and the
    # send settles on the block's output and the next "In [n]:", not on the continuation prompt before it.
    opened = shell.send(f"IPYTHONDIR={tmp_path} {IPYTHON} --no-banner --colors=NoColor\n", idle_ms=20_000)
    assert opened["viewport"].endswith("In [1]:"), opened
    for line in ("import time", "for i in range(2):", "    time.sleep(0.6); print('slept', i)"):
        result = shell.send(line + "\n", idle_ms=10_000)
        assert result["wait_reason"] == "stdin_read", result
    assert result["viewport"].endswith("...:"), result["viewport"]
    started = time.monotonic()
    ran = shell.send("\n", idle_ms=10_000)
    assert time.monotonic() - started >= 1.1
    assert [line for line in ran["viewport"].splitlines() if line][-3:] == ["slept 0", "slept 1", "In [3]:"], ran
    assert shell.send("exit\n", idle_ms=10_000)["viewport"].endswith("$")


def test_cancel_stops_what_a_timed_out_send_left_running(shell: Shell) -> None:
    result = shell.send("yes\n", timeout_ms=500)
    assert result["wait_reason"] == "timeout"
    cancel = shell.call("terminal_cancel")
    assert cancel["cancelled"] is False  # no send was active
    assert cancel["interrupted"] is True
    assert cancel["program"] == "yes"
    assert cancel["signal"] == "SIGINT"
    assert cancel["pgid"] == result["foreground"]["pgid"]
    after = shell.send("echo status $?\n")
    assert after["foreground"]["name"] == "bash"
    assert after["viewport"].splitlines()[-2:] == ["status 130", "$"]  # yes ended by SIGINT
    # Nothing left running now: nothing is interrupted, and the answer says what to do instead.
    nothing = shell.call("terminal_cancel")
    assert nothing["interrupted"] is False
    assert nothing["pgid"] is None
    assert "terminal_signal" in nothing["hint"]


def test_cancel_stops_what_an_idle_send_left_running(shell: Shell) -> None:
    result = shell.send("sleep 30\n", idle_ms=300)
    assert result["wait_reason"] == "inferred_idle"
    cancel = shell.call("terminal_cancel")
    assert cancel["interrupted"] is True
    assert cancel["program"] == "sleep"
    assert shell.send("echo status $?\n")["viewport"].splitlines()[-2:] == ["status 130", "$"]


def test_cancel_after_the_command_ended_on_its_own_interrupts_nothing(shell: Shell) -> None:
    assert shell.send("sleep 0.5\n", idle_ms=200)["wait_reason"] == "inferred_idle"
    time.sleep(0.6)  # the command's own duration: it ends by itself
    cancel = shell.call("terminal_cancel")
    assert cancel["interrupted"] is False
    assert "prompt" in cancel["hint"]


def test_keys_after_input_go_to_the_command_it_started(shell: Shell) -> None:
    # C-c written with the line would reach the shell first: its ISIG flush drops the line and cat never runs.
    for command in ("cat", "yes > /dev/null", "while :; do :; done"):
        result = shell.send(f"{command}\n", keys=["C-c"])
        assert result["wait_reason"] == "stdin_read", result
        assert result["viewport"].splitlines()[:2] == [f"$ {command}", "^C"], result["viewport"]
        assert shell.send("echo status $?\n")["viewport"].splitlines()[-2:] == ["status 130", "$"]


def test_keys_after_text_in_a_shell_edit_the_line_it_took(shell: Shell) -> None:
    shell.send("echo first\n")
    result = shell.send("echo second", keys=["C-a", "Right", "Right", "Right", "Right", "Right", "C-k"])
    assert result["viewport"].endswith("$ echo")
    assert shell.send("\n")["viewport"].splitlines()[-1] == "$"
