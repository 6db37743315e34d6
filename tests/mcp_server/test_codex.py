"""ptyd-mcp's codex tool set (``--tools codex``): the transcripts of tool calls a Codex-trained model makes, driven
by the official MCP SDK client over stdio against a real daemon, with Codex's result text parsed the way harnesses
parse it."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

from conftest import Daemon

from .harness import mcp_client, new_agent, text_of

RUNNING = re.compile(r"^Process running with session ID (\d+)$", re.M)
EXITED = re.compile(r"^Process exited with code (-?\d+)$", re.M)


@dataclass(frozen=True)
class Answer:
    """One result as a harness reads Codex's text."""

    text: str
    session_id: int | None
    exit_code: int | None
    output: str
    structured: dict[str, Any]


async def call(client: Client, tool: str, **arguments: Any) -> Answer:
    result = await client.call_tool(tool, arguments)
    text = text_of(result)
    assert not result.is_error, text
    head, sep, output = text.partition("\nOutput:\n")
    assert sep, text
    lines = head.splitlines()
    assert re.fullmatch(r"Chunk ID: [0-9a-f]{6}", lines[0]), text
    assert re.fullmatch(r"Wall time: \d+\.\d{4} seconds", lines[1]), text
    assert re.fullmatch(r"Original token count: \d+", lines[-1]), text
    running, exited = RUNNING.search(head), EXITED.search(head)
    assert (running is None) != (exited is None), text  # exactly one of the two
    assert result.structured_content is not None
    return Answer(
        text,
        int(running.group(1)) if running else None,
        int(exited.group(1)) if exited else None,
        output,
        result.structured_content,
    )


def codex(daemon: Daemon) -> Any:
    return mcp_client(daemon.socket, new_agent(), "--tools", "codex")


def test_the_codex_tool_set_has_codex_names_and_parameters(daemon: Daemon) -> None:
    async def scenario() -> None:
        async with codex(daemon) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            assert set(tools) == {"exec_command", "write_stdin"}
            exec_params = tools["exec_command"].input_schema
            assert exec_params["required"] == ["cmd"]
            assert {"cmd", "workdir", "shell", "login", "tty", "yield_time_ms", "max_output_tokens"} <= set(
                exec_params["properties"]
            )
            write_params = tools["write_stdin"].input_schema
            assert write_params["required"] == ["session_id"]
            assert set(write_params["properties"]) == {"session_id", "chars", "yield_time_ms", "max_output_tokens"}

    anyio.run(scenario)


def test_a_short_command_exits_in_one_call(daemon: Daemon, tmp_path: Path) -> None:
    async def scenario() -> None:
        async with codex(daemon) as client:
            hi = await call(client, "exec_command", cmd="echo hi")
            assert (hi.exit_code, hi.session_id, hi.output) == (0, None, "hi\n")
            assert hi.structured["original_token_count"] == 1  # 3 bytes, 4 to a token
            failed = await call(client, "exec_command", cmd="cd sub && pwd && exit 3", workdir=str(tmp_path))
            assert failed.exit_code == 1  # no sub yet: cd fails, as in bash
            (tmp_path / "sub").mkdir()
            moved = await call(client, "exec_command", cmd="cd sub && pwd && exit 3", workdir=str(tmp_path))
            assert (moved.exit_code, moved.output) == (3, f"{tmp_path / 'sub'}\n")
            # The session ended with its report: ptyd keeps no session for it.
            listed = await client.call_tool("exec_command", {"cmd": "true"})
            assert "Process exited with code 0" in text_of(listed)

    anyio.run(scenario)


def test_a_long_command_is_polled_until_it_exits(daemon: Daemon) -> None:
    script = "for i in 1 2 3 4 5 6; do echo tick $i; sleep 0.4; done; exit 7"

    async def scenario() -> None:
        async with codex(daemon) as client:
            first = await call(client, "exec_command", cmd=script, yield_time_ms=500)
            assert first.session_id is not None, first.text
            assert "tick 1" in first.output
            seen = [first.output]
            answer = first
            while answer.exit_code is None:
                answer = await call(client, "write_stdin", session_id=first.session_id, chars="", yield_time_ms=500)
                seen.append(answer.output)
            assert answer.exit_code == 7
            # Each tick once, in order, across the calls: every call returns what came since the previous one.
            ticks = re.findall(r"tick \d", "".join(seen))
            assert ticks == [f"tick {i}" for i in range(1, 7)], seen
            gone = await client.call_tool("write_stdin", {"session_id": first.session_id, "chars": ""})
            assert gone.is_error
            assert f"Unknown session ID {first.session_id}" in text_of(gone)

    anyio.run(scenario)


def test_a_command_that_ends_between_polls_reports_its_output_and_code(daemon: Daemon, tmp_path: Path) -> None:
    gate, done = tmp_path / "gate", tmp_path / "done"
    os.mkfifo(gate)
    os.mkfifo(done)
    # It waits for the test to open its gate, prints, says so through a FIFO, and exits 5 while nobody polls.
    script = f"echo waiting; read -r _ < {gate}; echo finished; echo > {done}; exit 5"

    async def scenario() -> None:
        async with codex(daemon) as client:
            first = await call(client, "exec_command", cmd=script, yield_time_ms=300)
            assert first.session_id is not None
            seen = first.output
            while seen != "waiting\n":  # a login shell under load may take longer than the yield to print it
                poll = await call(client, "write_stdin", session_id=first.session_id, chars="", yield_time_ms=300)
                assert poll.session_id == first.session_id
                seen += poll.output
            await anyio.to_thread.run_sync(gate.write_text, "go\n")
            await anyio.to_thread.run_sync(done.read_text)
            last = await call(client, "write_stdin", session_id=first.session_id, chars="", yield_time_ms=5000)
            assert (last.exit_code, last.session_id) == (5, None)
            assert last.output == "finished\n"

    anyio.run(scenario)


