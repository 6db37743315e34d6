"""Sessions end to end: open, send, read, background operations, signals, size, limits and failures."""

from __future__ import annotations

import os
import pwd
import threading
from pathlib import Path

import pytest

from conftest import Daemon, Rpc, RpcError, Shell, pid_alive, wait_until


def test_open_returns_a_ready_session(rpc: Rpc, token: str) -> None:
    s = Shell(rpc, token, name="build", env={"PS1": "ready> "}, cols=100, rows=30)
    opened = s.opened
    assert opened["session_id"].startswith("pty-")
    assert opened["name"] == "build"
    assert opened["type"] == "shell"
    assert opened["motd"] == "ready>"
    assert opened["wait_reason"] == "stdin_read"
    assert (opened["cols"], opened["rows"]) == (100, 30)
    assert opened["status"] == {"kind": "running"}
    assert pid_alive(opened["pid"])
    assert s.send("echo $COLUMNS $LINES $TERM\n")["viewport"].splitlines()[1] == "100 30 xterm-256color"
    s.close()


def test_exec_backend_runs_argv_without_a_shell(rpc: Rpc, token: str) -> None:
    s = Shell(rpc, token, type="exec", argv=["python3", "-q"])
    assert s.opened["motd"] == ">>>"
    assert s.opened["foreground"]["name"] == "python3"
    assert s.send("print('via exec')\n")["viewport"] == ">>> print('via exec')\nvia exec\n>>>"
    s.close()


def test_exec_needs_argv(rpc: Rpc, token: str) -> None:
    with pytest.raises(RpcError) as err:
        rpc.call("terminal_open", token=token, type="exec")
    assert err.value.code == -32602


def test_cwd_env_and_agent_profile(rpc: Rpc, token: str, tmp_path: os.PathLike[str]) -> None:
    s = Shell(rpc, token, cwd=str(tmp_path), env={"PS1": "$ ", "GREETING": "hi"}, profile="agent")
    out = s.send("pwd; echo $GREETING $GIT_PAGER $GIT_EDITOR $PTYD_SESSION\n")["viewport"].splitlines()
    assert out[1] == str(tmp_path)
    assert out[2] == f"hi cat true {s.id}"
    s.close()


def test_a_session_has_the_login_shell_in_SHELL_unless_given(rpc: Rpc, token: str) -> None:
    """The test daemon runs without SHELL (as under CI or cron): script, vim's :shell and less's ! would run sh."""
    login = pwd.getpwuid(os.getuid()).pw_shell
    s = Shell(rpc, token, env={"PS1": "$ "})
    assert s.send("echo $SHELL\n")["viewport"].splitlines()[-2] == login
    s.close()
    s = Shell(rpc, token, env={"PS1": "$ ", "SHELL": "/bin/zsh"})
    assert s.send("echo $SHELL\n")["viewport"].splitlines()[-2] == "/bin/zsh"
    s.close()


KEYPAD_PROGRAM = r"""
import curses
def main(w):
    w.keypad(True)  # application cursor keys: arrows arrive as ESC O A
    got = []
    while True:
        w.addstr(0, 0, "keys: " + " ".join(got) + " ")
        w.refresh()
        c = w.getch()
        if c == ord("q"):
            return
        got.append(curses.keyname(c).decode())
curses.wrapper(main)
"""


def test_named_keys_reach_a_curses_program_as_keys(shell: Shell, tmp_path: os.PathLike[str]) -> None:
    program = Path(tmp_path) / "keypad.py"
    program.write_text(KEYPAD_PROGRAM)
    shell.send(f"python3 {program}\n")
    typed = shell.send("\x1b[B")  # the CSI arrow an agent might type: three keys to this program
    assert typed["viewport"].splitlines()[0].split() == ["keys:", "^[", "[", "B"]
    result = shell.send("", keys=["Down", "Up", "F5", "PageDown", "Home", "C-Left"])
    assert result["wait_reason"] == "stdin_read"
    keys = result["viewport"].splitlines()[0].split()[4:]
    assert keys == ["KEY_DOWN", "KEY_UP", "KEY_F(5)", "KEY_NPAGE", "KEY_HOME", "kLFT5"], result["viewport"]
    assert shell.send("", keys=["q"])["viewport"].splitlines()[-1] == "$"


