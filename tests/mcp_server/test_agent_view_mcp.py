"""What a model reads through ptyd-mcp of what happened between its calls (issue 26): the official MCP SDK's client
drives the real server over stdio against a real daemon and real shells."""

from __future__ import annotations

import anyio

from conftest import Daemon

from .harness import mcp_client, new_agent, ok

PROMPT = {"PS1": "$ "}


def test_a_command_that_ends_between_calls_reaches_the_model(daemon: Daemon) -> None:
    async def scenario() -> None:
        async with mcp_client(daemon.socket, new_agent()) as client:
            _, opened = await ok(client, "terminal_open", env=PROMPT)
            sid = opened["session_id"]
            command = "sleep 0.4; echo RES''ULT; false"
            text, first = await ok(client, "terminal_send", session_id=sid, input=command + "\n", idle_ms=100)
            assert first["wait_reason"] == "inferred_idle"
            assert f"[running: `{command}`" in text

            async def printed() -> bool:
                _, read = await ok(client, "terminal_read", session_id=sid, start_line=-3)
                lines = [line for line in read["lines"] if line.strip()]
                return lines[-2:] == ["RESULT", "$"]

            for _ in range(400):  # terminal_read consumes nothing: the next send still reports what it reads
                if await printed():
                    break
                await anyio.sleep(0.05)
            else:
                raise AssertionError("RESULT and a prompt never appeared")
            text, second = await ok(client, "terminal_send", session_id=sid, input="")
            assert "RESULT" in second["viewport"]
            assert second["exit_code"] == 1
            assert "the last command exited with code 1" in text
            assert "printed between your calls" in text

    anyio.run(scenario)


def test_a_long_single_line_keeps_its_head_and_tail(daemon: Daemon) -> None:
    async def scenario() -> None:
        async with mcp_client(daemon.socket, new_agent()) as client:
            _, opened = await ok(client, "terminal_open", env=PROMPT)
            script = "import json; print(json.dumps({'head': 'START', 'pad': 'x' * 14000, 'tail': 'END'}))"
            sid = opened["session_id"]
            text, _ = await ok(client, "terminal_send", session_id=sid, input=f'python3 -c "{script}"\n')
            assert '{"head": "START"' in text
            assert '"tail": "END"}' in text
            assert "characters cut" in text

    anyio.run(scenario)


def test_a_command_left_open_and_a_refused_line_reach_the_model(daemon: Daemon) -> None:
    async def scenario() -> None:
        async with mcp_client(daemon.socket, new_agent()) as client:
            _, opened = await ok(client, "terminal_open", env=PROMPT)
            sid = opened["session_id"]
            text, open_ = await ok(client, "terminal_send", session_id=sid, input="echo 'one\n")
            assert open_["continuation"] == "echo 'one"
            assert "[continuation: the shell has read `echo 'one`" in text
            text, closed = await ok(client, "terminal_send", session_id=sid, input="two'\necho )\n")
            assert closed["continuation"] is None
            assert "[continuation" not in text
            ended = [(c["command"], c["exit_code"]) for c in closed["commands"]]
            assert ended == [("echo 'one\ntwo'", 0), ("echo )", 2)]
            assert "[ended: `echo )` exited with code 2" in text

    anyio.run(scenario)
