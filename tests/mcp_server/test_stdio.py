"""ptyd-mcp driven over stdio by the official MCP SDK's client, against a real daemon and real shells."""

from __future__ import annotations

import base64
import stat
import time
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp_types import ImageContent

from conftest import Daemon
from ptyd_mcp.identity import token_path
from sshd import HOST_ALIAS, Sshd

from .harness import fails, mcp_client, new_agent, ok, text_of

PROMPT = {"PS1": "$ "}
TOOLS = {
    "terminal_open",
    "terminal_send",
    "terminal_send_background",
    "terminal_integrate",
    "terminal_output",
    "terminal_wait",
    "terminal_cancel",
    "terminal_read",
    "terminal_screen",
    "terminal_screenshot",
    "terminal_signal",
    "terminal_resize",
    "terminal_close",
    "terminal_list",
}


def test_initialize_and_list_tools_with_their_schemas(daemon: Daemon) -> None:
    async def scenario() -> None:
        async with mcp_client(daemon.socket, new_agent()) as client:
            assert client.server_info is not None
            assert client.server_info.name == "ptyd-mcp"
            assert client.instructions
            assert "ptyctl watch" in client.instructions
            assert client.server_capabilities.tools is not None
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            assert set(tools) == TOOLS
            for tool in tools.values():
                assert len(tool.description or "") > 60, tool.name
                assert tool.input_schema["type"] == "object"
                assert "token" not in tool.input_schema.get("properties", {}), tool.name
                assert (tool.output_schema or {}).get("type") == "object", tool.name
            send = tools["terminal_send"]
            assert send.input_schema["required"] == ["session_id", "input"]
            assert "wait" not in send.input_schema["properties"]
            assert "Down" in send.input_schema["properties"]["keys"]["description"]
            for words in ("\\n", "\\u0003", "stdin_read", "inferred_idle", "timeout", "session_exit", "PASSWORD"):
                assert words in send.description + send.input_schema["properties"]["input"]["description"], words
            assert {"viewport", "wait_reason", "session_status"} <= set(send.output_schema["required"])
            # The defaults this server applies, declared as such (the daemon's own are false).
            for name in ("compact", "join_wrapped"):
                assert send.input_schema["properties"][name]["default"] is True, name
                assert "(default true)" in send.input_schema["properties"][name]["description"], name
            assert tools["terminal_read"].input_schema["properties"]["join_wrapped"]["default"] is True

    anyio.run(scenario)


def test_a_shell_driven_through_every_tool(daemon: Daemon) -> None:
    async def scenario() -> None:
        async with mcp_client(daemon.socket, new_agent()) as client:
            text, opened = await ok(client, "terminal_open", env=PROMPT, name="work", cols=100, rows=30)
            sid = opened["session_id"]
            assert opened["wait_reason"] == "stdin_read"
            assert f"Session {sid} is open" in text
            assert "100x30" in text

            text, sent = await ok(client, "terminal_send", session_id=sid, input="echo hello-$((6*7))\n")
            assert sent["wait_reason"] == "stdin_read"
            assert "hello-42" in sent["viewport"]
            assert text.startswith(sent["viewport"])
            assert text.splitlines()[-1].startswith("[stdin_read: `bash` is waiting for input")
            _, again = await ok(client, "terminal_send", session_id=sid, input="", keys=["Up", "Enter"])
            assert again["viewport"].count("hello-42") == 1  # the history's last line, run again

            text, read = await ok(client, "terminal_read", session_id=sid, start_line=-3)
            assert "hello-42" in read["lines"]
            assert "hello-42" in text
            assert f"of {read['total_lines']}]" in text

            text, screen = await ok(client, "terminal_screen", session_id=sid)
            assert "hello-42" in screen["lines"]
            assert "cursor at row" in text

            # The picture is an image content block, once: not again as base64 in the structured result.
            shot = await client.call_tool("terminal_screenshot", {"session_id": sid})
            assert not shot.is_error, text_of(shot)
            images = [block for block in shot.content if isinstance(block, ImageContent)]
            assert len(images) == 1
            assert images[0].mime_type == "image/png"
            assert base64.b64decode(images[0].data).startswith(b"\x89PNG\r\n\x1a\n")
            assert shot.structured_content is not None
            assert "png" not in shot.structured_content
            assert shot.structured_content["rows"] == len(screen["lines"])
            assert "cursor at row" in text_of(shot)

            text, resized = await ok(client, "terminal_resize", session_id=sid, cols=90, rows=20)
            assert (resized["cols"], resized["rows"]) == (90, 20)

            # A running program in front: the signal reaches it, not the shell, and the shell prompts again.
            text, sleeping = await ok(client, "terminal_send", session_id=sid, input="sleep 30\n", idle_ms=200)
            assert sleeping["wait_reason"] == "inferred_idle"
            assert "inferred_idle" in text
            assert "`sleep`" in text
            text, signalled = await ok(client, "terminal_signal", session_id=sid, signal="SIGINT")
            assert signalled["delivered"]
            assert signalled["signal"] == "SIGINT"
            _, after = await ok(client, "terminal_send", session_id=sid, input="")
            assert after["wait_reason"] == "stdin_read"
            assert after["foreground"]["name"] == "bash"

            text, listed = await ok(client, "terminal_list")
            assert [s["session_id"] for s in listed["sessions"]] == [sid]
            assert f"{sid} 'work': shell, running, foreground bash" in text

            text, closed = await ok(client, "terminal_close", session_id=sid)
            assert closed["closed"]
            assert f"Closed {sid}" in text
            text, again = await ok(client, "terminal_close", session_id=sid)
            assert not again["closed"]
            _, listed = await ok(client, "terminal_list")
            assert listed["sessions"] == []

    anyio.run(scenario)