def test_named_keys_in_a_shell_and_bad_names(shell: Shell) -> None:
    shell.send("echo first-line\n")
    result = shell.send("", keys=["Up", "Enter"])  # readline: history, in normal cursor mode
    assert result["viewport"].splitlines()[-2:] == ["first-line", "$"]
    result = shell.send("echo ", keys=["M-."])  # bash: the last word of the previous line
    assert result["viewport"].splitlines()[-1] == "$ echo first-line"
    assert shell.send("", keys=["C-u"])["viewport"].splitlines()[-1] == "$"
    with pytest.raises(RpcError) as err:
        shell.send("echo typed\n", keys=["Down", "Hyper-x"])
    assert err.value.code == -32602
    assert err.value.data["field"] == "keys"
    assert "Hyper-x" in err.value.message
    assert "typed" not in "\n".join(shell.transcript())  # refused whole: nothing written
    assert shell.send("echo after\n")["viewport"].splitlines()[-2:] == ["after", "$"]


@pytest.mark.parametrize(
    ("params", "reason"),
    [
        ({"argv": ["/no/such/program"]}, "ENOENT"),
        ({"argv": ["no-such-program-anywhere"]}, "ENOENT"),
        ({"cwd": "/no/such/dir"}, "ENOENT"),
        ({"cwd": "/etc/hostname"}, "ENOTDIR"),
        ({"argv": ["/etc"]}, "EACCES"),
    ],
    ids=["missing-path", "missing-on-path", "missing-cwd", "cwd-not-dir", "not-executable"],
)
def test_spawn_failure_leaves_nothing_behind(daemon: Daemon, rpc: Rpc, token: str, params: dict, reason: str) -> None:
    assert daemon.proc is not None
    fds_before = set(os.listdir(f"/proc/{daemon.proc.pid}/fd"))
    sessions_before = rpc.call("daemon_info")["sessions"]
    with pytest.raises(RpcError) as err:
        rpc.call("terminal_open", token=token, **params)
    assert err.value.kind == "spawn_failed"
    assert err.value.data["reason"] == reason
    # The state saver writes in a thread and may hold its file open for a moment: a leaked fd stays, that one goes.
    pid = daemon.proc.pid
    wait_until(lambda: set(os.listdir(f"/proc/{pid}/fd")) == fds_before, timeout=5, message="the fds as before")
    assert rpc.call("daemon_info")["sessions"] == sessions_before


def test_unknown_backend(rpc: Rpc, token: str) -> None:
    with pytest.raises(RpcError) as err:
        rpc.call("terminal_open", token=token, type="telnet")
    assert err.value.kind == "backend_not_found"


def test_one_active_send_per_session(rpc: Rpc, shell: Shell) -> None:
    started = shell.send("sleep 2\n", wait=False)
    with pytest.raises(RpcError) as err:
        shell.send("echo too soon\n")
    assert err.value.kind == "session_busy"
    assert err.value.data["operation_id"] == started["operation_id"]
    shell.call("terminal_cancel")
    result = shell.call("terminal_wait", timeout_ms=10_000)["result"]
    assert result["wait_reason"] == "stdin_read", result


def test_background_send_output_wait_and_cancel(shell: Shell) -> None:
    started = shell.send("for i in 1 2 3; do echo line$i; sleep 0.2; done; sleep 30\n", wait=False)
    op = started["operation_id"]
    wait_until(lambda: "line3" in shell.transcript(), message="the loop's output")
    first = shell.call("terminal_output")
    assert first["operation_id"] == op
    assert first["done"] is False
    assert [line for line in first["output"].splitlines() if line.startswith("line")] == [
        "line1",
        "line2",
        "line3",
    ]
    assert first["output"].endswith("\n")  # chunks concatenate without gluing lines together
    assert shell.call("terminal_output")["output"] == ""  # consumed
    cancel = shell.call("terminal_cancel")
    assert cancel["cancelled"] is True
    assert "terminal_wait" in cancel["message"]
    waited = shell.call("terminal_wait", timeout_ms=10_000)
    assert waited["done"] is True
    assert waited["operation_id"] == op
    assert waited["result"]["wait_reason"] == "stdin_read"
    assert waited["result"]["viewport"].endswith("$")
    last = shell.call("terminal_output")
    assert last["done"] is True
    assert last["output"].endswith("$")
    settled = shell.call("terminal_cancel")
    assert settled["cancelled"] is False
    assert settled["interrupted"] is False
    assert settled["hint"]


