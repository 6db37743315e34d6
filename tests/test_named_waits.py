"""Named waits (terminal_send ``until`` and ``until_stable_ms``) and the TCP ports a session listens on, against
real servers, watchers and REPLs that print and never ask for input."""

from __future__ import annotations

import re
import shutil
import threading
import time
from pathlib import Path

import pytest

from conftest import Rpc, RpcError, Shell, wait_until


def test_http_server_settles_on_its_log_line_with_the_port_listed(shell: Shell) -> None:
    result = shell.send("python3 -m http.server 0 --bind 127.0.0.1\n", until="Serving HTTP", timeout_ms=20_000)
    assert result["wait_reason"] == "matched", result
    assert result["match"]["text"] == "Serving HTTP"
    port = int(re.search(r"port (\d+)", result["viewport"]).group(1))  # type: ignore[union-attr]
    line = shell.call("terminal_read", start_line=result["match"]["line"], max_lines=1)["lines"][0]
    assert line.startswith("Serving HTTP on 127.0.0.1 port ")
    assert result["foreground"]["name"].startswith("python3")
    listening = result["listening"]
    assert [(entry["port"], entry["address"]) for entry in listening] == [(port, "127.0.0.1")]
    assert listening[0]["pid"] == result["foreground"]["pid"]
    assert shell.call("terminal_status")["listening"] == listening  # SessionInfo says it too
    stopped = shell.send("\x03")
    assert stopped["wait_reason"] == "stdin_read"
    assert stopped["listening"] == []
    assert shell.call("terminal_status")["listening"] == []


def test_a_forking_server_on_ipv6_is_listed_once(shell: Shell) -> None:
    server = (
        'python3 -c \'import os, signal, socket; s = socket.socket(socket.AF_INET6); s.bind(("::", 0)); '
        's.listen(); os.fork() and print("up", s.getsockname()[1], flush=True); signal.pause()\'\n'
    )
    result = shell.send(server, until=r"up \d+")
    assert result["wait_reason"] == "matched"
    port = int(result["match"]["text"].split()[1])
    assert [(entry["port"], entry["address"]) for entry in result["listening"]] == [(port, "::")]
    shell.send("\x03")