def test_sessions_outlive_the_server_and_stay_with_their_agent(daemon: Daemon) -> None:
    agent = new_agent()

    async def first_server() -> str:
        async with mcp_client(daemon.socket, agent) as client:
            _, opened = await ok(client, "terminal_open", env=PROMPT)
            await ok(client, "terminal_send", session_id=opened["session_id"], input="cd /tmp; MARK=kept-$((2+3))\n")
            return str(opened["session_id"])

    async def second_server(sid: str) -> None:
        async with mcp_client(daemon.socket, agent) as client:
            text, listed = await ok(client, "terminal_list")
            assert [s["session_id"] for s in listed["sessions"]] == [sid]
            assert "registered anew" not in text
            _, sent = await ok(client, "terminal_send", session_id=sid, input="echo $MARK in $PWD\n")
            assert "kept-5 in /tmp" in sent["viewport"]

    async def other_agent(sid: str) -> None:
        async with mcp_client(daemon.socket, new_agent()) as client:
            _, listed = await ok(client, "terminal_list")
            assert listed["sessions"] == []
            for tool, extra in (("terminal_send", {"input": "echo stolen\n"}), ("terminal_read", {})):
                assert f"No session {sid} for this agent" in await fails(client, tool, session_id=sid, **extra)

    async def close(sid: str) -> None:
        async with mcp_client(daemon.socket, agent) as client:
            await ok(client, "terminal_close", session_id=sid)

    sid = anyio.run(first_server)  # the server process has exited here
    kept = token_path(daemon.socket, agent)
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert stat.S_IMODE(kept.parent.stat().st_mode) == 0o700
    anyio.run(second_server, sid)
    anyio.run(other_agent, sid)
    anyio.run(close, sid)


def test_two_servers_started_at_once_with_one_name_share_one_agent(daemon: Daemon) -> None:
    agent = new_agent()

    async def scenario() -> None:
        async with mcp_client(daemon.socket, agent) as first, mcp_client(daemon.socket, agent) as second:
            opened: list[str] = []

            async def open_in(client: Client) -> None:
                opened.append((await ok(client, "terminal_open", env=PROMPT))[1]["session_id"])

            async with anyio.create_task_group() as group:  # both register (or not) at the same moment
                group.start_soon(open_in, first)
                group.start_soon(open_in, second)
            for client in (first, second):
                _, listed = await ok(client, "terminal_list")
                assert sorted(s["session_id"] for s in listed["sessions"]) == sorted(opened)
            for sid in opened:
                await ok(first, "terminal_close", session_id=sid)

    anyio.run(scenario)


