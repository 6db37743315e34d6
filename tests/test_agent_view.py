"""Nothing a session did goes unseen (issue 26): every result an agent is given carries what the session printed and
which shell commands ended since the previous result it was given, whatever happened between its calls. Real bash
sessions through a real daemon; the between-calls moments are waited for by reading the transcript (terminal_read
consumes nothing), never by sleeping."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import Daemon, Rpc, RpcError, Shell, wait_until


def at_prompt_after(shell: Shell, text: str) -> None:
    """Wait, without consuming anything, until ``text`` was printed and the shell drew its prompt after it."""

    def done() -> bool:
        lines = [line for line in shell.transcript() if line.strip()]
        return any(text in line for line in lines[:-1]) and lines[-1] == "$"

    wait_until(done, timeout=20, message=f"{text!r} then a prompt")


def test_command_that_ends_between_calls_shows_its_output_and_exit_code(shell: Shell) -> None:
    first = shell.send("sleep 0.4; echo RES''ULT; false\n", idle_ms=100)
    assert first["wait_reason"] == "inferred_idle"
    assert "RESULT" not in first["viewport"]
    assert first["running"]["command"] == "sleep 0.4; echo RES''ULT; false"
    at_prompt_after(shell, "RESULT")
    second = shell.send("")
    assert second["wait_reason"] == "stdin_read"
    assert second["viewport"].splitlines()[-2:] == ["RESULT", "$"]
    assert second["exit_code"] == 1
    assert [(c["command"], c["exit_code"]) for c in second["commands"]] == [("sleep 0.4; echo RES''ULT; false", 1)]
    assert second["commands"][0]["duration_ms"] >= 400
    assert second["earlier_lines"] >= 1
    assert second["running"] is None
    # Reported once: the next result starts after it.
    third = shell.send("echo NEXT\n")
    assert "RESULT" not in third["viewport"]
    assert [(c["command"], c["exit_code"]) for c in third["commands"]] == [("echo NEXT", 0)]
    assert third["earlier_lines"] == 0


def test_output_already_seen_is_not_sent_again(shell: Shell) -> None:
    shell.send("echo ONE\n")
    result = shell.send("echo TWO\n")
    assert "ONE" not in result["viewport"]
    assert result["viewport"].splitlines() == ["$ echo TWO", "TWO", "$"]


def test_wait_after_a_timeout_waits_for_the_command_and_reports_its_end(shell: Shell) -> None:
    first = shell.send("sleep 0.8; echo DONE; (exit 3)\n", timeout_ms=150)
    assert first["wait_reason"] == "timeout"
    assert first["running"] is not None
    waited = shell.call("terminal_wait", timeout_ms=20_000)
    assert waited["done"] is True
    result = waited["result"]
    assert result["wait_reason"] == "stdin_read"
    assert result["exit_code"] == 3
    assert "DONE" in result["viewport"]
    assert waited["operation_id"] == result["operation_id"] != first["operation_id"]


def test_wait_that_gives_up_says_so_and_loses_nothing(shell: Shell) -> None:
    shell.send("echo EARLY; sleep 1.5; echo LATE\n", timeout_ms=100)
    early = shell.call("terminal_wait", timeout_ms=200)
    assert early["done"] is False
    assert early["result"]["wait_reason"] == "timeout"
    assert early["result"]["running"] is not None
    later = shell.call("terminal_wait", timeout_ms=20_000)
    assert later["done"] is True
    assert "LATE" in later["result"]["viewport"]
    assert later["result"]["exit_code"] == 0


def test_an_empty_send_follows_the_running_command_through_silence(shell: Shell) -> None:
    shell.send("sleep 4; echo FINISHED\n", timeout_ms=100)
    result = shell.send("")  # the default idle_ms (3 s) would end it before the command did, without the follow
    assert result["wait_reason"] == "stdin_read"
    assert "FINISHED" in result["viewport"]
    assert result["exit_code"] == 0


def test_until_done_is_one_call_however_quiet_the_command_is(shell: Shell) -> None:
    result = shell.send("sleep 1.2; echo BUILT; false\n", idle_ms=100, until_done=True)
    assert result["wait_reason"] == "stdin_read"
    assert result["exit_code"] == 1
    assert "BUILT" in result["viewport"]


def test_a_result_nobody_was_given_is_carried_into_the_next(shell: Shell) -> None:
    started = shell.send("echo BACKGROUND\n", wait=False)
    assert "operation_id" in started
    at_prompt_after(shell, "BACKGROUND")
    result = shell.send("echo AFTER\n")
    lines = result["viewport"].splitlines()
    assert "BACKGROUND" in lines
    assert lines[-2:] == ["AFTER", "$"]
    assert [c["command"] for c in result["commands"]] == ["echo BACKGROUND", "echo AFTER"]


def test_cancel_then_the_next_call_shows_how_it_ended(shell: Shell) -> None:
    shell.send("echo BEFORE; sleep 30\n", wait=False)
    wait_until(lambda: any(line == "BEFORE" for line in shell.transcript()), message="BEFORE")
    cancelled = shell.call("terminal_cancel")
    assert cancelled["cancelled"] is True
    result = shell.call("terminal_wait", timeout_ms=20_000)["result"]
    assert result["wait_reason"] == "stdin_read"
    assert "BEFORE" in result["viewport"]
    assert result["exit_code"] == 130
    # A cancel with no send active (the last one timed out): the call after it shows the end.
    first = shell.send("echo AGAIN; sleep 30\n", timeout_ms=300)
    assert first["wait_reason"] == "timeout"
    assert shell.call("terminal_cancel")["interrupted"] is True
    after = shell.send("")
    assert after["exit_code"] == 130
    assert [c["command"] for c in after["commands"]] == ["echo AGAIN; sleep 30"]


def test_signal_between_calls_shows_the_end(shell: Shell) -> None:
    first = shell.send("sleep 30\n", timeout_ms=300)
    assert first["wait_reason"] == "timeout"
    assert shell.call("terminal_signal", signal="SIGTERM")["delivered"] is True
    result = shell.send("")
    assert result["exit_code"] == 143
    assert [c["command"] for c in result["commands"]] == ["sleep 30"]


def test_until_matches_a_line_printed_between_calls(shell: Shell) -> None:
    shell.send("sleep 0.3; echo READY-42; sleep 30\n", idle_ms=100)
    wait_until(lambda: "READY-42" in shell.transcript(), message="READY-42")
    result = shell.send("", until=r"READY-\d+", timeout_ms=5000)
    assert result["wait_reason"] == "matched"
    assert result["match"]["text"] == "READY-42"
    shell.call("terminal_cancel")


def test_wait_for_an_unknown_operation_is_operation_lost(shell: Shell) -> None:
    with pytest.raises(RpcError) as err:
        shell.call("terminal_wait", operation_id="op-0123456789abcdef", timeout_ms=100)
    assert err.value.data["kind"] == "operation_lost"
    started = shell.send("echo X\n", wait=False)
    waited = shell.call("terminal_wait", operation_id=started["operation_id"], timeout_ms=20_000)
    assert waited["done"] is True
    assert waited["operation_id"] == started["operation_id"]


def test_a_long_single_line_keeps_its_head_and_tail(shell: Shell) -> None:
    script = "import json; print(json.dumps({'head': 'START', 'pad': 'x' * 14000, 'tail': 'END'}))"
    result = shell.send(f'python3 -c "{script}"\n', max_bytes=8192, join_wrapped=True)
    viewport = result["viewport"]
    assert '{"head": "START"' in viewport
    assert '"tail": "END"}' in viewport
    assert re.search(r"\[\.\.\. \d+ characters cut \.\.\.\]", viewport)
    assert len(viewport.encode()) <= 8192
    compact = shell.send(f'python3 -c "{script}"\n', max_bytes=8192, join_wrapped=True, compact=True)
    assert '"tail": "END"}' in compact["viewport"]
    assert "START" in compact["viewport"]


@pytest.mark.parametrize("command", ["touch {f}; sleep 30", "sleep 0.05; touch {f}; sleep 30"])
def test_keys_after_input_act_on_what_the_input_started(shell: Shell, tmp_path: Path, command: str) -> None:
    for i in range(20):
        marker = tmp_path / f"touched-{i}"
        result = shell.send(command.format(f=marker) + "\n", keys=["C-c"])
        assert result["wait_reason"] == "stdin_read", result
        assert marker.exists(), f"round {i}: the C-c came before touch ran"
        assert result["exit_code"] == 130


def test_no_early_idle_beside_floods(rpc: Rpc, token: str) -> None:
    shells = [Shell(rpc, token, env={"PS1": "$ "}) for _ in range(12)]
    try:
        ops = [s.send("seq 1 200000; echo FLOOD-END\n", wait=False, idle_ms=1000) for s in shells]
        for s, op in zip(shells, ops, strict=True):
            waited = s.call("terminal_wait", operation_id=op["operation_id"], timeout_ms=120_000)
            result = waited["result"]
            assert result["wait_reason"] == "stdin_read", result["wait_reason"]
            assert result["viewport"].splitlines()[-2:] == ["FLOOD-END", "$"]
            assert result["exit_code"] == 0
    finally:
        for s in shells:
            s.close()


def test_a_person_at_ptyctl_does_not_read_the_agents_output_away(daemon: Daemon, rpc: Rpc, shell: Shell) -> None:
    first = shell.send("sleep 0.3; echo FOR-THE-AGENT; (exit 4)\n", idle_ms=100)
    assert first["wait_reason"] == "inferred_idle"
    at_prompt_after(shell, "FOR-THE-AGENT")
    operator = (daemon.directory / "operator.token").read_text().strip()
    person = rpc.call("terminal_send", token=operator, session_id=shell.id, input="echo BY-A-PERSON\n")
    assert "FOR-THE-AGENT" in person["viewport"]  # the person sees it too...
    result = shell.send("")
    assert "FOR-THE-AGENT" in result["viewport"]  # ...and the agent still does
    assert "BY-A-PERSON" in result["viewport"]
    assert [(c["command"], c["exit_code"]) for c in result["commands"]] == [
        ("sleep 0.3; echo FOR-THE-AGENT; (exit 4)", 4),
        ("echo BY-A-PERSON", 0),
    ]


def test_until_with_a_command_searches_only_that_commands_output(shell: Shell) -> None:
    shell.send("sleep 0.2; echo DONE-1\n", idle_ms=50)
    at_prompt_after(shell, "DONE-1")
    result = shell.send("sleep 0.3; echo DONE-2\n", until=r"DONE-\d", timeout_ms=5000)
    assert result["wait_reason"] == "matched", result
    assert result["match"]["text"] == "DONE-2"  # not the line printed between calls


def test_a_full_screen_result_leaves_the_lines_before_it_unread(shell: Shell) -> None:
    shell.send("sleep 0.2; echo BEFORE-LESS\n", idle_ms=50)
    at_prompt_after(shell, "BEFORE-LESS")
    screen = shell.send("LESS= less /etc/passwd\n", until_stable_ms=300)
    assert screen["alt_screen"] is True
    back = shell.send("q")
    assert back["alt_screen"] is False
    assert "BEFORE-LESS" in back["viewport"]


# A raw-mode program (no ONLCR) whose line's end comes in a later write than its text: the first result shows the
# line as its cursor line; the next shows it again only if it changed.
RAW_LINE = "import sys, time, tty; tty.setraw(0); w = sys.stdout.write; w('RR' 'R'); sys.stdout.flush(); time.sleep(.3)"


@pytest.mark.parametrize(("rest", "shown_again"), [("'\\n'", ""), ("'SSS\\n'", "RRRSSS")])
def test_a_cursor_line_shown_is_shown_again_only_if_it_changed(shell: Shell, rest: str, shown_again: str) -> None:
    program = f"{RAW_LINE}; w({rest}); w('TAIL'); sys.stdout.flush(); time.sleep(1000)"
    first = shell.send(f'python3 -c "{program}"\n', until="RRR")
    assert first["wait_reason"] == "matched"
    assert first["viewport"].splitlines()[-1] == "RRR"  # the cursor line, shown as it was then
    # The TAIL row itself (the command line echoed holds the word too: a machine slow enough to send again before the
    # program wrote on showed the screen before its write).
    wait_until(lambda: "TAIL" in (line.strip() for line in shell.transcript()), message="the program's next write")
    second = shell.send("typed ahead", idle_ms=300, timeout_ms=5_000)
    assert second["wait_reason"] == "inferred_idle"
    # No ONLCR: the line feed keeps the column, so TAIL starts where the line before it ended.
    tail = " " * len(shown_again or "RRR") + "TAIL"
    assert second["viewport"].splitlines() == ([shown_again, tail] if shown_again else [tail])


SYNTAX_ERROR = {"bash": 2, "zsh": 1, "fish": 123}  # each shell's status for a line it cannot parse
BLOCK = {  # a command over three lines, in each shell's own syntax
    "bash": "for i in 1 2\ndo echo x$i\ndone",
    "zsh": "for i in 1 2\ndo echo x$i\ndone",
    "fish": "for i in 1 2\necho x$i\nend",
}


@pytest.fixture(params=sorted(SYNTAX_ERROR))
def shell_name(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def any_shell(shell_name: str, rpc: Rpc, token: str) -> Iterator[Shell]:
    s = Shell(rpc, token, argv=[shell_name], env={"PS1": "$ "})
    yield s
    with contextlib.suppress(RpcError, OSError):
        s.close()


def outcomes(result: dict[str, Any]) -> list[tuple[str | None, int | None]]:
    return [(c["command"], c["exit_code"]) for c in result["commands"]]


def test_a_line_the_shell_refused_is_reported_with_its_status(any_shell: Shell, shell_name: str) -> None:
    refused = any_shell.send("echo )\n")
    assert refused["wait_reason"] == "stdin_read"
    status = SYNTAX_ERROR[shell_name]
    assert outcomes(refused) == [("echo )", status)]
    assert refused["exit_code"] == status
    assert outcomes(any_shell.send("echo fine\n")) == [("echo fine", 0)]  # the next line is its own


def test_a_command_left_open_is_a_continuation_until_its_last_line(any_shell: Shell) -> None:
    first = any_shell.send("echo 'one\n")
    assert first["wait_reason"] == "stdin_read"
    assert first["continuation"] == "echo 'one"
    assert first["commands"] == []
    assert first["exit_code"] is None
    second = any_shell.send("two'\n")
    assert second["continuation"] is None
    assert outcomes(second) == [("echo 'one\ntwo'", 0)]
    assert second["viewport"].splitlines()[-3:-1] == ["one", "two"]  # then the prompt (bash's rc file may set it)


def test_an_abandoned_continuation_and_a_refusal_behind_a_block_are_each_reported(
    any_shell: Shell, shell_name: str
) -> None:
    assert any_shell.send("if true; then\n")["continuation"] == "if true; then"
    abandoned = any_shell.send("", keys=["C-c"])
    assert outcomes(abandoned) == [("if true; then", 130)]
    assert abandoned["continuation"] is None
    many = any_shell.send(f"{BLOCK[shell_name]}\necho )\necho after\n")
    assert outcomes(many) == [(BLOCK[shell_name], 0), ("echo )", SYNTAX_ERROR[shell_name]), ("echo after", 0)]
    assert many["exit_code"] == 0
    assert "x2" in many["viewport"]