def test_write_stdin_types_into_the_running_command(daemon: Daemon) -> None:
    async def scenario() -> None:
        async with codex(daemon) as client:
            started = await call(client, "exec_command", cmd="read -r -p 'name? ' name; echo hello $name")
            # It waits for input: ptyd sees the read and returns before the 10 s yield.
            assert started.session_id is not None
            assert started.structured["wall_time_seconds"] < 5
            assert started.output == "name?"  # the screen's line: its trailing blank is not kept
            answered = await call(client, "write_stdin", session_id=started.session_id, chars="ptyd\n")
            if answered.exit_code is None:  # 250 ms passed before bash printed and exited: poll
                answered = await call(client, "write_stdin", session_id=started.session_id, chars="")
            assert answered.exit_code == 0
            # The echo of what was typed, then the answer; the prompt is not returned twice.
            assert answered.output == "ptyd\nhello ptyd\n"

    anyio.run(scenario)


def test_output_over_the_budget_keeps_head_and_tail(daemon: Daemon) -> None:
    async def scenario() -> None:
        async with codex(daemon) as client:
            answer = await call(client, "exec_command", cmd="seq 1 5000", max_output_tokens=100)
            assert answer.exit_code == 0
            assert answer.output.startswith("1\n2\n3\n")
            assert answer.output.endswith("4999\n5000\n")
            assert re.search(r"…\d+ tokens truncated…", answer.output)
            assert len(answer.output.encode()) < 500
            full = sum(len(f"{i}\n") for i in range(1, 5001))
            assert answer.structured["original_token_count"] == -(-full // 4)

    anyio.run(scenario)


def test_a_command_outlives_the_server_and_its_id_stays_valid(daemon: Daemon, tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    agent = new_agent()

    async def scenario() -> None:
        async with mcp_client(daemon.socket, agent, "--tools", "codex") as client:
            started = await call(
                client, "exec_command", cmd=f"echo before; read -r _ < {gate}; echo after; exit 4", yield_time_ms=300
            )
            assert started.session_id is not None
        # The host restarted its server; the command ran on in ptyd.
        await anyio.to_thread.run_sync(gate.write_text, "go\n")
        async with mcp_client(daemon.socket, agent, "--tools", "codex") as client:
            last = await call(client, "write_stdin", session_id=started.session_id, chars="", yield_time_ms=5000)
            assert last.exit_code == 4
            assert last.output.endswith("after\n")  # from the start of what the terminal kept, as said

    anyio.run(scenario)


def test_prompts_answered_in_turn_are_each_returned_once(daemon: Daemon) -> None:
    async def scenario() -> None:
        async with codex(daemon) as client:
            cmd = "read -r -p 'a? ' a; read -r -p 'b? ' b; echo \"$a-$b\""
            asked = await call(client, "exec_command", cmd=cmd)
            assert (asked.session_id is not None, asked.output) == (True, "a?")
            second = await call(client, "write_stdin", session_id=asked.session_id, chars="1\n")
            assert second.output == "1\nb?"
            last = await call(client, "write_stdin", session_id=asked.session_id, chars="2\n")
            while last.exit_code is None:  # bash printed and exits after the 250 ms a write waits
                more = await call(client, "write_stdin", session_id=asked.session_id, chars="")
                last = Answer(last.text, more.session_id, more.exit_code, last.output + more.output, more.structured)
            assert (last.exit_code, last.output) == (0, "2\n1-2\n")

    anyio.run(scenario)


def test_a_command_killed_by_a_signal_exits_with_128_plus_its_number(daemon: Daemon) -> None:
    async def scenario() -> None:
        async with codex(daemon) as client:
            killed = await call(client, "exec_command", cmd="echo going; kill -KILL $$")
            assert (killed.exit_code, killed.output) == (137, "going\n")

    anyio.run(scenario)


def test_a_poll_the_host_cancelled_leaves_the_command_running_and_writable(daemon: Daemon) -> None:
    async def scenario() -> None:
        async with codex(daemon) as client:
            started = await call(client, "exec_command", cmd="sleep 2; read -r line; echo got $line", yield_time_ms=250)
            assert started.session_id is not None
            with anyio.move_on_after(0.5) as scope:  # the host gives up on a long poll: the SDK cancels the call
                await client.call_tool("write_stdin", {"session_id": started.session_id, "yield_time_ms": 1500})
            assert scope.cancelled_caught
            answer = await call(client, "write_stdin", session_id=started.session_id, chars="typed\n")
            while answer.exit_code is None:
                more = await call(client, "write_stdin", session_id=started.session_id, chars="")
                answer = Answer("", more.session_id, more.exit_code, answer.output + more.output, more.structured)
            assert answer.exit_code == 0
            assert "got typed" in answer.output

    anyio.run(scenario)