def test_bad_ids_busy_and_exited_sessions_are_tool_errors(daemon: Daemon) -> None:
    async def scenario() -> None:
        async with mcp_client(daemon.socket, new_agent()) as client:
            for tool, extra in (
                ("terminal_send", {"input": "ls\n"}),
                ("terminal_send_background", {"input": "ls\n"}),
                ("terminal_read", {}),
                ("terminal_screen", {}),
                ("terminal_screenshot", {}),
                ("terminal_signal", {"signal": "SIGINT"}),
                ("terminal_wait", {}),
                ("terminal_output", {}),
                ("terminal_cancel", {}),
                ("terminal_resize", {"cols": 80, "rows": 24}),
            ):
                message = await fails(client, tool, session_id="pty-nope", **extra)
                assert "No session pty-nope" in message, tool
                assert "terminal_list" in message, tool
            message = await fails(client, "terminal_send", session_id="pty-nope", input=5)
            assert message == "Invalid arguments: Expected `str`, got `int` - at `$.input`."
            message = await fails(client, "terminal_open", argv=["/nonexistent/program"], type="exec")
            assert "could not be started" in message
            assert "There is no tool" in await fails(client, "terminal_teleport")

            _, opened = await ok(client, "terminal_open", env=PROMPT)
            sid = opened["session_id"]
            _text, started = await ok(client, "terminal_send_background", session_id=sid, input="sleep 30\n")
            message = await fails(client, "terminal_send", session_id=sid, input="ls\n")
            assert "still running an earlier send" in message
            assert started["operation_id"] in message
            assert "terminal_wait" in message
            assert "terminal_cancel" in message
            await ok(client, "terminal_cancel", session_id=sid)
            await ok(client, "terminal_wait", session_id=sid)

            _, exiting = await ok(client, "terminal_send", session_id=sid, input="exit 3\n")
            assert exiting["wait_reason"] == "session_exit"
            message = await fails(client, "terminal_send", session_id=sid, input="ls\n")
            assert "has exited" in message
            assert "terminal_close" in message
            await ok(client, "terminal_close", session_id=sid)
            _, listed = await ok(client, "terminal_list")  # still serving
            assert listed["sessions"] == []

    anyio.run(scenario)


def test_background_send_output_and_wait(daemon: Daemon) -> None:
    async def scenario() -> None:
        async with mcp_client(daemon.socket, new_agent()) as client:
            _, opened = await ok(client, "terminal_open", env=PROMPT)
            sid = opened["session_id"]
            script = "for i in 1 2 3; do echo line-$i; sleep 0.2; done\n"
            text, started = await ok(client, "terminal_send_background", session_id=sid, input=script)
            assert started["operation_id"] in text
            text, waited = await ok(client, "terminal_wait", session_id=sid, timeout_ms=0)
            # Not done at once; the line says what to do next.
            assert not waited["done"]
            assert "still running" in text
            text, waited = await ok(client, "terminal_wait", session_id=sid)
            assert waited["done"]
            assert waited["operation_id"] == started["operation_id"]
            assert "line-3" in waited["result"]["viewport"]
            assert "[stdin_read" in text
            text, output = await ok(client, "terminal_output", session_id=sid)
            assert output["done"]
            assert "line-1\n" in output["output"]
            assert "line-3\n" in output["output"]
            await ok(client, "terminal_close", session_id=sid)

    anyio.run(scenario)


