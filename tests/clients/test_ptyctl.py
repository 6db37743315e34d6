"""ptyctl end to end: a real daemon, ptyctl as a subprocess, and a real PTY (pexpect) for watch and attach."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pexpect
import pytest

from conftest import ROOT, Daemon, wait_until

CLIENT_DIR = ROOT / "clients" / "python"
sys.path.insert(0, str(CLIENT_DIR))

from ptyd_client import Client, PtydError, Session  # noqa: E402 - importable once clients/python is on the path

SHELL = {"env": {"PS1": "$ "}}


def ptyctl_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PTYD_")}
    env["PYTHONPATH"] = str(CLIENT_DIR)
    return env


def ptyctl_argv(daemon_socket: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "ptyd_client", "--socket", str(daemon_socket), *args]


def ptyctl(daemon_socket: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ptyctl_argv(daemon_socket, *args), capture_output=True, text=True, env=ptyctl_env(), timeout=60, check=False
    )


def ok_json(daemon_socket: Path, *args: str) -> Any:
    done = ptyctl(daemon_socket, "--json", *args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture
def agent(daemon: Daemon) -> Iterator[Client]:
    """An agent other than the operator, owning the sessions ptyctl looks at."""
    with Client(daemon.socket) as client:
        client.agent_register("agent-under-watch")
        yield client
        client.agent_release()


@pytest.fixture
def agent_shell(agent: Client) -> Iterator[Session]:
    with agent.open(cols=80, rows=20, **SHELL) as shell:
        yield shell


def test_status_reports_the_running_daemon(daemon: Daemon) -> None:
    status = ok_json(daemon.socket, "status")
    assert daemon.proc is not None
    assert status["pid"] == daemon.proc.pid
    assert status["running"] is True
    assert status["socket"] == str(daemon.socket)
    text = ptyctl(daemon.socket, "status")
    assert text.returncode == 0
    assert f"pid {daemon.proc.pid}" in text.stdout


def test_open_send_read_signal_close_end_to_end(daemon: Daemon) -> None:
    opened = ok_json(daemon.socket, "open", "--name", "e2e", "--env", "PS1=$ ", "--size", "70x15")
    sid = opened["session_id"]
    assert (opened["cols"], opened["rows"], opened["name"]) == (70, 15, "e2e")

    sent = ptyctl(daemon.socket, "send", sid, "echo e2e-$((6*7))")
    assert sent.returncode == 0, sent.stderr
    assert "e2e-42" in sent.stdout
    assert "[stdin_read, exit code 0]" in sent.stderr
    failed = ptyctl(daemon.socket, "send", sid, "false")
    assert "[stdin_read, exit code 1]" in failed.stderr
    left_open = ptyctl(daemon.socket, "send", sid, "echo 'open")
    assert "[stdin_read, continuation: the shell waits for the rest of a command]" in left_open.stderr
    closed = ptyctl(daemon.socket, "send", sid, "closed'")
    assert "[stdin_read, exit code 0]" in closed.stderr

    partial = ok_json(daemon.socket, "send", "--no-newline", sid, "echo typed-not-run")
    assert partial["viewport"].endswith("echo typed-not-run")
    result = ok_json(daemon.socket, "send", "--escapes", sid, r"\x15echo after-ctrl-u")  # Ctrl-U clears the line
    assert "typed-not-run" not in result["viewport"].splitlines()[-2]
    assert result["wait_reason"] == "stdin_read"
    recalled = ok_json(daemon.socket, "send", "--no-newline", "--key", "Up", "--key", "Enter", sid, "")
    assert recalled["viewport"].splitlines()[-2:] == ["after-ctrl-u", "$"]  # the history's last line, run again

    timed = ok_json(daemon.socket, "send", "--timeout", "0.3", sid, "sleep 30")
    assert timed["wait_reason"] == "timeout"
    signalled = ok_json(daemon.socket, "signal", sid, "SIGINT")
    assert signalled["delivered"] is True
    assert signalled["signal"] == "SIGINT"

    read = ok_json(daemon.socket, "read", sid)
    assert any("e2e-42" in line for line in read["lines"])
    assert read["next_line"] == read["total_lines"]
    tail = ok_json(daemon.socket, "read", sid, "--tail", "1")
    assert tail["lines"] == ["$"]
    assert ptyctl(daemon.socket, "read", sid, "--tail", "3").stdout.rstrip("\n").split("\n")[-1] == "$"

    assert ok_json(daemon.socket, "resize", sid, "90", "20")["cols"] == 90
    assert ok_json(daemon.socket, "close", sid)["closed"] is True
    assert ok_json(daemon.socket, "close", sid)["closed"] is False


def test_ls_shows_every_agents_sessions(daemon: Daemon, agent_shell: Session) -> None:
    with Client(daemon.socket) as other:
        other.agent_register("second-agent")
        second = other.open(name="second", **SHELL)
        listed = {s["session_id"]: s for s in ok_json(daemon.socket, "ls")["sessions"]}
        assert agent_shell.id in listed
        assert second.id in listed
        assert listed[agent_shell.id]["owner"] != listed[second.id]["owner"]
        table = ptyctl(daemon.socket, "ls").stdout
        assert table.startswith("SESSION")
        rows = {line.split()[0]: line.split() for line in table.splitlines()[1:]}
        assert rows[agent_shell.id][-1] == "agent-under-watch"  # the owner by name, not by id
        assert rows[second.id][-1] == "second-agent"
        other.agent_release()


def test_open_starts_in_the_callers_directory(daemon: Daemon, tmp_path: Path) -> None:
    done = subprocess.run(
        [*ptyctl_argv(daemon.socket, "open", "--", "sh", "-c", "pwd; exec cat")],
        capture_output=True,
        text=True,
        env=ptyctl_env(),
        cwd=tmp_path,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    sid = done.stdout.strip()
    try:
        assert ok_json(daemon.socket, "read", sid)["lines"][0] == str(tmp_path)
    finally:
        ptyctl(daemon.socket, "close", sid)


def test_agents_lists_them_and_release_ends_one_by_name_or_id(daemon: Daemon) -> None:
    with Client(daemon.socket) as first, Client(daemon.socket) as second:
        first_id = first.agent_register("first-agent")["agent_id"]
        second_id = second.agent_register("second-agent")["agent_id"]
        kept = first.open(**SHELL)
        second.open(**SHELL)
        listed = {a["agent_id"]: a for a in ok_json(daemon.socket, "agents")["agents"]}
        assert (listed[first_id]["name"], listed[first_id]["sessions"]) == ("first-agent", 1)
        table = ptyctl(daemon.socket, "agents").stdout
        assert table.startswith("AGENT")
        assert any(line.split()[:3] == [second_id, "second-agent", "1"] for line in table.splitlines())

        done = ptyctl(daemon.socket, "release", "second-agent")
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == f"released {second_id}, closed 1 session"
        assert second_id not in {a["agent_id"] for a in ok_json(daemon.socket, "agents")["agents"]}
        assert kept.status()["status"]["kind"] == "running"  # the other agent's session is untouched

        assert ok_json(daemon.socket, "release", first_id[:12])["closed_sessions"] == 1
        missing = ptyctl(daemon.socket, "release", first_id)
        assert missing.returncode == 1
        assert "no agent" in missing.stderr


def test_an_agent_sees_and_releases_itself_only(daemon: Daemon) -> None:
    with Client(daemon.socket) as me, Client(daemon.socket) as other:
        my_id = me.agent_register("me")["agent_id"]
        other_id = other.agent_register("other")["agent_id"]
        assert [a["agent_id"] for a in me.agent_list()["agents"]] == [my_id]
        with pytest.raises(PtydError) as refused:
            me.agent_release(other_id)
        assert refused.value.data["reason"] == "agent_not_found"
        assert [a["agent_id"] for a in other.agent_list()["agents"]] == [other_id]
        other.agent_release()
        me.agent_release(my_id)


def test_daemon_down_is_a_friendly_error_with_exit_code_3(tmp_path: Path) -> None:
    missing = tmp_path / "ptyd.sock"
    for command in (["status"], ["ls"], ["send", "pty-x", "hi"]):
        done = ptyctl(missing, *command)
        assert done.returncode == 3, command
        assert "Traceback" not in done.stderr
        assert str(missing) in done.stderr
    failed = ptyctl(missing, "--json", "status")
    assert json.loads(failed.stderr)["error"]["kind"] == "daemon_unavailable"


def test_bad_session_id_is_a_friendly_error_with_exit_code_1(daemon: Daemon) -> None:
    for command in (["send", "pty-nope", "hi"], ["read", "pty-nope"], ["close", "pty-nope"], ["watch", "pty-nope"]):
        done = ptyctl(daemon.socket, *command)
        assert done.returncode == 1, command
        assert "no session pty-nope" in done.stderr
        assert "Traceback" not in done.stderr
    failed = ptyctl(daemon.socket, "--json", "read", "pty-nope")
    assert json.loads(failed.stderr)["error"]["kind"] == "session_not_found"


def test_bad_token_is_a_friendly_error_with_exit_code_1(daemon: Daemon) -> None:
    done = ptyctl(daemon.socket, "--token", "ptyd_forged", "ls")
    assert done.returncode == 1
    assert "refused the token" in done.stderr
    assert "Traceback" not in done.stderr


def test_usage_errors_exit_2(daemon: Daemon) -> None:
    assert ptyctl(daemon.socket, "send").returncode == 2
    assert ptyctl(daemon.socket, "frobnicate").returncode == 2
    bad_env = ptyctl(daemon.socket, "open", "--env", "NOEQUALS")
    assert bad_env.returncode == 2
    assert "NAME=VALUE" in bad_env.stderr


# --- watch and attach through a real PTY ----------------------------------------------------------------------


def default_sigint() -> None:
    """In the child before exec: SIGINT as a terminal's foreground program has it, whatever the test run inherited
    (a background job of a non-interactive shell, such as `make test &` in a script, starts with it ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def shut(child: pexpect.spawn) -> None:
    """Close a child's terminal and end it. pexpect gives a child it SIGKILLs 0.1 s to be gone, less than a busy
    machine's disk may keep a dying bash in the kernel (writing its history): then it is waited for."""
    with contextlib.suppress(pexpect.ExceptionPexpect):
        child.close(force=True)
    if not child.closed and child.isalive():
        child.kill(signal.SIGKILL)
        child.wait()


def spawn(
    daemon: Daemon, *args: str, rows: int = 24, cols: int = 100, preexec: Callable[[], None] = default_sigint
) -> pexpect.spawn:
    argv = ptyctl_argv(daemon.socket, *args)
    return pexpect.spawn(
        argv[0],
        argv[1:],
        env=ptyctl_env(),
        dimensions=(rows, cols),
        timeout=15,
        encoding="utf-8",
        preexec_fn=preexec,
    )


def test_watch_follows_the_screen_and_ends_when_the_session_closes(daemon: Daemon, agent_shell: Session) -> None:
    child = spawn(daemon, "watch", agent_shell.id)
    try:
        child.expect("read-only")
        agent_shell.send("echo watched-$((7*6))\n")
        child.expect("watched-42")
        agent_shell.close()
        child.expect(f"{agent_shell.id} was closed")
        child.expect(pexpect.EOF)
    finally:
        shut(child)
    assert child.exitstatus == 0


def test_watch_shows_a_full_screen_program(daemon: Daemon, agent: Client) -> None:
    with agent.open(cols=80, rows=20, env_profile="human", **SHELL) as agent_shell:  # less's own alternate screen
        _watch_full_screen(daemon, agent_shell)


def _watch_full_screen(daemon: Daemon, agent_shell: Session) -> None:
    agent_shell.send("seq 100 200 | less\n")
    child = spawn(daemon, "watch", agent_shell.id)
    try:
        child.expect("full-screen program")
        child.expect("110")  # a row of the pager's screen, not of the shell's
        child.sendintr()
        child.expect(pexpect.EOF)
    finally:
        shut(child)
    agent_shell.send("q")


@pytest.mark.parametrize(
    "started_with", [default_sigint, ignore_sigint], ids=["sigint-default", "sigint-ignored-as-in-a-background-job"]
)
def test_watch_quits_on_ctrl_c(daemon: Daemon, agent_shell: Session, started_with: Callable[[], None]) -> None:
    child = spawn(daemon, "watch", agent_shell.id, preexec=started_with)
    try:
        child.expect("read-only")
        child.sendintr()
        child.expect("stopped watching")
        child.expect(pexpect.EOF)
    finally:
        shut(child)
    assert child.exitstatus == 0
    assert agent_shell.status()["status"] == {"kind": "running"}


def test_attach_types_shows_output_detaches_and_leaves_the_session_running(
    daemon: Daemon, agent_shell: Session
) -> None:
    # ptyctl runs under a bash of its own so the test can ask that bash whether the tty was restored.
    bash = pexpect.spawn(
        "bash",
        ["--noprofile", "--norc"],
        env={**ptyctl_env(), "PS1": "outer$ "},
        dimensions=(24, 100),
        timeout=15,
        encoding="utf-8",
        preexec_fn=default_sigint,
    )
    try:
        bash.expect_exact("outer$ ")
        bash.sendline(" ".join(ptyctl_argv(daemon.socket, "attach", agent_shell.id)))
        bash.expect("Ctrl-] detaches")
        wait_until(lambda: agent_shell.status()["cols"] == 100, message="the window size to be forwarded")
        assert agent_shell.status()["rows"] == 23  # one row is the status line
        bash.send("echo attached-$((6*7))\r")
        bash.expect("attached-42")
        bash.send("\x1d")
        bash.expect("detached from")
        bash.expect_exact("outer$ ")
        bash.sendline("stty -a | tr ' ' '\\n' | grep -x -e icanon -e -icanon -e echo -e -echo")
        bash.expect_exact("outer$ ")
        settings = (bash.before or "").split()
        assert "icanon" in settings
        assert "echo" in settings
    finally:
        shut(bash)
    status = agent_shell.status()
    assert status["status"] == {"kind": "running"}
    assert (status["cols"], status["rows"]) == (80, 20)  # its own size, put back
    assert "still-here" in agent_shell.send("echo still-here\n")["viewport"]
    assert any("attached-42" in line for line in agent_shell.read(0)["lines"])


def test_attach_forwards_window_size_changes(daemon: Daemon, agent_shell: Session) -> None:
    child = spawn(daemon, "attach", agent_shell.id, rows=30, cols=120)
    try:
        child.expect("Ctrl-] detaches")
        wait_until(lambda: agent_shell.status()["cols"] == 120, message="the first size")
        child.setwinsize(40, 132)
        wait_until(
            lambda: (agent_shell.status()["cols"], agent_shell.status()["rows"]) == (132, 39), message="SIGWINCH"
        )
        agent_shell.send("stty size\n")
        child.expect(re.escape("39 132"))
        child.send("\x1d")
        child.expect(pexpect.EOF)
    finally:
        shut(child)
    assert child.exitstatus == 0


def test_attach_ends_cleanly_when_the_program_exits(daemon: Daemon, agent: Client) -> None:
    shell = agent.open(**SHELL)
    child = spawn(daemon, "attach", shell.id)
    try:
        child.expect("Ctrl-] detaches")
        child.send("exit 3\r")
        child.expect("exited 3")
        child.expect(pexpect.EOF)
    finally:
        shut(child)
    assert child.exitstatus == 0
    shell.close()


def test_attach_hung_up_still_gives_the_session_its_size_back(daemon: Daemon, agent_shell: Session) -> None:
    child = spawn(daemon, "attach", agent_shell.id, rows=30, cols=120)
    child.expect("Ctrl-] detaches")
    wait_until(lambda: agent_shell.status()["cols"] == 120, message="the attached size")
    os.kill(child.pid, signal.SIGHUP)  # the viewer's terminal went away
    child.expect(pexpect.EOF)
    shut(child)
    assert child.exitstatus == 0
    status = agent_shell.status()
    assert (status["cols"], status["rows"]) == (80, 20)
    assert status["status"] == {"kind": "running"}


# --- the small things a new user trips on -----------------------------------------------------------------------


def test_a_fresh_daemon_counts_no_agents(fresh_daemon: Daemon) -> None:
    fresh_daemon.start()
    status = ok_json(fresh_daemon.socket, "status")  # ptyctl's own operator token is not an agent
    assert status["agents"] == 0
    assert "agents: 0" in ptyctl(fresh_daemon.socket, "status").stdout


def test_sessions_are_named_by_id_name_or_unique_prefix(daemon: Daemon) -> None:
    first = ok_json(daemon.socket, "open", "--name", "builder", "--env", "PS1=$ ")["session_id"]
    second = ok_json(daemon.socket, "open", "--name", "tester", "--env", "PS1=$ ")["session_id"]
    try:
        by_name = ptyctl(daemon.socket, "send", "builder", "echo named-$((6*7))")
        assert by_name.returncode == 0, by_name.stderr
        assert "named-42" in by_name.stdout
        prefix = next(first[:n] for n in range(len(first)) if not second.startswith(first[:n]))
        by_prefix = ok_json(daemon.socket, "read", prefix)
        assert any("named-42" in line for line in by_prefix["lines"])
        ambiguous = ptyctl(daemon.socket, "read", "pty-")
        assert ambiguous.returncode == 2
        assert "matches" in ambiguous.stderr
        assert first in ambiguous.stderr
        assert second in ambiguous.stderr
    finally:
        for sid in (first, second):
            ptyctl(daemon.socket, "close", sid)


def test_sizes_are_taken_as_colsxrows_or_two_numbers_by_open_and_resize(daemon: Daemon) -> None:
    opened = ok_json(daemon.socket, "open", "--size", "100", "30", "--", "cat")
    sid = opened["session_id"]
    try:
        assert (opened["cols"], opened["rows"]) == (100, 30)
        assert opened["foreground"]["name"] == "cat"
        resized = ok_json(daemon.socket, "resize", sid, "90x20")
        assert (resized["cols"], resized["rows"]) == (90, 20)
        resized = ok_json(daemon.socket, "resize", sid, "70", "15")
        assert (resized["cols"], resized["rows"]) == (70, 15)
        bad = ptyctl(daemon.socket, "resize", sid, "70by15")
        assert bad.returncode == 2
        assert "COLSxROWS or COLS ROWS" in bad.stderr
    finally:
        ptyctl(daemon.socket, "close", sid)
    other = ok_json(daemon.socket, "open", "--size", "120x40", "--", "cat")
    assert (other["cols"], other["rows"], other["foreground"]["name"]) == (120, 40, "cat")
    ptyctl(daemon.socket, "close", other["session_id"])


def test_a_regular_file_at_the_socket_path_is_called_what_it_is(tmp_path: Path) -> None:
    path = tmp_path / "ptyd.sock"
    path.write_text("")
    done = ptyctl(path, "status")
    assert done.returncode == 3
    assert "not a socket" in done.stderr
    assert "stale" not in done.stderr


def test_watch_in_a_terminal_smaller_than_the_session_shows_the_prompt_and_marks_the_crop(
    daemon: Daemon, agent: Client
) -> None:
    with agent.open(**SHELL) as shell:  # the default 160x40, watched from 80x24
        shell.send("echo top-of-the-screen\n")
        child = spawn(daemon, "watch", shell.id, rows=24, cols=80)
        try:
            child.expect_exact("CROPPED rows 1-23/40 cols 1-80/160")
            child.expect_exact("top-of-the-screen")
            child.sendintr()
            child.expect(pexpect.EOF)
        finally:
            shut(child)


def test_a_crop_follows_the_cursor_down_a_tall_screen() -> None:
    from ptyd_client import render

    screen: Any = {"lines": [f"row {i}" for i in range(40)], "cursor_y": 35}
    shown, note = render.crop(screen, 40, 160, 200, 23)
    assert shown[0] == "row 13"
    assert shown[-1] == "row 35"  # the cursor's row is the last one shown
    assert note == " | CROPPED rows 14-36/40"
    assert render.crop(screen, 40, 160, 200, 40)[1] == ""  # it fits: no note


def test_open_gives_a_person_their_environment_and_says_how_to_get_an_agents(daemon: Daemon) -> None:
    helped = ptyctl(daemon.socket, "open", "--help")
    assert "--env-profile" in helped.stdout
    assert "human with the operator token" in " ".join(helped.stdout.split())
    person = ok_json(daemon.socket, "open", "--env", "PS1=$ ")
    assert person["env_profile"] == "human"
    agentlike = ok_json(daemon.socket, "open", "--env", "PS1=$ ", "--env-profile", "agent")
    assert agentlike["env_profile"] == "agent"
    shown = ok_json(daemon.socket, "send", agentlike["session_id"], "echo pager=$PAGER")
    assert "pager=cat" in shown["viewport"].splitlines()
    for opened in (person, agentlike):
        ok_json(daemon.socket, "close", opened["session_id"])


def test_send_until_and_read_joined(daemon: Daemon) -> None:
    opened = ok_json(daemon.socket, "open", "--env", "PS1=$ ", "--size", "40x10")
    sid = opened["session_id"]
    waited = ok_json(daemon.socket, "send", "--until", "up-[0-9]+", sid, "sleep 0.3; echo up-$((6*7)); sleep 30")
    assert waited["wait_reason"] == "matched"
    assert waited["match"]["text"] == "up-42"
    ptyctl(daemon.socket, "signal", sid, "INT")
    ok_json(daemon.socket, "send", sid, "printf '%090d\\n' 5")
    joined = ptyctl(daemon.socket, "read", "-J", sid)
    assert "5".rjust(90, "0") in joined.stdout.splitlines()
    rows = ptyctl(daemon.socket, "read", sid)
    assert "5".rjust(90, "0") not in rows.stdout.splitlines()
    ok_json(daemon.socket, "close", sid)


def test_send_calls_out_a_password_prompt(daemon: Daemon) -> None:
    sid = ok_json(daemon.socket, "open", "--env", "PS1=$ ")["session_id"]
    asked = ptyctl(daemon.socket, "send", sid, "read -rs -p 'Password: ' secret")
    assert asked.returncode == 0, asked.stderr
    assert f"[password prompt: the program waits for a secret, not echoed; type it with `ptyctl attach {sid}`]" in (
        asked.stderr
    )
    answered = ptyctl(daemon.socket, "send", sid, "hunter2")
    assert "password prompt" not in answered.stderr
    ok_json(daemon.socket, "close", sid)


def test_record_stop_says_it_stopped_and_where_the_file_is(daemon: Daemon) -> None:
    sid = ok_json(daemon.socket, "open", "--env", "PS1=$ ")["session_id"]
    never = ptyctl(daemon.socket, "record", sid, "--stop")
    assert (never.returncode, never.stdout.strip()) == (0, f"{sid} was not being recorded")
    started = ptyctl(daemon.socket, "record", sid)
    assert started.stdout.startswith(f"recording {sid} to "), started.stderr
    path = started.stdout.strip().split(" to ", 1)[1]
    stopped = ptyctl(daemon.socket, "record", sid, "--stop")
    assert stopped.returncode == 0, stopped.stderr
    assert stopped.stdout.startswith(f"stopped recording {sid}; the recording is in {path}"), stopped.stdout
    assert Path(path).stat().st_size > 0
    ok_json(daemon.socket, "close", sid)