def test_cancel_right_after_the_send_still_interrupts_the_command(shell: Shell) -> None:
    # The cancel may come before the shell has read the line (dropped whole: nothing to interrupt), after it read
    # part of it, or after it read it but before it forked. Each time the next line runs intact: a SIGINT to
    # bash's readline that it acts on only at its next key took that line's first character ("leep 30").
    for i in range(30):
        shell.send("sleep 30\n", wait=False)
        assert shell.call("terminal_cancel")["cancelled"] is True
        result = shell.call("terminal_wait", timeout_ms=10_000)["result"]
        assert result["wait_reason"] == "stdin_read", result
        assert result["foreground"]["name"] == "bash"
        assert result["viewport"].endswith("$")
        after = shell.send(f"echo next{i}\n", idle_ms=10_000)
        assert after["viewport"].splitlines()[-2:] == [f"next{i}", "$"], after["viewport"]


def test_wait_with_zero_timeout_returns_a_settled_result(shell: Shell) -> None:
    shell.send("true\n")
    waited = shell.call("terminal_wait", timeout_ms=0)
    assert waited["done"] is True
    assert waited["result"]["viewport"] == "$ true\n$"


def test_wait_times_out_without_settling(shell: Shell) -> None:
    shell.send("sleep 3\n", wait=False)
    waited = shell.call("terminal_wait", timeout_ms=100)
    assert waited["done"] is False
    assert waited["result"] is None
    shell.call("terminal_cancel")
    assert shell.call("terminal_wait", timeout_ms=10_000)["done"] is True


def test_disconnect_mid_send_then_wait_from_a_new_connection(daemon: Daemon, token: str) -> None:
    first = daemon.rpc()
    session = first.call("terminal_open", token=token, env={"PS1": "$ "})["session_id"]
    first.request("terminal_send", {"token": token, "session_id": session, "input": "sleep 0.5; echo survived\n"})
    first.close()  # the agent's tool plugin reloads mid-send
    with daemon.rpc() as second:
        waited = second.call("terminal_wait", token=token, session_id=session, timeout_ms=10_000)
        assert waited["done"] is True
        assert waited["result"]["viewport"] == "$ sleep 0.5; echo survived\nsurvived\n$"
        # And the most recently settled result stays available.
        again = second.call("terminal_wait", token=token, session_id=session)
        assert again["result"] == waited["result"]
        second.call("terminal_close", token=token, session_id=session)


def test_request_key_makes_a_retried_send_idempotent(shell: Shell) -> None:
    first = shell.send("echo once\n", request_key="k-1")
    again = shell.send("echo once\n", request_key="k-1")
    assert again == first
    assert shell.transcript().count("once") == 1
    assert shell.send("echo twice\n", request_key="k-2")["operation_id"] != first["operation_id"]


def test_viewport_is_bounded_head_and_tail(shell: Shell) -> None:
    result = shell.send("seq 1 5000\n", max_bytes=2000)
    assert result["truncated"] is True
    text = result["viewport"]
    assert len(text.encode()) <= 2000
    lines = text.splitlines()
    assert lines[0] == "$ seq 1 5000"
    assert lines[-2:] == ["5000", "$"]
    marker = next(line for line in lines if line.startswith("[..."))
    assert "terminal_read start_line=" in marker
    start = int(marker.split("start_line=")[1].split()[0])
    count = int(marker.split("max_lines=")[1].split()[0])
    page = shell.call("terminal_read", start_line=start, max_lines=count)
    cut = lines.index(marker)
    # The omitted lines are exactly those between the kept head and the kept tail.
    assert int(page["lines"][0]) == int(lines[cut - 1]) + 1
    assert int(page["lines"][-1]) + 1 == int(lines[cut + 1])


def test_ten_megabyte_burst_keeps_memory_bounded_and_the_tail_exact(daemon: Daemon, shell: Shell) -> None:
    assert daemon.proc is not None

    def rss_kib() -> int:
        with open(f"/proc/{daemon.proc.pid}/status") as f:  # type: ignore[union-attr]
            return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))

    before = rss_kib()
    result = shell.send("seq 1 1500000\n", timeout_ms=60_000)  # 10.4 MB
    assert result["wait_reason"] == "stdin_read"
    assert result["truncated"] is True
    assert result["viewport"].splitlines()[-3:] == ["1499999", "1500000", "$"]
    assert result["viewport"].splitlines()[0] == "$ seq 1 1500000"
    page = shell.call("terminal_read", start_line=-3, max_lines=3)
    assert page["lines"] == ["1499999", "1500000", "$"]
    # 10,000 lines of scrollback are retained, plus the screen's rows.
    assert 10_000 < page["total_lines"] - page["first_retained_line"] <= 10_000 + 40
    assert "no longer retained" in result["viewport"]
    grown = rss_kib() - before
    assert grown < 64 * 1024, f"daemon grew {grown} KiB"