def test_tail_f_waits_for_the_line_named_then_a_pure_wait_for_the_next(shell: Shell, tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    log.write_text("starting\n")
    started = shell.send(f"tail -f {log}\n", until="starting")
    assert started["wait_reason"] == "matched"
    op = shell.send("", until=r"ready in (\d+) ms", wait=False)["operation_id"]

    def write() -> None:
        with log.open("a") as f:
            for i in range(3000):
                f.write(f"noise {i}: not yet\n")
            f.flush()
            time.sleep(0.3)
            f.write("server ready in 12 ms\n")

    writer = threading.Thread(target=write)
    writer.start()
    waited = shell.call("terminal_wait", timeout_ms=20_000)
    writer.join()
    assert waited["operation_id"] == op
    result = waited["result"]
    assert result["wait_reason"] == "matched", result
    assert result["match"]["text"] == "ready in 12 ms"
    assert shell.call("terminal_read", start_line=result["match"]["line"], max_lines=1)["lines"] == [
        "server ready in 12 ms"
    ]
    # A line already there before the wait does not match it.
    quiet = shell.send("", until="ready in", timeout_ms=500)
    assert quiet["wait_reason"] == "timeout"
    assert quiet["match"] is None
    shell.send("\x03")


def test_silence_does_not_end_a_named_wait_but_a_given_idle_ms_does(shell: Shell) -> None:
    began = time.monotonic()
    result = shell.send("sleep 1.2; echo finally-$((6*7)); sleep 30\n", until="finally-42")
    assert result["wait_reason"] == "matched"
    assert time.monotonic() - began >= 1.2
    shell.send("\x03")
    idle = shell.send("sleep 30\n", until="never", idle_ms=300)
    assert idle["wait_reason"] == "inferred_idle"
    shell.send("\x03")


def test_the_typed_command_line_is_not_matched(shell: Shell) -> None:
    result = shell.send("echo one; sleep 30\n", until="sleep", timeout_ms=800)
    assert result["wait_reason"] == "timeout"
    assert result["match"] is None
    shell.send("\x03")


def test_a_command_that_ends_at_the_prompt_ends_the_wait(shell: Shell) -> None:
    began = time.monotonic()
    result = shell.send("ls /nonexistent-dir\n", until="listening on", timeout_ms=20_000)
    assert result["wait_reason"] == "stdin_read"
    assert result["match"] is None
    assert time.monotonic() - began < 5


def test_a_match_in_a_flood_is_found_past_the_screen(shell: Shell) -> None:
    result = shell.send("seq 1 200000; echo marker-$((6*7)); seq 1 100; sleep 30\n", until="^marker-42$")
    assert result["wait_reason"] == "matched"
    line = result["match"]["line"]
    assert shell.call("terminal_read", start_line=line, max_lines=1)["lines"] == ["marker-42"]
    shell.send("\x03")


def test_until_stable_waits_for_the_screen_to_stop_changing(shell: Shell) -> None:
    began = time.monotonic()
    result = shell.send("for i in 1 2 3 4 5; do echo tick $i; sleep 0.2; done; sleep 30\n", until_stable_ms=700)
    elapsed = time.monotonic() - began
    assert result["wait_reason"] == "stable"
    assert result["viewport"].splitlines()[-1] == "tick 5"  # the cursor line after it is blank: trimmed
    assert elapsed >= 0.8 + 0.7
    shell.send("\x03")


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_a_repl_reading_while_it_works_waits_for_the_value_named(shell: Shell) -> None:
    assert shell.send("node\n", idle_ms=10_000)["viewport"].endswith(">")
    result = shell.send("await new Promise(r => setTimeout(r, 1500)); 6*7\n", until=r"^42$", timeout_ms=20_000)
    assert result["wait_reason"] == "matched", result
    assert "42" in result["viewport"].splitlines()  # the moment it is drawn: the prompt may follow
    shell.send(".exit\n")


def test_a_bad_pattern_is_a_typed_error_naming_the_field(shell: Shell) -> None:
    with pytest.raises(RpcError) as err:
        shell.send("", until="(unclosed")
    assert err.value.code == -32602
    assert err.value.data["field"] == "until"
    with pytest.raises(RpcError) as err:
        shell.send("", until="a" * 1025)
    assert err.value.code == -32602
    assert "$.until" in err.value.data["detail"]
    # Nothing was written and the session takes the next send.
    assert shell.send("echo fine\n")["viewport"].splitlines()[-2] == "fine"


def test_idle_sessions_list_no_ports_and_a_listener_appears_on_status(shell: Shell) -> None:
    assert shell.call("terminal_status")["listening"] == []
    shell.send("python3 -m http.server 0 --bind 127.0.0.1 &\n")
    wait_until(lambda: shell.call("terminal_status")["listening"] != [], message="the server listening")
    (entry,) = shell.call("terminal_status")["listening"]
    assert entry["address"] == "127.0.0.1"
    shell.send("kill %1; wait\n")
    assert shell.call("terminal_status")["listening"] == []


def test_a_line_wrapped_by_the_width_matches_whole_and_a_long_command_line_does_not(rpc: Rpc, token: str) -> None:
    narrow = Shell(rpc, token, env={"PS1": "$ "}, cols=40, rows=12)
    url = "http://127.0.0.1:8000/" + "a" * 60
    # The typed line wraps too (over 40 columns): none of its rows is output.
    command = f"sleep 0.2; printf 'listening on %s\\n' {url}; sleep 30 # listening on {url}\n"
    result = narrow.send(command, until=r"listening on http://\S+a{60}")
    assert result["wait_reason"] == "matched"
    assert result["match"]["text"] == f"listening on {url}"
    assert narrow.call("terminal_read", start_line=result["match"]["line"], max_lines=1, join_wrapped=True)[
        "lines"
    ] == [f"listening on {url}"]
    narrow.send("\x03")
    narrow.close()