def test_long_send_reports_progress(daemon: Daemon) -> None:
    reports: list[tuple[float, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        reports.append((progress, message))

    async def scenario() -> None:
        async with mcp_client(daemon.socket, new_agent()) as client:
            _, opened = await ok(client, "terminal_open", env=PROMPT)
            sid = opened["session_id"]
            script = "for i in 1 2 3 4; do echo step-$i; sleep 0.4; done\n"
            result = await client.call_tool(
                "terminal_send", {"session_id": sid, "input": script}, progress_callback=on_progress
            )
            assert not result.is_error
            assert result.structured_content is not None
            assert "step-4" in result.structured_content["viewport"]
            await ok(client, "terminal_close", session_id=sid)

    anyio.run(scenario)
    assert len(reports) >= 2, reports
    assert [p for p, _ in reports] == sorted(p for p, _ in reports)
    assert any(message and message.startswith("step-") for _, message in reports), reports


def test_a_cancelled_send_is_cancelled_in_the_daemon(daemon: Daemon) -> None:
    async def busy(client: Client, sid: str) -> dict[str, Any]:
        _, listed = await ok(client, "terminal_list")
        return next(s for s in listed["sessions"] if s["session_id"] == sid)

    async def scenario() -> None:
        async with mcp_client(daemon.socket, new_agent()) as client:
            _, opened = await ok(client, "terminal_open", env=PROMPT)
            sid = opened["session_id"]
            began = time.monotonic()
            async with anyio.create_task_group() as group:
                arguments = {"session_id": sid, "input": "sleep 30\n", "idle_ms": 60_000}
                group.start_soon(client.call_tool, "terminal_send", arguments)
                # The daemon reports the send running with sleep in front: then the host gives up on the call.
                with anyio.fail_after(20):
                    while True:
                        info = await busy(client, sid)
                        if info["busy"] and info["foreground"]["name"] == "sleep":
                            break
                        await anyio.sleep(0.02)
                group.cancel_scope.cancel()
            text, waited = await ok(client, "terminal_wait", session_id=sid, timeout_ms=10_000)
            assert waited["done"], text
            assert waited["result"]["wait_reason"] == "stdin_read"
            assert waited["result"]["foreground"]["name"] == "bash"
            assert waited["result"]["viewport"].startswith("$ sleep 30")
            assert time.monotonic() - began < 20  # interrupted: not the sleep's 30 s
            await ok(client, "terminal_close", session_id=sid)

    anyio.run(scenario)


def test_a_daemon_that_is_down_is_an_error_the_model_reads(fresh_daemon: Daemon) -> None:
    async def scenario() -> None:
        async with mcp_client(fresh_daemon.socket, new_agent()) as client:
            message = await fails(client, "terminal_list")
            assert f"ptyd is not available at {fresh_daemon.socket}" in message
            assert "start it" in message
            assert "`ptyd`" in message
            # The same server serves once the daemon is up.
            await anyio.to_thread.run_sync(fresh_daemon.start)
            _, listed = await ok(client, "terminal_list")
            assert listed["sessions"] == []

    anyio.run(scenario)


def test_a_daemon_restart_registers_anew_and_says_sessions_are_gone(fresh_daemon: Daemon) -> None:
    agent = new_agent()
    fresh_daemon.start()

    async def scenario() -> None:
        async with mcp_client(fresh_daemon.socket, agent) as client:
            _, opened = await ok(client, "terminal_open", env=PROMPT)
            stale = token_path(fresh_daemon.socket, agent).read_text()
            await anyio.to_thread.run_sync(fresh_daemon.stop)
            await anyio.to_thread.run_sync(fresh_daemon.start)
            text, listed = await ok(client, "terminal_list")
            assert listed["sessions"] == []
            assert "registered anew" in text
            assert "sessions opened before are gone" in text
            assert token_path(fresh_daemon.socket, agent).read_text() != stale
            message = await fails(client, "terminal_send", session_id=opened["session_id"], input="ls\n")
            assert "No session" in message
            text, _ = await ok(client, "terminal_list")
            assert "registered anew" not in text  # said once

    anyio.run(scenario)


def test_ssh_then_terminal_integrate_gives_exact_readiness_and_exit_codes(daemon: Daemon, sshd: Sshd) -> None:
    async def scenario() -> None:
        async with mcp_client(daemon.socket, new_agent()) as client:
            _, opened = await ok(client, "terminal_open", env=PROMPT)
            sid = opened["session_id"]
            login = f"ssh -F {sshd.client_config} {HOST_ALIAS}\n"
            text, remote = await ok(client, "terminal_send", session_id=sid, input=login, timeout_ms=20_000)
            assert remote["relay"] == "ssh", text
            text, integrated = await ok(client, "terminal_integrate", session_id=sid, timeout_ms=20_000)
            assert integrated["wait_reason"] == "stdin_read", text
            text, failed = await ok(client, "terminal_send", session_id=sid, input="false\n")
            assert failed["ready_basis"] == "shell_integration", text
            assert failed["exit_code"] == 1
            assert "the last command exited with code 1" in text
            await ok(client, "terminal_close", session_id=sid)

    anyio.run(scenario)


def test_a_real_password_prompt_is_called_out(daemon: Daemon) -> None:
    async def scenario() -> None:
        async with mcp_client(daemon.socket, new_agent()) as client:
            _, opened = await ok(client, "terminal_open", env=PROMPT)
            sid = opened["session_id"]
            text, asked = await ok(client, "terminal_send", session_id=sid, input="read -s -p 'Password: ' secret\n")
            assert asked["password_prompt"] is True
            assert asked["wait_reason"] == "stdin_read"
            assert f"PASSWORD PROMPT: the program in session {sid}" in text
            assert "ask the human" in text
            text, listed = await ok(client, "terminal_list")
            assert listed["sessions"][0]["password_prompt"] is True
            assert "PASSWORD PROMPT (ask the human)" in text
            # Answered (here by the test, as the human would through ptyctl attach), the call-out is gone.
            text, answered = await ok(client, "terminal_send", session_id=sid, input="hunter2\n")
            assert answered["password_prompt"] is False
            assert "PASSWORD" not in text
            await ok(client, "terminal_close", session_id=sid)

    anyio.run(scenario)


def test_agents_defaults_named_waits_and_output_economy(daemon: Daemon) -> None:
    async def scenario() -> None:
        async with mcp_client(daemon.socket, new_agent()) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            send = tools["terminal_send"]
            assert "until='Serving HTTP|listening on'" in send.description
            assert {"until", "until_stable_ms", "compact", "join_wrapped"} <= set(send.input_schema["properties"])
            assert "env_profile" in tools["terminal_open"].input_schema["properties"]
            text, opened = await ok(client, "terminal_open", env=PROMPT, cols=80, rows=24)
            sid = opened["session_id"]
            assert opened["env_profile"] == "agent"
            _, probed = await ok(client, "terminal_send", session_id=sid, input="echo pager=$PAGER\n")
            assert "pager=cat" in probed["viewport"].splitlines()

            text, served = await ok(
                client,
                "terminal_send",
                session_id=sid,
                input="python3 -m http.server 0 --bind 127.0.0.1\n",
                until="Serving HTTP|listening on",
            )
            assert served["wait_reason"] == "matched"
            port = served["listening"][0]["port"]
            assert text.splitlines()[-1].startswith("[matched: until found 'Serving HTTP' on line ")
            assert f"listening on 127.0.0.1:{port}" in text
            await ok(client, "terminal_send", session_id=sid, input="\u0003")

            # The model's defaults: compact, logical lines, an 8 KiB budget.
            text, flood = await ok(
                client, "terminal_send", session_id=sid, input="yes | head -5000; printf '%0200d\\n' 1\n"
            )
            assert flood["compacted"] == 4999
            lines = flood["viewport"].splitlines()
            assert lines[1:3] == [
                "y",
                f"[... the line above 4999 more times: lines {flood['lines']['start_line'] + 2}-"
                f"{flood['lines']['start_line'] + 5000} ...]",
            ]
            assert "1".rjust(200, "0") in lines
            assert "folded" in text
            _, big = await ok(client, "terminal_send", session_id=sid, input="seq 1 100000\n")
            assert len(big["viewport"].encode()) <= 8192
            _, raw = await ok(
                client, "terminal_send", session_id=sid, input="seq 1 100000\n", compact=False, max_bytes=32768
            )
            assert 8192 < len(raw["viewport"].encode()) <= 32768
            await ok(client, "terminal_close", session_id=sid)

    anyio.run(scenario)


@pytest.mark.parametrize("kind", ["stdin_read", "timeout", "session_exit", "inferred_idle", "matched", "stable"])
def test_every_wait_reason_says_what_next(kind: str) -> None:
    from ptyd_mcp import text

    result = {
        "viewport": "$ x",
        "wait_reason": kind,
        "session_status": {"kind": "exited", "exit_code": 3, "signal": None},
        "foreground": {"pid": 1, "pgid": 1, "name": "make"},
        "alt_screen": False,
        "truncated": False,
    }
    line = text.send(result, "pty-1").splitlines()[-1]
    assert line.startswith(f"[{kind}")
    if kind != "stdin_read":
        assert "terminal_" in line or "send input ''" in line
    if kind == "session_exit":
        assert "exited with code 3" in line


def test_a_full_screen_program_points_the_model_to_keys() -> None:
    from ptyd_mcp import text

    result = {"viewport": "htop", "wait_reason": "stdin_read", "alt_screen": True}
    line = text.send(result, "pty-2").splitlines()[-1]
    assert "full-screen" in line
    assert 'keys (["Down"]' in line
    assert "keys" not in text.send({**result, "alt_screen": False}, "pty-2").splitlines()[-1]


def test_a_password_prompt_tells_the_model_to_ask_the_human() -> None:
    from ptyd_mcp import text

    result = {"viewport": "[sudo] password for me:", "wait_reason": "stdin_read", "password_prompt": True}
    said = text.send(result, "pty-9")
    assert "PASSWORD PROMPT" in said
    assert "ask the human" in said
    assert "ptyctl attach pty-9" in said
    assert "PASSWORD" not in text.send({**result, "password_prompt": False}, "pty-9")


def test_result_text_reads_fields_a_newer_daemon_adds() -> None:
    from ptyd_mcp import text

    result = {
        "viewport": "$",
        "wait_reason": "stdin_read",
        "exit_code": 2,
        "cwd": "/srv",
        "ready_basis": "relay_quiet",
        "relay": "ssh",
    }
    line = text.send(result, "pty-1").splitlines()[-1]
    assert "exited with code 2" in line
    assert "cwd /srv" in line
    assert "through ssh" in line
    assert "terminal_integrate" in line


def test_text_of_a_tool_error_names_the_session() -> None:
    from ptyd_client import SessionBusy
    from ptyd_mcp import text

    busy = SessionBusy(-32003, "busy", {"kind": "session_busy", "operation_id": "op-1"})
    assert "Session pty-2 is still running an earlier send (op-1)" in text.error(busy, "pty-2")