def test_read_pages_the_transcript(shell: Shell) -> None:
    shell.send("seq 1 500\n")
    page = shell.call("terminal_read", start_line=1, max_lines=3)
    assert page["lines"] == ["1", "2", "3"]
    assert page["start_line"] == 1
    assert page["next_line"] == 4
    tail = shell.call("terminal_read", start_line=-2, max_lines=2)
    assert tail["lines"] == ["500", "$"]
    assert tail["next_line"] == tail["total_lines"]
    bounded = shell.call("terminal_read", start_line=1, max_lines=500, max_bytes=256)
    assert bounded["truncated"] is True
    assert len("\n".join(bounded["lines"]).encode()) <= 256


def test_output_survives_clear(shell: Shell) -> None:
    shell.send("echo before-clear\n")
    assert shell.send("clear\n")["viewport"].endswith("$")
    assert "before-clear" in shell.transcript()


def test_signal_reaches_the_verified_foreground_group(shell: Shell) -> None:
    shell.send("sleep 30\n", wait=False)
    wait_until(lambda: (shell.call("terminal_status")["foreground"] or {}).get("name") == "sleep", message="sleep")
    fg = shell.call("terminal_status")["foreground"]
    sent = shell.call("terminal_signal", signal="INT")
    assert sent == {"delivered": True, "pgid": fg["pgid"], "signal": "SIGINT"}
    assert shell.call("terminal_wait", timeout_ms=10_000)["result"]["viewport"].endswith("$")
    assert not pid_alive(fg["pid"])


def test_signal_by_number_and_unknown_name(shell: Shell) -> None:
    assert shell.call("terminal_signal", signal=28)["signal"] == "SIGWINCH"
    with pytest.raises(RpcError) as err:
        shell.call("terminal_signal", signal="SIGNOPE")
    assert err.value.code == -32602


def test_ctrl_c_as_input(shell: Shell) -> None:
    shell.send("sleep 30\n", idle_ms=300)
    assert shell.send("\x03")["viewport"].endswith("$")


def test_resize(shell: Shell) -> None:
    info = shell.call("terminal_resize", cols=90, rows=20)
    assert (info["cols"], info["rows"]) == (90, 20)
    assert shell.send("stty size\n")["viewport"].splitlines()[1] == "20 90"


def test_status_and_list(rpc: Rpc, token: str, shell: Shell) -> None:
    status = shell.call("terminal_status")
    assert status["session_id"] == shell.id
    assert status["busy"] is False
    assert status["foreground"]["name"] == "bash"
    listed = rpc.call("terminal_list", token=token)["sessions"]
    assert [s["session_id"] for s in listed] == [shell.id]
    other = rpc.call("agent_register")["token"]
    assert rpc.call("terminal_list", token=other)["sessions"] == []


def test_session_limits(fresh_daemon: Daemon) -> None:
    fresh_daemon.config_path.write_text("max_sessions_per_agent = 2\nmax_sessions = 3\n")
    fresh_daemon.start()
    with fresh_daemon.rpc() as rpc:
        a = rpc.call("agent_register")["token"]
        b = rpc.call("agent_register")["token"]
        for _ in range(2):
            rpc.call("terminal_open", token=a)
        with pytest.raises(RpcError) as err:
            rpc.call("terminal_open", token=a)
        assert err.value.kind == "limit_exceeded"
        assert err.value.data["limit"] == "max_sessions_per_agent"
        rpc.call("terminal_open", token=b)
        with pytest.raises(RpcError) as err:
            rpc.call("terminal_open", token=b)
        assert err.value.data["limit"] == "max_sessions"


def test_sessions_on_separate_connections_run_in_parallel(daemon: Daemon, token: str) -> None:
    results: dict[int, dict] = {}

    def run(i: int) -> None:
        with daemon.rpc() as rpc:
            s = Shell(rpc, token, env={"PS1": "$ "})
            results[i] = s.send(f"sleep 0.5; echo worker{i}\n")
            s.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(f"worker{i}" in results[i]["viewport"].splitlines() for i in range(4))


def test_screen_shows_the_full_screen_program_without_writing(human_shell: Shell) -> None:
    shell = human_shell
    shell.send("seq 100 300 | less\n")
    screen = shell.call("terminal_screen")
    assert screen["alt_screen"] is True
    assert screen["lines"][0] == "100"
    assert len(screen["lines"]) == 40
    assert screen["cursor_y"] == 39
    before = shell.call("terminal_status")["operation_id"]
    shell.call("terminal_screen")
    assert shell.call("terminal_status")["operation_id"] == before  # reading the screen sent nothing
    shell.send("q")
    assert shell.call("terminal_screen")["lines"][-1] == ""
