"""Resumable streams over ptyd-mcp's streamable HTTP (SEP-1699): a terminal_send whose stream drops mid-wait is
picked up again with Last-Event-ID, by a real HTTP client speaking the wire as a host does."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import httpx2
import pytest

from conftest import Daemon

from .test_http_and_packaging import serving_http

VERSION = "2025-11-25"


@pytest.fixture
def endpoint(daemon: Daemon) -> Iterator[tuple[str, dict[str, str]]]:
    """ptyd-mcp over HTTP: its URL and the bearer header every request needs."""
    with serving_http(daemon.socket, None) as (url, _, auth):
        yield url, auth


async def sse_events(response: httpx2.Response) -> AsyncIterator[dict[str, str]]:
    """The server-sent events of ``response``, each as its fields (data lines joined)."""
    event: dict[str, str] = {}
    async for line in response.aiter_lines():
        if not line:
            if event:
                yield event
            event = {}
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        event[name] = event[name] + "\n" + value if name == "data" and name in event else value


class Host:
    """What a host does on the wire: POST each message, read the SSE answer, keep the session id."""

    def __init__(self, http: httpx2.AsyncClient, url: str) -> None:
        self.http, self.url, self.session = http, url, ""

    def headers(self, **extra: str) -> dict[str, str]:
        headers = {"accept": "application/json, text/event-stream", "mcp-protocol-version": VERSION, **extra}
        if self.session:
            headers["mcp-session-id"] = self.session
        return headers

    async def call(self, message: dict[str, Any]) -> dict[str, Any]:
        async with self.http.stream("POST", self.url, json=message, headers=self.headers()) as response:
            assert response.status_code == 200, await response.aread()
            self.session = response.headers.get("mcp-session-id", self.session)
            async for event in sse_events(response):
                if event.get("data"):
                    return dict(json.loads(event["data"]))
        raise AssertionError("no answer on the stream")

    async def notify(self, message: dict[str, Any]) -> None:
        response = await self.http.post(self.url, json=message, headers=self.headers())
        assert response.status_code == 202, response.text

    async def initialize(self, version: str = VERSION) -> None:
        """The handshake, asking for ``version``; the server must agree to it."""
        init = {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
        answer = await self.call({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init})
        assert answer["result"]["protocolVersion"] == version
        await self.notify({"jsonrpc": "2.0", "method": "notifications/initialized"})


def tool(request_id: int, name: str, **arguments: Any) -> dict[str, Any]:
    params = {"name": name, "arguments": arguments}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def test_a_send_whose_stream_dropped_is_resumed_with_last_event_id(
    endpoint: tuple[str, dict[str, str]], tmp_path: Path
) -> None:
    http_url, auth = endpoint
    fifo = tmp_path / "line"
    os.mkfifo(fifo)

    def write_line() -> None:
        with fifo.open("w") as f:  # opens once the command reads the FIFO
            f.write("resumed-42\n")

    async def scenario() -> None:
        async with httpx2.AsyncClient(timeout=60, headers=auth) as http:
            host = Host(http, http_url)
            await host.initialize()
            opened = await host.call(tool(2, "terminal_open", env={"PS1": "$ "}))
            sid = opened["result"]["structuredContent"]["session_id"]

            # The send waits until its command prints got-: its stream opens with the priming event (an id, no
            # data, and retry), and the host drops the connection there, while the send still waits.
            command = f"read -r line < {fifo}; echo got-$line\n"
            send = tool(3, "terminal_send", session_id=sid, input=command, until="got-", timeout_ms=60_000)
            async with http.stream("POST", http_url, json=send, headers=host.headers()) as response:
                assert response.status_code == 200
                events = sse_events(response)
                priming = await anext(events)
            assert priming.get("data", "") == ""
            assert priming["id"], "the priming event has no id"
            assert int(priming["retry"]) > 0, "the priming event has no retry"

            # Only now does the command get its line, and the send its answer: on no open stream.
            await anyio.to_thread.run_sync(write_line)

            # The dropped stream resumes from the priming event's id: the send's own answer arrives.
            headers = host.headers(**{"last-event-id": priming["id"], "accept": "text/event-stream"})
            message: dict[str, Any] = {}
            async with http.stream("GET", http_url, headers=headers) as response:
                assert response.status_code == 200, await response.aread()
                async for event in sse_events(response):
                    if event.get("data"):
                        message = json.loads(event["data"])
                        if message.get("id") == 3:
                            break
            assert message.get("id") == 3, message
            result = message["result"]
            assert not result.get("isError"), result
            assert result["structuredContent"]["wait_reason"] == "matched"
            assert "got-resumed-42" in result["structuredContent"]["viewport"]
            assert event["id"] != priming["id"]

    anyio.run(scenario)


def test_an_unknown_event_id_replays_nothing(endpoint: tuple[str, dict[str, str]]) -> None:
    http_url, auth = endpoint

    async def scenario() -> None:
        async with httpx2.AsyncClient(timeout=60, headers=auth) as http:
            host = Host(http, http_url)
            await host.initialize()
            headers = host.headers(**{"last-event-id": "nope/7", "accept": "text/event-stream"})
            with anyio.fail_after(20):  # it ends instead of waiting
                async with http.stream("GET", http_url, headers=headers) as response:
                    body = (await response.aread()).decode()
            assert response.status_code == 200  # the stream ends at once: nothing to resume, no error
            assert "data: {" not in body

    anyio.run(scenario)


def test_a_resumed_stream_replays_its_own_sessions_events_only(endpoint: tuple[str, dict[str, str]]) -> None:
    """Two hosts number their requests alike: A's request 3 drops after its priming event, B's request 3 is answered,
    and A resumes. A gets its own answer, never B's (one store served every session and named streams by request
    id: A was replayed both, another agent's output under the id it waited for); and B's event ids replay nothing
    to A."""
    http_url, auth = endpoint

    async def answer_of(host: Host, message: dict[str, Any]) -> tuple[dict[str, Any], str]:
        async with host.http.stream("POST", http_url, json=message, headers=host.headers()) as response:
            async for event in sse_events(response):
                if event.get("data"):
                    return json.loads(event["data"]), event["id"]
        raise AssertionError("no answer")

    async def resumed(host: Host, last_event_id: str) -> list[dict[str, Any]]:
        headers = host.headers(**{"last-event-id": last_event_id, "accept": "text/event-stream"})
        got: list[dict[str, Any]] = []
        async with host.http.stream("GET", http_url, headers=headers) as response:
            async for event in sse_events(response):
                if event.get("data"):
                    got.append(json.loads(event["data"]))
                    if got[-1].get("id") == 3:
                        break
        return got

    async def scenario() -> None:
        async with httpx2.AsyncClient(timeout=60, headers=auth) as http:
            a, b = Host(http, http_url), Host(http, http_url)
            await a.initialize()
            await b.initialize()
            sid_a = (await a.call(tool(2, "terminal_open", env={"PS1": "$ "})))["result"]["structuredContent"]
            sid_b = (await b.call(tool(2, "terminal_open", env={"PS1": "$ "})))["result"]["structuredContent"]
            send_a = tool(3, "terminal_send", session_id=sid_a["session_id"], input="echo from-a\n")
            async with http.stream("POST", http_url, json=send_a, headers=a.headers()) as response:
                priming = await anext(sse_events(response))  # A's stream drops here
            send_b = tool(3, "terminal_send", session_id=sid_b["session_id"], input="echo secret-of-b\n")
            answer_b, b_event = await answer_of(b, send_b)
            assert "secret-of-b" in answer_b["result"]["structuredContent"]["viewport"]
            with anyio.fail_after(30):
                got = await resumed(a, priming["id"])
            views = [m["result"]["structuredContent"]["viewport"] for m in got if m.get("id") == 3]
            assert len(views) == 1, views
            assert "from-a" in views[0]
            assert not any("secret-of-b" in json.dumps(m) for m in got), got
            # B's own event id, handed to A's session: nothing of B's.
            headers = a.headers(**{"last-event-id": b_event, "accept": "text/event-stream"})
            with anyio.fail_after(20):
                async with http.stream("GET", http_url, headers=headers) as response:
                    body = (await response.aread()).decode()
            assert "secret-of-b" not in body

    anyio.run(scenario)


def test_an_answer_stored_between_a_replay_and_the_live_tail_waits_for_the_tail(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The SDK replays a resumed stream, stores its priming event, and only then makes the stream live: an answer
    stored in between was lost, and the host waited forever (once in CI). It now waits to be stored until the
    stream is live, then the SDK forwards it; the priming event does not wait (the SDK awaits it before going live);
    and a stream that never goes live holds an answer HTTP_RESUME_LIVE_WAIT_S at most."""
    from mcp_types import JSONRPCResponse

    from ptyd_mcp import events

    async def scenario() -> None:
        transport = SimpleNamespace(_request_streams={})
        store = events.SessionEvents(events.MemoryEventStore(), "s1", transport)
        priming = await store.store_event("3", None)  # the original request's stream, dropped after this
        replayed: list[object] = []

        async def take(message: object) -> None:
            replayed.append(message)

        assert await store.replay_events_after(priming, take) == "3"
        stored: list[str] = []
        answer = JSONRPCResponse(jsonrpc="2.0", id=3, result={})
        async with anyio.create_task_group() as tasks:

            async def router() -> None:
                stored.append(await store.store_event("3", answer))

            tasks.start_soon(router)
            with anyio.fail_after(5):
                await store.store_event("3", None)  # the resumed stream's priming event: at once
            await anyio.sleep(0.05)  # the router's store is held meanwhile (proving absence)
            assert stored == []
            transport._request_streams["3"] = object()  # the SDK makes it live
        assert len(stored) == 1
        assert replayed == []  # nothing after the priming event was replayed: the answer goes live
        monkeypatch.setattr(events, "HTTP_RESUME_LIVE_WAIT_S", 0.1)
        never = events.SessionEvents(events.MemoryEventStore(), "s2", SimpleNamespace(_request_streams={}))
        assert await never.replay_events_after(await never.store_event("4", None), take) == "4"
        with anyio.fail_after(5):
            await never.store_event("4", answer)  # given up on after the bound

    anyio.run(scenario)


@pytest.mark.parametrize(("negotiated", "primed"), [("2025-11-25", True), ("2025-03-26", False)])
def test_the_sessions_version_decides_priming_not_a_stray_header(
    endpoint: tuple[str, dict[str, str]], negotiated: str, primed: bool
) -> None:
    """A session that negotiated 2025-11-25 gets a priming event (id, no data, retry) on a request that declares
    2025-03-26 (the MCP conformance suite's server-sse-polling does); one that negotiated 2025-03-26 gets none,
    as its client may not parse it."""
    http_url, auth = endpoint

    async def scenario() -> None:
        async with httpx2.AsyncClient(timeout=60, headers=auth) as http:
            host = Host(http, http_url)
            await host.initialize(negotiated)
            headers = host.headers(**{"mcp-protocol-version": "2025-03-26"})
            async with http.stream("POST", http_url, json=tool(2, "terminal_list"), headers=headers) as response:
                assert response.status_code == 200, await response.aread()
                events = [event async for event in sse_events(response)]
            first = events[0]
            if primed:
                assert first.get("data", "") == "", events
                assert first["id"], "the priming event has no id"
                assert int(first["retry"]) > 0, "the priming event has no retry"
                assert json.loads(events[1]["data"])["id"] == 2
            else:
                assert json.loads(first["data"])["id"] == 2, events

    anyio.run(scenario)
